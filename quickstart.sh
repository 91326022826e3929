#!/usr/bin/env bash
# The main job (README: "Run the main job"): install the toolchain and run site.yml.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export SLURMKUBE_CACHE="${SLURMKUBE_CACHE:-/var/cache/slurmkube}"
venv="$(bash "$repo/hack/ensure-venv.sh")"
collections="$(cd "$repo" && "$venv/bin/python" -c 'import sys; sys.path.insert(0, "tests"); from collection_path import ensure_importable; print(ensure_importable().parents[2])')"
export ANSIBLE_COLLECTIONS_PATH="$collections"
exec "$venv/bin/ansible-playbook" -i localhost, -c local -e ansible_python_interpreter="$venv/bin/python" \
  "$repo/playbooks/site.yml" "$@"
