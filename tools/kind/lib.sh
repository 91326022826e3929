# shellcheck shell=bash disable=SC2034  # the variables are used by the scripts that source this
# What node-image.sh and kind.sh share: the versions, the Kubernetes build
# (tools/kubernetes/build-env.sh), the cache, the kind CLI and the kubeadm settings the offline
# node image needs.

KIND_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$KIND_HERE/../.." && pwd)
# shellcheck source=tools/kind/versions.env
. "$KIND_HERE/versions.env"
PROGRESS_TAG=kind
# shellcheck source=tools/kubernetes/build-env.sh
. "$REPO/tools/kubernetes/build-env.sh"

KIND_CACHE="${SLURMKUBE_CACHE:-/var/cache/slurmkube}/kind"
KIND_BIN="$KIND_CACHE/$KIND_VERSION-$KUBERNETES_VERSION/bin"

# kubectl in the control-plane node of kind cluster NAME, as the cluster's admin.
node_kubectl() { # NAME ARG...
  local name=$1
  shift
  docker exec -i "$name-control-plane" kubectl --kubeconfig /etc/kubernetes/admin.conf "$@"
}

kind_log() { printf '[kind %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
kind_die() {
  kind_log "error: $*"
  exit 1
}

# The kind CLI, from its Go module (kind's go.mod has no replace directive). Under a lock of its
# own: node-image.sh and kind.sh may run side by side, and a second `go install` would write the
# binary the first is running.
kind_build_cli() {
  [[ -x $KIND_BIN/kind ]] && return 0
  kb_locked "$KIND_CACHE/build-cli.lock" kind_build_cli_unlocked
}

kind_build_cli_unlocked() {
  [[ -x $KIND_BIN/kind ]] && return 0 # built by the one we waited for
  kind_log "building kind $KIND_VERSION"
  mkdir -p "$KIND_BIN" "$KIND_CACHE/logs"
  progress_run "building kind $KIND_VERSION" "$KIND_CACHE/logs/build-kind.log" \
    kb_go_install_to "$KIND_BIN" -trimpath -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION" ||
    kind_die "the kind build failed"
}

# kubeadm patches the offline node image needs (kind's kubeadmConfigPatches): the etcd and
# CoreDNS images built here (tags $1 and $2), not the versions kubeadm would pull. node-image.sh
# writes both tags in the image's labels, so a copy of the image pushed to a registry and pulled
# on another machine still gets them.
KIND_LABEL_ETCD_TAG=io.slurmkube.kubeadm.etcd-tag
KIND_LABEL_DNS_TAG=io.slurmkube.kubeadm.dns-tag
kind_kubeadm_patches() {
  cat <<YAML
kind: ClusterConfiguration
etcd:
  local:
    imageTag: "$1"
dns:
  imageTag: "$2"
YAML
}
