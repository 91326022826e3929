#!/usr/bin/env bash
# Time localkube bring-ups and append the results to tests/bench/localkube_bringup.md.
#
#   tests/bench/localkube_bringup.sh          warm: binaries cached; down, then time `up`
#                                             (from nothing running), its memory idle a
#                                             minute later, `up` again, `down`
#   tests/bench/localkube_bringup.sh --cold   cold: a fresh SLURMKUBE_CACHE, GOCACHE and
#                                             GOMODCACHE, so everything is downloaded and
#                                             built; then `up` (takes tens of minutes)
#
# No assertion on the times: they are recorded for people to compare.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
lk="$repo/tools/localkube/localkube.sh"
results="$repo/tests/bench/localkube_bringup.md"

seconds_of() {
  local start=$SECONDS
  "$@" >/dev/null
  echo $((SECONDS - start))
}

record() {
  printf '| %s | %s | %s | %s |\n' "$(date -u +%Y-%m-%dT%H:%MZ)" "$1" "$2" "$(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)" >>"$results"
}

# MiB resident in the idle cluster, as ps counts it: its components (their pid files), the pods'
# processes (its cgroup) and the containerd shims between them. tests/bench/bench_kind.sh
# records the same for a kind cluster (docker's figure for its node containers).
idle_mib() {
  local run="${SLURMKUBE_CACHE:-/var/cache/slurmkube}/localkube/run" pids
  pids=$({
    cat "$run"/pids/*.pid
    find /sys/fs/cgroup -path '*/localkube*' -name cgroup.procs -exec cat {} +
    pgrep -f "containerd-shim-runc-v2 .*$run"
  } 2>/dev/null | sort -un | paste -sd,)
  ps -o rss= -p "$pids" | awk '{s += $1} END {printf "%d", s / 1024}'
}

if [[ ! -s $results ]]; then
  {
    echo "# localkube bring-up times"
    echo
    echo "Produced by \`tests/bench/localkube_bringup.sh\` (and \`--cold\`). Machine: $(nproc) cores,"
    echo "$(awk '/MemTotal/ {printf "%d GiB", $2/1048576}' /proc/meminfo), CPU shared with other work (see load)."
    echo
    echo "| when (UTC) | what | seconds | machine |"
    echo "|---|---|---|---|"
  } >"$results"
fi

if [[ ${1:-} == --cold ]]; then
  # The bridge, ports and chains are per machine: the usual cluster must be down first.
  "$lk" down >/dev/null 2>&1 || true
  fresh=$(mktemp -d /var/tmp/localkube-cold.XXXXXX)
  export SLURMKUBE_CACHE=$fresh GOCACHE=$fresh/gocache GOMODCACHE=$fresh/gomodcache
  record "cold build (nothing cached: Go modules, Go build cache, debs)" "$(seconds_of "$lk" build)"
  record "up after a cold build (binaries cached, nothing running)" "$(seconds_of "$lk" up)"
  "$lk" down >/dev/null
  chmod -R u+w "$fresh"
  rm -rf "$fresh"
  exit 0
fi

"$lk" build >/dev/null
"$lk" down >/dev/null 2>&1 || true
record "warm up (binaries cached, nothing running)" "$(seconds_of "$lk" up)"
sleep 60
record "memory of the idle cluster, a minute after up (MiB, not seconds)" "$(idle_mib)"
record "up again (already running: no-op)" "$(seconds_of "$lk" up)"
record "down" "$(seconds_of "$lk" down)"
