#!/usr/bin/env bash
# Create (or reuse) a Python environment the project's commands run in, and print its path:
#
#   hack/ensure-venv.sh        the developer's (requirements.txt: tests, gates, Molecule)
#   hack/ensure-venv.sh run    what running the playbooks needs, no more (requirements-run.txt:
#                              quickstart.sh's)
#   hack/ensure-venv.sh docs   what building the admin's manual needs (requirements-docs.txt:
#                              tools/manual.sh's)
#
# It lives outside the repository, keyed by its requirements, so a warm machine reuses it and a
# changed requirement gets a fresh one. It also holds the collections slurmkube.core depends on
# (galaxy.yml), where Ansible and Python find them (site-packages/ansible_collections).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${SLURMKUBE_CACHE:-/var/cache/slurmkube}"
case "${1:-dev}" in
  dev) requirements=requirements.txt ready=ansible-test name=venv ;;
  run) requirements=requirements-run.txt ready=ansible-playbook name=venv-run ;;
  docs) requirements=requirements-docs.txt ready=sphinx-build name=venv-docs ;;
  *)
    echo "usage: hack/ensure-venv.sh [run|docs]" >&2
    exit 2
    ;;
esac
# Each requirements file includes requirements-run.txt: both are in the key.
key="$(cat "$here/requirements-run.txt" "$here/$requirements" | sha256sum | cut -c1-12)"
venv="$cache/$name-$key"
# pip's own download cache belongs with the project's caches, not in $HOME.
export PIP_CACHE_DIR="$cache/pip"

if [ ! -x "$venv/bin/$ready" ]; then
  mkdir -p "$cache"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip >&2
  "$venv/bin/pip" install --quiet -r "$here/$requirements" >&2
fi

# kubernetes.core, as released inside the `ansible` package on PyPI (Galaxy is not reachable
# here; PyPI is): only that collection is taken from the wheel, not the whole package.
KUBERNETES_CORE_FROM="ansible==12.2.0" # carries kubernetes.core 6.2.0
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ ! -f "$site/ansible_collections/kubernetes/core/MANIFEST.json" ]; then
  wheels="$cache/wheels"
  mkdir -p "$wheels"
  "$venv/bin/pip" download --quiet --no-deps -d "$wheels" "$KUBERNETES_CORE_FROM" >&2
  "$venv/bin/python" - "$wheels/ansible-${KUBERNETES_CORE_FROM#ansible==}-py3-none-any.whl" "$site" <<'EOF' >&2
import sys, zipfile
wheel, site = sys.argv[1:]
with zipfile.ZipFile(wheel) as archive:
    members = [n for n in archive.namelist() if n.startswith("ansible_collections/kubernetes/core/")]
    archive.extractall(site, members)
print("kubernetes.core from %s: %d files" % (wheel, len(members)))
EOF
fi
echo "$venv"
