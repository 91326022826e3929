#!/usr/bin/env bash
# Build the kind node image offline, from what the project already builds, and print its name.
#
#   tools/kind/node-image.sh     build it unless an image of this content exists
#
# `kind build node-image` fetches etcd, CoreDNS, pause and its CNI from registries; none is
# reachable here. This does its steps with local parts instead:
# - the node: our debootstrap trixie root, Debian's systemd, containerd 1.7, runc and CNI
#   plugins, kind's own files (entrypoint, units, containerd config) from its Go module, and
#   kubeadm, kubelet and kubectl of our Kubernetes build (tools/kubernetes);
# - the images its nodes run, preloaded in containerd: the control plane, kube-proxy, etcd
#   (Debian's), CoreDNS and kube-router (tools/kubernetes's builds), local-path-provisioner (built
#   from its module) and pause, all in one flat root that each image names with its own
#   entrypoint (one layer, stored and unpacked once);
# - kube-router as the network (routes between nodes, NetworkPolicy) and local-path as the
#   default StorageClass: tools/kind/manifests.
# The tag is a hash of all that (the staged contexts, the root, the versions): an unchanged
# image is never rebuilt.
#
# Environment: SLURMKUBE_CACHE (default /var/cache/slurmkube); the kind CLI and the extra
# binaries are cached in $SLURMKUBE_CACHE/kind.
set -euo pipefail

# shellcheck source=tools/kind/lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

KIND_NODE_REPO="slurmkube/kind-node"

# The etcd image tag of the offline node image: Debian's etcd, whose version kubeadm's own
# choice (3.6) is not (3.6 is not on the module proxy).
kind_etcd_tag() {
  "$KB_BIN/etcd" --version | sed -n 's/^etcd Version: \(.*\)/\1-0/p'
}

# Names the preloaded images go by: what kubeadm asks for (listed by kubeadm itself from the
# cluster configuration kind.sh gives it) and ours, which only our manifests name.
KIND_OWN_IMAGE="slurmkube.local/kind-components"

kind_build_local_path() {
  [[ -x $KIND_BIN/local-path-provisioner ]] && return 0
  kind_log "building local-path-provisioner $KIND_LOCAL_PATH_VERSION"
  progress_run "building local-path-provisioner $KIND_LOCAL_PATH_VERSION" "$KIND_CACHE/logs/build-local-path.log" \
    kb_go_install_to "$KIND_BIN" -trimpath -ldflags "-s -w" \
    "github.com/rancher/local-path-provisioner@$KIND_LOCAL_PATH_VERSION" || kind_die "the local-path build failed"
}

kind_build_crictl() {
  [[ -x $KIND_BIN/crictl ]] && return 0
  kind_log "building crictl $KIND_CRICTL_VERSION"
  progress_run "building crictl $KIND_CRICTL_VERSION" "$KIND_CACHE/logs/build-crictl.log" \
    kb_go_install_to "$KIND_BIN" -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/cri-tools/cmd/crictl@$KIND_CRICTL_VERSION" || kind_die "the crictl build failed"
}

# The sandbox program (kubeadm names a pause image; ours is this static C program).
kind_build_pause() {
  [[ -x $KIND_BIN/pause ]] && return 0
  gcc -Os -static -o "$KIND_BIN/pause.tmp" "$REPO/tools/kubernetes/pause.c"
  strip "$KIND_BIN/pause.tmp"
  mv "$KIND_BIN/pause.tmp" "$KIND_BIN/pause"
}

# Everything the contexts copy: the Kubernetes build (tools/kubernetes) plus kubeadm, local-path,
# crictl, pause and kind.
kind_build_binaries() {
  mkdir -p "$KIND_BIN" "$KIND_CACHE/logs"
  # The Kubernetes build under its own lock (several node-image.sh may run side by side); what
  # only kind needs is built under this script's lock (work directories and binaries of its own;
  # Go's caches take concurrent builds).
  kb_build_locked kb_build || exit 1
  kb_build_k8s_commands "$KIND_BIN" kubeadm
  kind_build_local_path
  kind_build_crictl
  kind_build_pause
  kind_build_cli
}

# The images kubeadm pulls for the cluster configuration the offline image is used with
# (main keeps them in KUBEADM_IMAGES once kubeadm is built).
kubeadm_images() {
  local config
  config=$(mktemp)
  {
    echo "apiVersion: kubeadm.k8s.io/v1beta4"
    echo "kubernetesVersion: $KUBERNETES_VERSION"
    kind_kubeadm_patches "$(kind_etcd_tag)" "$COREDNS_VERSION"
  } >"$config"
  "$KIND_BIN/kubeadm" config images list --config "$config" 2>/dev/null
  rm -f "$config"
}

# The components' build context, staged in $1.
stage_components() {
  local dir=$1 b
  mkdir -p "$dir/bin"
  cp -a "$KIND_HERE/components/Dockerfile" "$dir/"
  cp -a "$REPO/images/base/dpkg" "$dir/"
  for b in kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns kube-router; do
    install -m 0755 "$KB_BIN/$b" "$dir/bin/$b"
  done
  install -m 0755 "$KIND_BIN/local-path-provisioner" "$dir/bin/local-path-provisioner"
  install -m 0755 "$KIND_BIN/pause" "$dir/bin/pause"
}

# The node's build context, staged in $1; its manifests name our image of the components, $2.
stage_node() {
  local dir=$1 components_ref=$2 kind_module b m
  kind_module=$(kb_go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [[ -d $kind_module/images/base/files ]] || kind_die "kind $KIND_VERSION's module has no images/base/files"
  mkdir -p "$dir/kind" "$dir/bin" "$dir/manifests"
  cp -a "$KIND_HERE/node/." "$dir/"
  cp -a "$REPO/images/base/apt" "$REPO/images/base/dpkg" "$REPO/images/base/policy-rc.d" "$dir/"
  cp -a "$kind_module/images/base/files" "$dir/kind/files"
  chmod -R u+w "$dir/kind"
  for b in kubelet kubectl; do install -m 0755 "$KB_BIN/$b" "$dir/bin/$b"; done
  install -m 0755 "$KIND_BIN/kubeadm" "$dir/bin/kubeadm"
  install -m 0755 "$KIND_BIN/crictl" "$dir/bin/crictl"
  echo "$KUBERNETES_VERSION" >"$dir/version"
  # Pods' sandboxes run the pause image kubeadm names, the one preloaded (kind's build does so).
  local pause
  pause=$(grep '/pause:' <<<"$KUBEADM_IMAGES")
  sed -i "s#^\( *sandbox_image = \).*#\1\"$pause\"#" "$dir/kind/files/etc/containerd/config.toml"
  grep -q "sandbox_image = \"$pause\"" "$dir/kind/files/etc/containerd/config.toml" ||
    kind_die "kind $KIND_VERSION's containerd config names no sandbox_image"
  for m in default-cni default-storage; do
    sed "s#@IMAGE@#$components_ref#g" "$KIND_HERE/manifests/$m.yaml.in" >"$dir/manifests/$m.yaml"
  done
}

# A hash of a directory's content (names, modes, bytes), 12 hex digits.
dir_hash() {
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$1" -cf - . | sha256sum | cut -c1-12
}

# The components root, flattened into one layer, and a docker-save archive in which every
# preloaded image is that layer with its own entrypoint: kubeadm's names, then ours.
write_components_archive() {
  local ref=$1 out=$2 work container layer_sha
  work=$(mktemp -d "$KIND_CACHE/build.XXXXXX")
  container=$(docker create "$ref" /bin/true)
  docker export "$container" >"$work/layer.tar"
  docker rm "$container" >/dev/null
  layer_sha=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
  mkdir -p "$work/archive/$layer_sha"
  mv "$work/layer.tar" "$work/archive/$layer_sha/layer.tar"
  local path="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" entries=() name entrypoint
  while read -r name; do
    case "$name" in
      */coredns:*) entrypoint='["/usr/local/bin/coredns"]' ;;
      */pause:*) entrypoint='["/usr/local/bin/pause"]' ;;
      *) entrypoint='null' ;; # kubeadm's pods give their command
    esac
    entries+=("$(image_entry "$work/archive" "$layer_sha" "$name" \
      "{\"Entrypoint\":$entrypoint,\"Env\":[\"$path\"]}")")
  done < <(echo "$KUBEADM_IMAGES"; echo "$KIND_OWN_IMAGE:${ref##*:}")
  (IFS=,; printf '[%s]' "${entries[*]}") >"$work/archive/manifest.json"
  tar -C "$work/archive" -cf "$out.tmp" .
  mv "$out.tmp" "$out"
  rm -rf "$work"
}

# One manifest.json entry of a docker-save archive; writes the image's config beside it.
image_entry() {
  local dir=$1 layer_sha=$2 name=$3 config=$4 cfg cfg_sha
  cfg=$(printf '{"architecture":"amd64","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$config" "$layer_sha")
  cfg_sha=$(printf '%s' "$cfg" | sha256sum | cut -d' ' -f1)
  printf '%s' "$cfg" >"$dir/$cfg_sha.json"
  printf '{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}' "$cfg_sha" "$name" "$layer_sha"
}

# Start containerd in a container of the node's base, import the archive as kind's own build
# does (pinned, so the kubelet's image collection never removes them), and commit the result as the node image.
# Unpacking one-layer images needs bind mounts only: CAP_SYS_ADMIN, no --privileged. Layers are
# dropped once unpacked, as kind's containerd config does (discard_unpacked_layers).
preload_and_commit() {
  local base=$1 archive=$2 ref=$3 container layer
  layer=$(tar -xOf "$archive" --wildcards '*manifest.json' | sed -n 's#.*"Layers":\["\([0-9a-f]*\)/layer.tar"\].*#\1#p' | head -n1)
  container=$(docker run -d --entrypoint /bin/sleep --cap-add SYS_ADMIN --security-opt apparmor=unconfined \
    --security-opt seccomp=unconfined -v "$archive:/preload.tar:ro" "$base" infinity)
  # shellcheck disable=SC2016 # expanded in the container
  if ! docker exec -e "LAYER=$layer" "$container" bash -euc '
      containerd >/var/log/preload-containerd.log 2>&1 &
      for _ in $(seq 50); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done
      ctr -n k8s.io images import --discard-unpacked-layers /preload.tar
      for image in $(ctr -n k8s.io images ls -q); do
        ctr -n k8s.io images label "$image" io.cri-containerd.pinned=pinned >/dev/null
        echo "preloaded $image"
      done
      # The collector drops the unpacked layer when it next runs; do not wait for it.
      for _ in $(seq 50); do
        ctr -n k8s.io content ls -q | grep -qx "sha256:$LAYER" || break
        sleep 0.2
      done
      if ctr -n k8s.io content ls -q | grep -qx "sha256:$LAYER"; then ctr -n k8s.io content rm "sha256:$LAYER"; fi
      kill %1; wait %1 || true
      rm -f /var/log/preload-containerd.log' >&2; then
    docker rm -f "$container" >/dev/null
    kind_die "preloading the images into the node failed"
  fi
  docker stop -t 1 "$container" >/dev/null
  # The container's config keeps the base's STOPSIGNAL (docker 20.10 cannot --change it).
  docker commit --change 'ENTRYPOINT ["/usr/local/bin/slurmkube-node-entrypoint", "/usr/local/bin/entrypoint", "/sbin/init"]' \
    --change 'CMD []' --change 'ENV container=docker' \
    --change "LABEL io.slurmkube.image=kind-node" --change "LABEL $KIND_LABEL_ETCD_TAG=$(kind_etcd_tag)" \
    --change "LABEL $KIND_LABEL_DNS_TAG=$COREDNS_VERSION" "$container" "$ref" >/dev/null || {
    docker rm -f "$container" >/dev/null
    kind_die "docker commit of the node image failed"
  }
  docker rm "$container" >/dev/null
}

# Node images of earlier sources (1.3 GB each) go, unless a cluster's nodes still run them.
prune_other_node_images() {
  local keep=$1 old
  docker images "$KIND_NODE_REPO" --format '{{.Repository}}:{{.Tag}}' | while read -r old; do
    [[ $old == "$keep" ]] || docker rmi "$old" >/dev/null 2>&1 || true
  done
}

# One node image build at a time in this cache (tests/run starts one beside the tests, and each
# kind.sh up asks for the image): the next one finds the image the first made.
node_image_lock() {
  mkdir -p "$KIND_CACHE"
  exec 9>"$KIND_CACHE/build-node-image.lock"
  flock -w 3600 9 || kind_die "another node-image.sh held $KIND_CACHE/build-node-image.lock for an hour"
}

main() {
  (($# == 0)) || kind_die "usage: node-image.sh (no arguments)"
  node_image_lock
  local start=$SECONDS
  kind_build_binaries
  KUBEADM_IMAGES=$(kubeadm_images)
  local rootfs mirror
  rootfs=$(bash "$REPO/images/build.sh" base | sed -n 's/.*"rootfs": "\(.*\)".*/\1/p')
  [[ -n $rootfs ]] || kind_die "images/build.sh named no rootfs"
  mirror=$(kb_debian_mirror)
  stage=$(mktemp -d "$KIND_CACHE/stage.XXXXXX") # global: the EXIT trap removes it
  trap 'rm -rf "$stage"' EXIT
  local components_ref node_tag base_ref ref
  stage_components "$stage/components"
  components_ref="$KIND_OWN_IMAGE:$(printf '%s|%s' "$(dir_hash "$stage/components")" "$rootfs" | sha256sum | cut -c1-12)"
  stage_node "$stage/node" "$components_ref"
  # This script and lib.sh count too: they say how the contexts become the image.
  node_tag=$(printf '%s|%s|%s|%s|%s' "$(dir_hash "$stage/node")" "$components_ref" "$rootfs" \
    "$(tr '\n' ' ' <<<"$KUBEADM_IMAGES")" "$(cat "${BASH_SOURCE[0]}" "$KIND_HERE/lib.sh" | sha256sum)" |
    sha256sum | cut -c1-12)
  ref="$KIND_NODE_REPO:$KUBERNETES_VERSION-$node_tag"
  if docker image inspect "$ref" >/dev/null 2>&1; then
    echo "$ref"
    return 0
  fi
  base_ref="$KIND_NODE_REPO-base:$node_tag"
  kind_log "building $ref"
  progress_run "building $components_ref" "$KIND_CACHE/logs/build-components.log" \
    nice docker build -t "$components_ref" --build-arg "ROOTFS_IMAGE=$rootfs" --build-arg "DEBIAN_MIRROR=$mirror" \
    "$stage/components" || kind_die "the components image failed; log: $KIND_CACHE/logs/build-components.log"
  progress_run "building $base_ref" "$KIND_CACHE/logs/build-node-base.log" \
    nice docker build -t "$base_ref" --build-arg "ROOTFS_IMAGE=$rootfs" --build-arg "DEBIAN_MIRROR=$mirror" \
    --build-arg "DEBIAN_SECURITY_MIRROR=${SLURMKUBE_DEBIAN_SECURITY_MIRROR:-$mirror-security}" \
    "$stage/node" || kind_die "the node base failed; log: $KIND_CACHE/logs/build-node-base.log"
  write_components_archive "$components_ref" "$stage/preload.tar"
  preload_and_commit "$base_ref" "$stage/preload.tar" "$ref"
  docker rmi "$base_ref" "$components_ref" >/dev/null
  prune_other_node_images "$ref"
  kind_log "built $ref in $((SECONDS - start)) s"
  echo "$ref"
}

main "$@"
