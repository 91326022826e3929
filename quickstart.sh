#!/usr/bin/env bash
# The main job (README: "Run the main job"): deploy a working Slurm cluster and print how to
# ssh in. With no kubeconfig it makes a kind cluster on this machine (tools/kind: 1 control
# plane + 2 workers, its node image built here when upstream's cannot be pulled) and the
# images; run it again and nothing changes.
#
#   bash quickstart.sh                               the example cluster on kind, on this machine
#   bash quickstart.sh -e slurmkube_kubeconfig=~/.kube/config -e @images.yml   your cluster
#
# Extra arguments go to ansible-playbook (playbooks/site.yml lists the settings);
# playbooks/teardown.yml -e slurmkube_purge=true deletes the kind cluster again.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export SLURMKUBE_CACHE="${SLURMKUBE_CACHE:-/var/cache/slurmkube}"
# Only what running needs: the developer's tools (ansible-lint, Molecule, pytest...) stay out.
venv="$(bash "$repo/hack/ensure-venv.sh" run)"
collections="$(cd "$repo" && "$venv/bin/python" -c 'import sys; sys.path.insert(0, "tests"); from collection_path import ensure_importable; print(ensure_importable().parents[2])')"
export ANSIBLE_COLLECTIONS_PATH="$collections"

# The demo user's key pair stays in the cache, so a re-run keeps the same user and key.
key="$SLURMKUBE_CACHE/quickstart/id_ed25519"
if [[ ! -f $key ]]; then
  mkdir -p "$(dirname "$key")"
  ssh-keygen -q -t ed25519 -N "" -C "demo@slurmkube-quickstart" -f "$key"
fi
users="$("$venv/bin/python" -c 'import json, sys; print(json.dumps({"slurmkube_users": [{"name": "demo", "account": "demo", "ssh_authorized_keys": [open(sys.argv[1]).read().strip()]}], "slurmkube_ssh_key": sys.argv[2]}))' "$key.pub" "$key")"

# Monitoring on, with a Prometheus of the collection's: the play prints where to open it
# (-e slurmkube_prometheus=false after these turns it off).
exec "$venv/bin/ansible-playbook" -i localhost, -c local -e ansible_python_interpreter="$venv/bin/python" \
  -e "$users" -e slurmkube_prometheus=true "$repo/playbooks/site.yml" "$@"
