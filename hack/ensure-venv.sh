#!/usr/bin/env bash
# Create (or reuse) the Python environment every project command runs in, and print its
# path. It lives outside the repository, keyed by the requirements, so a warm machine
# reuses it and a changed requirement gets a fresh one.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${SLURMKUBE_CACHE:-/var/cache/slurmkube}"
key="$(sha256sum "$here/requirements.txt" | cut -c1-12)"
venv="$cache/venv-$key"

if [ ! -x "$venv/bin/ansible-test" ]; then
  mkdir -p "$cache"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip >&2
  "$venv/bin/pip" install --quiet -r "$here/requirements.txt" >&2
fi
echo "$venv"
