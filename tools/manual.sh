#!/usr/bin/env bash
# The admin's manual: the guides of docs/manual, the metrics and runbooks of docs/, and the
# collection's reference (every module and role, from their own docs and argument specs, written
# by antsibull-docs), built by Sphinx into OUT (default build/manual); a warning fails the build,
# and so does a markup error in a module's or role's docs (antsibull-docs lint-collection-docs).
#   tools/manual.sh [OUT]            then open OUT/index.html
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$(realpath -m "${1:-$repo/build/manual}")"
venv="$(bash "$repo/hack/ensure-venv.sh" docs)"
export PATH="$venv/bin:$PATH"

work="$(mktemp -d "${TMPDIR:-/tmp}/slurmkube-manual.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# antsibull-docs reads the collection where Ansible finds collections (kubernetes.core, whose
# connection options our modules document, is in the environment's site-packages).
mkdir -p "$work/collections/ansible_collections/slurmkube"
ln -s "$repo" "$work/collections/ansible_collections/slurmkube/core"
export ANSIBLE_COLLECTIONS_PATH="$work/collections"

echo "==> antsibull-docs lint-collection-docs" >&2
(cd "$work/collections/ansible_collections/slurmkube/core" && antsibull-docs lint-collection-docs --plugin-docs .)

echo "==> the reference (antsibull-docs collection)" >&2
src="$work/src"
cp -r "$repo/docs/manual" "$src"
cp "$repo/docs/metrics.md" "$repo/docs/runbooks.md" "$src/"
# antsibull-docs writes only into a directory that is its owner's alone.
mkdir -m 0700 "$src/reference"
antsibull-docs collection --use-current --squash-hierarchy --dest-dir "$src/reference" slurmkube.core >&2

echo "==> sphinx-build into $out" >&2
rm -rf "$out"
sphinx-build -q -W --keep-going -b html "$src" "$out"
echo "$out/index.html"
