#!/usr/bin/env bash
# Time images/build.sh: cold (new cache dir, new image prefix: nothing reused, debootstrap
# and wheel downloads included), warm with nothing changed, and warm after an entrypoint edit (every image that
# carries it is rebuilt; Docker's layer cache keeps the apt layers). No assertions: the
# numbers are recorded in tests/bench/images.json and printed.
#
#   tests/bench/bench_images.sh            # ~10 min of CPU on 2 cores; run under nice
#
# The benchmark's images and cache are removed afterwards.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$repo/tests/bench/images.json"
work="$(mktemp -d /tmp/slurmkube-bench.XXXXXX)"
prefix="slurmkube-bench-$(echo "${work##*.}" | tr '[:upper:]' '[:lower:]')"
export SLURMKUBE_CACHE="$work/cache" SLURMKUBE_IMAGE_PREFIX="$prefix"

cleanup() {
  docker images --format '{{.Repository}}:{{.Tag}}' | grep "^$prefix/" | xargs -r docker rmi -f >/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# A private copy of what build.sh reads, so the entrypoint edit never touches the checkout.
mkdir -p "$work/repo"
tar -C "$repo" --exclude=__pycache__ --exclude=./spank/build -cf - ./images ./spank ./galaxy.yml ./meta ./plugins |
  tar -C "$work/repo" -xf -

timed_build() {
  local start end
  start=$(date +%s%N)
  "$work/repo/images/build.sh" >"$work/manifest.json" 2>>"$work/build.log"
  end=$(date +%s%N)
  awk -v ns="$((end - start))" 'BEGIN { printf "%.1f", ns / 1e9 }'
}

load="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "cold build..." >&2
cold=$(timed_build)
# "built <prefix>/<name>:<tag> in <n> s" lines of the cold build, as "name": n.
cold_steps="$(sed -n "s|.*built $prefix/\([a-z-]*\):[0-9a-f]* in \([0-9]*\) s|\"\1\": \2|p" "$work/build.log" |
  paste -sd, -)"
debootstrap_s="$(awk '/debootstrap trixie/ { split($2, a, ":"); s = a[1]*3600 + a[2]*60 + a[3] }
  /docker import/ { split($2, a, ":"); print a[1]*3600 + a[2]*60 + a[3] - s; exit }' "$work/build.log")"
echo "warm build, nothing changed..." >&2
warm=$(timed_build)
echo "warm build after an entrypoint edit..." >&2
echo "# bench edit" >>"$work/repo/images/common/lib/base.sh"
edit=$(timed_build)

sizes="$(jq -r 'to_entries[] | .value' "$work/manifest.json" |
  while read -r ref; do
    printf '"%s": %s\n' "${ref%%:*}" "$(docker image inspect -f '{{.Size}}' "$ref")"
  done | sed "s|\"$prefix/|\"|" | paste -sd, -)"

cat >"$out" <<JSON
{
  "measured_at": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "machine": "$(nproc) CPUs, $(free -g | awk '/^Mem:/ {print $2}') GiB, $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release | tr -d '"')",
  "load_average_at_start": "$load",
  "cold_s": $cold,
  "cold_debootstrap_s": ${debootstrap_s:-null},
  "cold_docker_build_s": {$cold_steps},
  "warm_noop_s": $warm,
  "warm_entrypoint_edit_s": $edit,
  "image_bytes": {$sizes}
}
JSON
cat "$out"
