#!/usr/bin/env bash
# What the cgroup v2 guest (tests/images/test_cgroup_v2.py) boots with: qemu and cpio from
# Debian, and Debian's kernel, unpacked once into the cache. Prints the kernel's path.
# This host is cgroup v1; a kernel of our own may mount its controllers as v2 alone, as
# most Kubernetes nodes do today.
set -euo pipefail

cache="${SLURMKUBE_CACHE:-/var/cache/slurmkube}"

if ! command -v qemu-system-x86_64 >/dev/null 2>&1 || ! command -v cpio >/dev/null 2>&1; then
  bash "$(dirname "${BASH_SOURCE[0]}")/../tools/apt-install.sh" --no-install-recommends qemu-system-x86 cpio
fi

# The kernel package linux-image-amd64 points at today (its vmlinuz only: the guest loads no modules).
versioned() { apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1; }
package="$(versioned)"
if [[ -z "$package" ]]; then
  bash "$(dirname "${BASH_SOURCE[0]}")/../tools/apt-install.sh" --update
  package="$(versioned)"
fi
[[ -n "$package" ]] || { echo "ensure-vm: no linux-image package found" >&2; exit 1; }
dir="$cache/vm-kernel/$package"
if [[ ! -f "$dir/vmlinuz" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && apt-get download "$package" >/dev/null 2>&1)
  dpkg-deb --fsys-tarfile "$work"/"$package"_*.deb | tar -C "$work" -x --wildcards './boot/vmlinuz-*'
  mkdir -p "$dir"
  mv "$work"/boot/vmlinuz-* "$dir/vmlinuz.tmp"
  mv "$dir/vmlinuz.tmp" "$dir/vmlinuz"
fi
echo "$dir/vmlinuz"
