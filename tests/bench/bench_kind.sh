#!/usr/bin/env bash
# Time the kind node image and a 3-node kind cluster; append the results to tests/bench/kind.md.
#
#   tests/bench/bench_kind.sh   node image: found (warm) and made again from cached binaries
#                               (the image removed: what a change of its sources costs); then
#                               `kind.sh up` of a fresh cluster, its memory idle a minute later
#                               (the nodes' containers, as docker counts them), `kind.sh down`
#
# The cold build (no cached binaries) is the Kubernetes build (tools/kubernetes), plus kubeadm,
# local-path and the kind CLI. No assertion on the numbers: they
# are recorded for people to compare.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
kind="$repo/tools/kind/kind.sh"
results="$repo/tests/bench/kind.md"
name="bench-$$"

seconds_of() {
  local start=$SECONDS
  "$@" >/dev/null 2>&1
  echo $((SECONDS - start))
}

record() {
  printf '| %s | %s | %s | %s |\n' "$(date -u +%Y-%m-%dT%H:%MZ)" "$1" "$2" \
    "$(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)" >>"$results"
}

# MiB docker reports for the cluster's node containers, summed.
idle_mib() {
  local nodes
  mapfile -t nodes < <(docker ps -q --filter "label=io.x-k8s.kind.cluster=$name")
  docker stats --no-stream --format '{{.MemUsage}}' "${nodes[@]}" |
    awk '{v=$1; u=v; sub(/[0-9.]+/, "", u); sub(/[A-Za-z]+/, "", v);
          f = (u == "GiB") ? 1024 : (u == "KiB") ? 1/1024 : 1; s += v * f} END {printf "%d", s}'
}

if [[ ! -s $results ]]; then
  {
    echo "# kind: node image and cluster times"
    echo
    echo "Recorded by tests/bench/bench_kind.sh (1 control plane + 2 workers)."
    echo
    echo "| when | what | result | machine |"
    echo "| --- | --- | --- | --- |"
  } >"$results"
fi

image=$(bash "$repo/tools/kind/node-image.sh")
record "node image, found (warm)" "$(seconds_of bash "$repo/tools/kind/node-image.sh") s"
docker rmi "$image" >/dev/null
record "node image, made again from cached binaries" "$(seconds_of bash "$repo/tools/kind/node-image.sh") s"
trap 'bash "$kind" down "$name" >/dev/null 2>&1 || true' EXIT
record "kind.sh up (3 nodes, Ready, pod routes, shared class)" "$(seconds_of bash "$kind" up "$name") s"
sleep 60
record "memory of the idle cluster, a minute after up" "$(idle_mib) MiB"
record "kind.sh down" "$(seconds_of bash "$kind" down "$name") s"
trap - EXIT
tail -n 5 "$results"
