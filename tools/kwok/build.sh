#!/usr/bin/env bash
# kwok, the simulated kubelet of the scale bench (tests/k8s/test_scale_bench.py): Nodes and Pods
# whose status it writes as a kubelet would, with no container behind them. Built from the Go
# module proxy (no container registry here) with the Go toolchain on PATH, once per version, into
# the cache; prints the binary's path.
set -euo pipefail
version=v0.8.0
cache="${SLURMKUBE_CACHE:-/var/cache/slurmkube}/kwok/$version"
if [ ! -x "$cache/kwok" ]; then
  if ! command -v go >/dev/null; then
    echo "kwok $version: no Go toolchain ('go') on PATH to build it with" >&2
    exit 1
  fi
  mkdir -p "$cache"
  GOBIN="$cache" GOFLAGS=-buildvcs=false go install "sigs.k8s.io/kwok/cmd/kwok@$version" >&2
fi
echo "$cache/kwok"
