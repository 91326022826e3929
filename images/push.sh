#!/usr/bin/env bash
# Push images built here (images/build.sh) to a registry, where a site's Kubernetes pulls them:
#
#   images/push.sh REGISTRY NAME...     e.g. images/push.sh registry.example.org/hpc controller worker
#
# Each image goes to REGISTRY/<its name>:<its tag>, the tag build.sh gave it (a hash of what the
# image is made of: a pushed tag names one content), and also REGISTRY/<its name>:<version>, the
# collection's version (galaxy.yml), moved to the last image pushed of that version. Prints the
# pushed references as JSON on stdout ({"controller": "REGISTRY/slurmkube/controller:<tag>"}),
# what kind of work it does on stderr ("pushed ..." for each).
#
# A registry that asks for a login: SLURMKUBE_REGISTRY_USER names the user and the password comes
# on stdin; the login lives in a docker client config of this run only, removed at exit (nothing
# left in ~/.docker). A registry with a private CA: docker trusts
# /etc/docker/certs.d/<host:port>/ca.crt.
#
# Environment: as images/build.sh (SLURMKUBE_CACHE, SLURMKUBE_IMAGE_PREFIX,
# SLURMKUBE_SLURM_VERSION...), which names the images' current tags; an image not built yet is
# refused, naming the build that makes it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
client_config="" # this run's docker client config (the login), removed at exit

log() { printf '[push.sh %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
cleanup() { [[ -z $client_config ]] || rm -rf "$client_config"; }
trap cleanup EXIT

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

# REGISTRY's host[:port], what docker logs in to.
registry_host() { printf '%s\n' "${1%%/*}"; }

collection_version() { sed -n 's/^version: *//p' "$repo/galaxy.yml"; }

login() {
  local registry=$1 password
  password=$(cat)
  [[ -n $password ]] || die "SLURMKUBE_REGISTRY_USER is set but no password came on stdin"
  client_config=$(mktemp -d)
  export DOCKER_CONFIG=$client_config
  docker login --username "$SLURMKUBE_REGISTRY_USER" --password-stdin "$(registry_host "$registry")" \
    <<<"$password" >/dev/null 2>"$client_config/login.err" ||
    die "docker login to $(registry_host "$registry") as $SLURMKUBE_REGISTRY_USER failed: $(cat "$client_config/login.err")"
}

# push REF TARGET: tag the local REF as TARGET and push it.
push() {
  local ref=$1 target=$2 out
  docker tag "$ref" "$target"
  out=$(docker push "$target" 2>&1) || die "docker push $target failed: $(tail -n 5 <<<"$out")"
  log "pushed $target"
}

main() {
  [[ $# -ge 2 && $1 != -h && $1 != --help ]] || {
    usage >&2
    exit 2
  }
  local registry=${1%/} version manifest name ref target pushed="{" separator=""
  shift
  [[ $registry =~ ^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)*$ ]] ||
    die "REGISTRY must be host[:port][/path] in lower case, got '$registry'"
  version=$(collection_version)
  manifest=$(bash "$here/build.sh" --print-tags "$@") || die "images/build.sh --print-tags $* failed"
  [[ -z ${SLURMKUBE_REGISTRY_USER:-} ]] || login "$registry"
  for name in "$@"; do
    ref=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$manifest" "$name")
    [[ -n $ref ]] || die "no image named $name (images/build.sh names them)"
    docker image inspect "$ref" >/dev/null 2>&1 || die "$ref is not built here: images/build.sh $name builds it"
    target="$registry/$ref"
    push "$ref" "$target"
    push "$ref" "${target%:*}:$version"
    pushed+="$separator\"$name\": \"$target\""
    separator=", "
  done
  printf '%s}\n' "$pushed"
}

main "$@"
