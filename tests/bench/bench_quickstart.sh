#!/usr/bin/env bash
# Time `bash quickstart.sh` on kind as a user runs it; append the results to tests/bench/quickstart.md.
#
#   tests/bench/bench_quickstart.sh   first run (no kind cluster yet), the re-run (nothing to
#                                     change), teardown.yml with purge (the kind cluster deleted)
#
# What the first run finds cached is the machine's: run it with an empty SLURMKUBE_CACHE and a
# docker that holds no image for a cold figure (Kubernetes, the node image and the images all
# built), as it is for a warm one. No assertion on the numbers: they are recorded for people
# to compare.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
results="$repo/tests/bench/quickstart.md"
cache=${SLURMKUBE_CACHE:-/var/cache/slurmkube}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# Seconds a command took; its output goes to $log/NAME.log, and a failure stops the bench.
seconds_of() {
  local name=$1 start=$SECONDS
  shift
  "$@" >"$log/$name.log" 2>&1 || {
    tail -n 40 "$log/$name.log" >&2
    exit 1
  }
  echo $((SECONDS - start))
}

record() {
  printf '| %s | %s | %s | %s |\n' "$(date -u +%Y-%m-%dT%H:%MZ)" "$1" "$2" \
    "$(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)" >>"$results"
}

# What the first run finds: the Kubernetes build, the node image, the images.
found() {
  local what=()
  [[ -n $(ls "$cache"/kubernetes/*/bin/kubelet 2>/dev/null) ]] && what+=("Kubernetes build")
  [[ -n $(docker images -q slurmkube/kind-node 2>/dev/null) ]] && what+=("node image")
  [[ -s $cache/images.json ]] && what+=("images")
  if ((${#what[@]})); then
    printf 'cached: %s' "${what[0]}"
    printf ', %s' "${what[@]:1}"
    echo
  else
    echo "cold: nothing cached"
  fi
}

if [[ ! -s $results ]]; then
  {
    echo "# quickstart on kind: times"
    echo
    echo "Recorded by tests/bench/bench_quickstart.sh (\`bash quickstart.sh\` with no kubeconfig: a"
    echo "kind cluster of 1 control plane + 2 workers and the example Slurm cluster on it)."
    echo
    echo "| when | what | result | machine |"
    echo "| --- | --- | --- | --- |"
  } >"$results"
fi

# As quickstart.sh runs site.yml: its venv, this checkout as the collection.
teardown() {
  local venv collections
  venv=$(bash "$repo/hack/ensure-venv.sh" run)
  collections=$(cd "$repo" && "$venv/bin/python" -c 'import sys; sys.path.insert(0, "tests"); from collection_path import ensure_importable; print(ensure_importable().parents[2])')
  ANSIBLE_COLLECTIONS_PATH=$collections "$venv/bin/ansible-playbook" -i localhost, -c local \
    -e ansible_python_interpreter="$venv/bin/python" -e slurmkube_purge=true "$repo/playbooks/teardown.yml"
}

state=$(found)
record "quickstart.sh, first run ($state)" "$(seconds_of first bash "$repo/quickstart.sh") s"
# Built here, or pulled (the pin of tools/kind/versions.env, or SLURMKUBE_KIND_UPSTREAM_NODE_IMAGE).
record "the node image the first run's nodes run" \
  "$(docker inspect -f '{{.Config.Image}}' slurmkube-demo-control-plane | sed 's/@sha256:\(.\{12\}\).*/@sha256:\1…/')"
record "quickstart.sh, re-run (changed=0)" "$(seconds_of second bash "$repo/quickstart.sh") s"
grep -q 'changed=0 ' "$log/second.log" || echo "warning: the re-run changed something" >&2
record "teardown.yml -e slurmkube_purge=true (the kind cluster deleted)" "$(seconds_of teardown teardown) s"
tail -n 3 "$results"
