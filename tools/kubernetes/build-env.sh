# shellcheck shell=bash disable=SC2034  # the variables are used by the scripts that source this
# What building Kubernetes and its companions needs: versions, cache paths, the toolbox
# image's name, log helpers, locks and build.sh. Sourced by tools/kind (its offline node image
# is made of this build) and by the tests (the toolbox image).

KB_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/kubernetes/versions.env
. "$KB_HERE/versions.env"

KB_CACHE="${SLURMKUBE_CACHE:-/var/cache/slurmkube}/kubernetes"
KB_BIN="$KB_CACHE/$KUBERNETES_VERSION/bin"

# Made here (no registry): pods of tests and debugging sessions run it by this name.
KB_TOOLBOX_IMAGE="slurmkube.local/toolbox:1"

kb_log() { printf '[kubernetes %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
kb_die() {
  kb_log "error: $*"
  exit 1
}

# shellcheck source=tools/progress.sh
. "$KB_HERE/../progress.sh"
PROGRESS_TAG=${PROGRESS_TAG:-kubernetes}
# shellcheck source=tools/kubernetes/build.sh
. "$KB_HERE/build.sh"

# One build at a time in this cache: node-image.sh may run in several processes side by side
# (tests/run starts it, and each kind test asks for the image); two builds filling the same
# directories would corrupt them.
# kb_build_locked COMMAND...: COMMAND (in a subshell) under the build lock.
kb_build_locked() {
  kb_locked "$KB_CACHE/build.lock" "$@"
}

# kb_locked LOCKFILE COMMAND...: COMMAND (in a subshell) holding LOCKFILE, waited for up to an hour.
kb_locked() {
  local lockfile=$1
  shift
  mkdir -p "$(dirname "$lockfile")"
  (
    flock -w 3600 7 || kb_die "another build held $lockfile for an hour"
    "$@"
  ) 7>"$lockfile"
}
