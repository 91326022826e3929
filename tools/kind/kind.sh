#!/usr/bin/env bash
# A kind cluster on this machine, made offline when it must be.
#
#   kind.sh up [NAME]          create the cluster unless it exists (1 control plane + workers),
#                              first raising the host's inotify limits kind needs (as root)
#   kind.sh down [NAME]        delete it and what it left on the host (network, /lib/modules)
#   kind.sh kubeconfig [NAME]  print its kubeconfig's path
#   kind.sh env [NAME]         print shell exports of its KUBECONFIG and a PATH with kubectl
#   kind.sh load NAME IMAGE... load local docker images into its workers (those they miss)
#   kind.sh shared [NAME]      print the host directory every node mounts at the same path
#   kind.sh registry-ca NAME HOST:PORT CA_FILE
#                              make its nodes trust a registry's private CA (certs.d, no restart)
#   kind.sh kind ARGS...       run the pinned kind CLI
#
# NAME defaults to slurmkube. The node image is the upstream kindest/node of our Kubernetes
# minor when it can be pulled (KIND_UPSTREAM_NODE_IMAGE in versions.env), else the one
# node-image.sh builds here. kubectl is the nodes' own, copied out of the control plane: its
# version is the server's, and nothing is compiled for it. Only what this host needs is changed,
# after it was detected: a docker that cannot start --privileged containers gets
# tools/kind/docker-unprivileged in kind's PATH (and containerd in the nodes
# restrict_oom_score_adj), a cgroup v1 host gets failCgroupV1: false.
#
# Environment:
#   SLURMKUBE_CACHE          cache (default /var/cache/slurmkube); kubeconfigs in its kind/
#   SLURMKUBE_KIND_WORKERS   worker nodes (default 2)
#   SLURMKUBE_KIND_SHARED    a host directory mounted at the same path in every node (default
#                            $SLURMKUBE_CACHE/kind/clusters/<name>/shared): storage every node sees
#   SLURMKUBE_KIND_SHARED_SIZE  the size of the default shared directory's volumes filesystem
#                            (truncate's sizes: 40G; default: half the host's free space then)
#   SLURMKUBE_KIND_UPSTREAM_NODE_IMAGE  the image to try first instead of the pinned one; set
#                            empty, the image built here is always used
#   SLURMKUBE_KIND_PROC_SYS  where the host's kernel settings are read and raised (default /proc/sys)
set -euo pipefail

# shellcheck source=tools/kind/lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
# shellcheck source=tools/kind/pod-network.sh
. "$KIND_HERE/pod-network.sh"

# Pod and Service ranges apart from kind's defaults (10.244.0.0/16, 10.96.0.0/16), which the
# embedded localkube held when both ran on one machine; kept, so clusters made since stay alike.
KIND_POD_SUBNET=10.246.0.0/16
KIND_SERVICE_SUBNET=10.112.0.0/16

# Where docker-unprivileged goes by the name docker, once `up` saw docker refuse --privileged.
KIND_DOCKER_FRONT="$KIND_CACHE/docker-front"

# The kind CLI, with the docker it needs here.
kind_cli() {
  if [[ -x $KIND_DOCKER_FRONT/docker ]]; then
    PATH="$KIND_DOCKER_FRONT:$PATH" "$KIND_BIN/kind" "$@"
  else
    "$KIND_BIN/kind" "$@"
  fi
}

# kind's known issues: every node runs systemd, the kubelet and containerd, each holding inotify
# instances and watches; at a host's usual 128 instances a second or third cluster's pods hang
# (stuck in Init, "too many open files"), as three clusters side by side showed here.
KIND_HOST_LIMITS=(fs.inotify.max_user_instances=512 fs.inotify.max_user_watches=524288)
KIND_PROC_SYS=${SLURMKUBE_KIND_PROC_SYS:-/proc/sys}

# The limits raised where they are lower (as root); else up stops, naming the limit and how to
# raise it.
ensure_host_limits() {
  local limit key want file have
  for limit in "${KIND_HOST_LIMITS[@]}"; do
    key=${limit%%=*}
    want=${limit#*=}
    file="$KIND_PROC_SYS/${key//.//}"
    have=$(cat "$file" 2>/dev/null) || kind_die "cannot read $key ($file)"
    ((have >= want)) && continue
    if (echo "$want" >"$file") 2>/dev/null; then
      kind_log "raised $key from $have to $want (kind's known issues: clusters side by side need it)"
    else
      kind_die "$key is $have; kind clusters side by side need $want (kind's known issues): as root, sysctl -w $key=$want"
    fi
  done
}

cluster_dir() { echo "$KIND_CACHE/clusters/$1"; }
kubeconfig_of() { echo "$(cluster_dir "$1")/kubeconfig"; }

# The list is read whole first: `kind get clusters | grep -q` under pipefail is false when grep
# quits at a match before kind has written the names after it (kind dies of SIGPIPE). With two
# clusters up, `up` then tried to create an existing one, and `down` left one behind.
exists() {
  local names
  names=$(kind_cli get clusters 2>/dev/null) || return 1
  grep -qx -- "$1" <<<"$names"
}

# The directory of the cluster's kubectl: the control-plane node's own (every node image has
# one, upstream's and ours), copied once.
kubectl_dir() {
  local name=$1 bin
  bin="$(cluster_dir "$name")/bin"
  if [[ ! -x $bin/kubectl ]]; then
    mkdir -p "$bin"
    # shellcheck disable=SC2016 # expanded in the node
    docker exec "$name-control-plane" sh -c 'cat "$(command -v kubectl)"' >"$bin/kubectl.tmp" ||
      kind_die "cannot copy kubectl out of $name-control-plane (kind.sh up $name makes the cluster)"
    chmod 0755 "$bin/kubectl.tmp"
    mv "$bin/kubectl.tmp" "$bin/kubectl"
  fi
  echo "$bin"
}

# Slurm's pods never run on the control plane (it keeps its taint in a multi-node cluster):
# images go to the workers only, and kind skips a node that holds an image already. A cluster of
# one node (no workers) gets them on its control plane, where its pods run.
load() {
  local name=$1 workers
  shift
  exists "$name" || kind_die "no kind cluster $name (kind.sh up $name makes it)"
  # awk, not grep -v: no worker is no match, which grep reports as a failure (set -e, pipefail).
  workers=$(kind_cli get nodes --name "$name" | awk '!/-control-plane$/' | paste -sd, -)
  [[ -n $workers ]] || workers="$name-control-plane"
  kind_cli load docker-image --name "$name" --nodes "$workers" "$@"
}

# The node image: upstream's when it can be pulled, else ours (built if needed). A refused pull
# can take a minute and more (a host without a registry retries its lookups): it runs under
# progress_run, so the caller still hears from us each minute.
node_image() {
  local upstream=$KIND_UPSTREAM_NODE_IMAGE log=$KIND_CACHE/logs/pull-node-image.log
  if [[ -n $upstream ]]; then
    if docker image inspect "$upstream" >/dev/null 2>&1 ||
      progress_run "pulling $upstream" "$log" timeout 300 docker pull "$upstream"; then
      echo "$upstream"
      return 0
    fi
    kind_log "cannot pull $upstream: the node image is built here (docker pull's log above and in $log)"
  fi
  bash "$KIND_HERE/node-image.sh"
}

# Whether docker here can start a --privileged container (any local image serves).
docker_runs_privileged() {
  local image=$1
  docker run --rm --privileged --entrypoint /bin/true "$image" >/dev/null 2>&1
}

# A label of a local image ("" when it has none).
image_label() {
  docker image inspect -f "{{with index .Config.Labels \"$2\"}}{{.}}{{end}}" "$1"
}

# The cluster's configuration for kind (image-specific settings only where needed): our node
# image is known by its label, under whatever name it was pulled.
cluster_config() {
  local name=$1 image=$2 unprivileged=$3 workers=$4 shared=$5 i
  cat <<YAML
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
name: $name
networking:
  podSubnet: $KIND_POD_SUBNET
  serviceSubnet: $KIND_SERVICE_SUBNET
  kubeProxyMode: iptables
# MutatingAdmissionPolicy (beta in Kubernetes 1.35, GA in 1.36): the bridge's namespaces get their
# pods' scheduler from one (the slurm_operator module's bridge_namespaces).
featureGates:
  MutatingAdmissionPolicy: true
runtimeConfig:
  admissionregistration.k8s.io/v1beta1: "true"
nodes:
YAML
  for i in $(seq 0 "$workers"); do
    if ((i == 0)); then echo "  - role: control-plane"; else echo "  - role: worker"; fi
    printf '    extraMounts:\n      - {hostPath: %s, containerPath: %s}\n' "$shared" "$shared"
  done
  cat <<'YAML'
containerdConfigPatches:
  # A registry's settings (its CA, a mirror) in /etc/containerd/certs.d/<host:port>/hosts.toml
  # of each node, read at each pull: a site's registry with a CA of its own works without a
  # restart of containerd (kind's documented way for local registries).
  - |-
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "/etc/containerd/certs.d"
YAML
  if ((unprivileged)); then
    cat <<'YAML'
  # Without CAP_SYS_RESOURCE runc cannot lower a process's OOM score adjustment: every pod
  # sandbox would fail ("can't get final child's PID from pipe: EOF").
  - |-
    [plugins."io.containerd.grpc.v1.cri"]
      restrict_oom_score_adj = true
YAML
  fi
  echo "kubeadmConfigPatches:"
  if [[ $(image_label "$image" io.slurmkube.image) == kind-node ]]; then
    local etcd_tag dns_tag
    etcd_tag=$(image_label "$image" "$KIND_LABEL_ETCD_TAG")
    dns_tag=$(image_label "$image" "$KIND_LABEL_DNS_TAG")
    [[ -n $etcd_tag && -n $dns_tag ]] ||
      kind_die "$image is an older node image of ours, without its kubeadm image tags: node-image.sh builds a current one"
    echo "  - |"
    kind_kubeadm_patches "$etcd_tag" "$dns_tag" | sed 's/^/    /'
  fi
  if [[ ! -f /sys/fs/cgroup/cgroup.controllers ]]; then
    printf '  - |\n    kind: KubeletConfiguration\n    failCgroupV1: false\n'
  fi
}

up() {
  local name=$1 workers=${SLURMKUBE_KIND_WORKERS:-2}
  local dir shared image unprivileged=0 kubeconfig out
  ensure_host_limits
  kind_build_cli
  dir=$(cluster_dir "$name")
  kubeconfig=$(kubeconfig_of "$name")
  if exists "$name"; then
    kubectl_dir "$name" >/dev/null
    kind_log "cluster $name exists; kubeconfig: $kubeconfig"
    out=$(kind_cli export kubeconfig --name "$name" --kubeconfig "$kubeconfig" 2>&1) ||
      kind_die "cannot write the kubeconfig of $name: $out"
    return 0
  fi
  mkdir -p "$dir"
  shared=${SLURMKUBE_KIND_SHARED:-$dir/shared}
  mkdir -p "$shared/volumes"
  echo "$shared" >"$dir/shared-path"
  # Before the nodes start: a mount made later under the shared directory would not reach them.
  [[ -n ${SLURMKUBE_KIND_SHARED:-} ]] || mount_volumes_filesystem "$dir" "$shared/volumes"
  image=$(node_image)
  if docker_runs_privileged "$image"; then
    rm -rf "$KIND_DOCKER_FRONT"
  else
    unprivileged=1
    kind_log "docker cannot start --privileged containers here: nodes get every capability but CAP_SYS_RESOURCE"
    mkdir -p "$KIND_DOCKER_FRONT"
    ln -sf "$KIND_HERE/docker-unprivileged" "$KIND_DOCKER_FRONT/docker"
  fi
  # kind mounts the host's /lib/modules into every node; docker creates it where it is missing.
  [[ -e /lib/modules ]] || : >"$dir/made-lib-modules"
  cluster_config "$name" "$image" "$unprivileged" "$workers" "$shared" >"$dir/config.yaml"
  kind_log "creating cluster $name ($image, 1 control plane + $workers workers)"
  if ! progress_run "kind create cluster $name" "$dir/create.log" \
    kind_cli create cluster --name "$name" --image "$image" --config "$dir/config.yaml" \
    --kubeconfig "$kubeconfig" --wait 300s --retain; then
    kind_die "kind create cluster failed; log: $dir/create.log (nodes kept: kind.sh down $name removes them)"
  fi
  wait_for_pod_network "$name" 180 || kind_die "pods on two nodes of $name cannot reach each other after 180 s"
  kubectl_dir "$name" >/dev/null
  add_shared_storage "$name" "$shared"
  kind_log "cluster $name is up; kubeconfig: $kubeconfig"
}

# registry_ca NAME HOST:PORT CA_FILE: each node of NAME pulls from HOST:PORT over TLS checked
# against CA_FILE (containerd reads certs.d at each pull: config_path in cluster_config).
registry_ca() {
  local name=$1 registry=$2 ca=$3 node dir
  [[ $registry =~ ^[A-Za-z0-9.-]+(:[0-9]+)?$ ]] || kind_die "HOST:PORT must be a registry's host[:port], got '$registry'"
  [[ -r $ca ]] || kind_die "cannot read the CA file $ca"
  exists "$name" || kind_die "no kind cluster named $name"
  dir=/etc/containerd/certs.d/$registry
  for node in $(kind_cli get nodes --name "$name"); do
    docker exec "$node" grep -q 'config_path = "/etc/containerd/certs.d"' /etc/containerd/config.toml ||
      kind_die "$node was made before kind.sh set containerd's config_path: kind.sh down $name, then up"
    docker exec "$node" mkdir -p "$dir"
    docker cp "$ca" "$node:$dir/ca.crt" >/dev/null
    printf 'server = "https://%s"\n\n[host."https://%s"]\n  capabilities = ["pull", "resolve"]\n  ca = "%s/ca.crt"\n' \
      "$registry" "$registry" "$dir" | docker exec -i "$node" tee "$dir/hosts.toml" >/dev/null
  done
  kind_log "the nodes of $name trust $registry's CA ($ca)"
}

# The shared class's volumes on a filesystem of their own, in the default shared directory: a
# sparse btrfs image of SLURMKUBE_KIND_SHARED_SIZE, with quotas on. Each volume is a subvolume
# limited to its claim's size (manifests/shared-storage.yaml.in), so a user who writes past a
# claim's size (the jail's) gets "Disk quota exceeded", and all the volumes together can never take
# more of the host's disk than the image's size. A kernel built without CONFIG_QUOTA (this
# project's machines) has no ext4 or XFS quotas; btrfs' quota groups need none. Where the host
# cannot (no btrfs, no loop device), the volumes are a plain directory, as before, and the log says
# so. Volumes already there (a create that failed half-way, an older kind.sh's) are never hidden.
mount_volumes_filesystem() {
  local dir=$1 volumes=$2 image=$1/volumes.btrfs size log=$1/volumes-filesystem.log
  mountpoint -q "$volumes" && return 0
  if [[ -n $(ls -A "$volumes") ]]; then
    kind_log "the shared class's volumes stay a plain directory: $volumes holds volumes already"
    return 0
  fi
  if ! command -v mkfs.btrfs >/dev/null 2>&1; then
    bash "$REPO/tools/apt-install.sh" btrfs-progs >"$log" 2>&1 || true
  fi
  size=${SLURMKUBE_KIND_SHARED_SIZE:-$(($(df --output=avail -B1 "$dir" | tail -n1) / 2))}
  # One copy of the metadata (not DUP: one file on one disk gains nothing by two), no access-time
  # writes (each first read of a jail's file would be a copy-on-write of its metadata).
  if truncate -s "$size" "$image" >>"$log" 2>&1 && mkfs.btrfs -q -f -m single "$image" >>"$log" 2>&1 &&
    mount -o loop,noatime "$image" "$volumes" >>"$log" 2>&1 && btrfs quota enable "$volumes" >>"$log" 2>&1; then
    kind_log "the shared class's volumes: btrfs with quotas, $(numfmt --to=iec "$(stat -c %s "$image")") at most"
    return 0
  fi
  mountpoint -q "$volumes" && umount "$volumes"
  rm -f "$image"
  kind_log "the shared class's volumes are a plain directory: no claim's size is enforced (why: $log)"
}

# The StorageClass slurmkube-shared (manifests/shared-storage.yaml.in): the provisioner of the
# default class, local-path (both node images run it, from the images they preload), run a
# second time over the directory every node mounts. Its program, image and helper image are
# read from the default one's Deployment.
add_shared_storage() {
  local name=$1 shared=$2 container='.spec.template.spec.containers[0]' spec image command program helper
  # One read of the Deployment: its image on the first line, then its command, a word a line.
  if ! spec=$(node_kubectl "$name" -n local-path-storage get deployment local-path-provisioner \
    -o jsonpath="{$container.image}{\"\\n\"}{range $container.command[*]}{@}{\"\\n\"}{end}" 2>/dev/null); then
    kind_log "no shared StorageClass: $name runs no local-path-provisioner (local-path-storage)"
    return 0
  fi
  image=$(head -n1 <<<"$spec")
  command=$(tail -n +2 <<<"$spec")
  program=$(head -n1 <<<"$command")
  helper=$(awk 'previous == "--helper-image" { print; exit }
    sub(/^--helper-image=/, "") { print; exit }
    { previous = $0 }' <<<"$command")
  [[ -n $image && -n $program && -n $helper ]] ||
    kind_die "local-path-provisioner in $name names no image, program or --helper-image: $spec"
  sed -e "s#@SHARED@#$shared#g" -e "s#@IMAGE@#$image#g" -e "s#@PROGRAM@#$program#g" \
    -e "s#@HELPER_IMAGE@#$helper#g" "$KIND_HERE/manifests/shared-storage.yaml.in" |
    node_kubectl "$name" apply -f - >/dev/null || kind_die "cannot add the shared StorageClass to $name"
}

down() {
  local name=$1 dir
  dir=$(cluster_dir "$name")
  if [[ -x $KIND_BIN/kind ]] && exists "$name"; then
    kind_log "deleting cluster $name"
    kind_cli delete cluster --name "$name" --kubeconfig "$(kubeconfig_of "$name")" >&2
  fi
  # kind leaves its docker network (and its iptables rules) once no cluster uses it.
  if docker network inspect kind >/dev/null 2>&1 &&
    [[ -z $(docker ps -aq --filter network=kind) ]]; then
    docker network rm kind >/dev/null
  fi
  if [[ -e $dir/made-lib-modules ]] && [[ -d /lib/modules ]] && [[ -z $(ls -A /lib/modules) ]] &&
    [[ -z $(docker ps -aq --filter label=io.x-k8s.kind.cluster) ]]; then
    rmdir /lib/modules
  fi
  # The nodes that mounted it are gone: the volumes' filesystem can go (mount -o loop's device with
  # it). A process of the host's still in it (a shell) keeps it until it leaves, not the down.
  if mountpoint -q "$dir/shared/volumes"; then
    umount "$dir/shared/volumes" 2>/dev/null || umount --lazy "$dir/shared/volumes"
  fi
  rm -rf "$dir"
  kind_log "cluster $name is gone"
}

# One up, down or load of a cluster at a time: two playbooks or test processes may ask for the
# same cluster, kind refuses to create a name being created, and containerd refuses a second
# import of content another import is writing. Nothing kind.sh starts outlives it with the fd.
cluster_lock() {
  mkdir -p "$KIND_CACHE/locks"
  exec 8>"$KIND_CACHE/locks/$1.lock"
  flock -w 3600 8 || kind_die "another kind.sh up, down or load of $1 held its lock for an hour"
}

main() {
  local command=${1:-}
  (($#)) && shift
  case "$command" in up | down | load) cluster_lock "${1:-slurmkube}" ;; esac
  case "$command" in
    up) up "${1:-slurmkube}" ;;
    down) down "${1:-slurmkube}" ;;
    kubeconfig) kubeconfig_of "${1:-slurmkube}" ;;
    env)
      # shellcheck disable=SC2016 # $PATH is for the caller's shell to expand
      printf 'export KUBECONFIG=%q\nexport PATH=%q:"$PATH"\n' "$(kubeconfig_of "${1:-slurmkube}")" \
        "$(kubectl_dir "${1:-slurmkube}")"
      ;;
    load)
      (($# >= 2)) || kind_die "usage: kind.sh load NAME IMAGE..."
      kind_build_cli
      load "$@"
      ;;
    shared) cat "$(cluster_dir "${1:-slurmkube}")/shared-path" ;;
    registry-ca)
      (($# == 3)) || kind_die "usage: kind.sh registry-ca NAME HOST:PORT CA_FILE"
      kind_build_cli
      registry_ca "$@"
      ;;
    kind)
      kind_build_cli
      kind_cli "$@"
      ;;
    *)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
      exit 2
      ;;
  esac
}

# Sourced (a test of one function), it only defines them.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  main "$@"
fi
