# shellcheck shell=bash disable=SC2034  # the variables are used by the scripts that source this
# What building localkube's binaries needs: versions, cache paths, image names, log helpers
# and build.sh. Sourced by localkube.sh and by tools/kind (the kind node image is made of the
# same Kubernetes build).

LK_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/localkube/versions.env
. "$LK_HERE/versions.env"
LK_K8S_VERSION=${LOCALKUBE_K8S_VERSION}
LK_COREDNS_VERSION=${LOCALKUBE_COREDNS_VERSION}
LK_KUBE_ROUTER_VERSION=${LOCALKUBE_KUBE_ROUTER_VERSION}
LK_DEB_SUITE=${LOCALKUBE_DEB_SUITE}
LK_HOST_SUITE=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")

LK_CACHE="${SLURMKUBE_CACHE:-/var/cache/slurmkube}/localkube"
LK_BIN="$LK_CACHE/$LK_K8S_VERSION/bin"
LK_RUN="$LK_CACHE/run"
LK_KUBECONFIG="$LK_CACHE/kubeconfig"

# Images made here (no registry): referenced by these names only.
LK_PAUSE_IMAGE="localkube.local/pause:1"
LK_COREDNS_IMAGE="localkube.local/coredns:$LK_COREDNS_VERSION"
LK_TOOLBOX_IMAGE="localkube.local/toolbox:1"

lk_log() { printf '[localkube %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
lk_die() {
  lk_log "error: $*"
  exit 1
}

# shellcheck source=tools/progress.sh
. "$LK_HERE/../progress.sh"
PROGRESS_TAG=${PROGRESS_TAG:-localkube}
# shellcheck source=tools/localkube/build.sh
. "$LK_HERE/build.sh"

# One build at a time in this cache: `localkube.sh build` and `up`, and tools/kind (whose node
# image is made of these binaries), may run side by side; two builds filling the same
# directories would corrupt them. Apart from localkube.sh's own lock (up, down, import-image):
# kind waits for a build, never for a cluster going up or down or an image import.
# lk_build_locked COMMAND...: COMMAND (in a subshell) under the build lock.
lk_build_locked() {
  lk_locked "$LK_CACHE/build.lock" "$@"
}

# lk_locked LOCKFILE COMMAND...: COMMAND (in a subshell) holding LOCKFILE, waited for up to an hour.
lk_locked() {
  local lockfile=$1
  shift
  mkdir -p "$(dirname "$lockfile")"
  (
    flock -w 3600 7 || lk_die "another build held $lockfile for an hour"
    "$@"
  ) 7>"$lockfile"
}
