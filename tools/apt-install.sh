#!/usr/bin/env bash
# apt-install.sh [APT-OPTION...] PACKAGE...: install Debian packages on this machine (root), after
# `apt-get update` when the install fails (a fresh machine has no package lists yet).
# apt-install.sh --update: only `apt-get update` (for a caller that reads the lists itself).
# On a fresh machine several of our scripts install what they need at the same moment (each test
# lane's image build installs docker, the VM test qemu, the builds debootstrap): apt and dpkg take
# one caller at a time and fail the others at once on their locks (a cold run lost the cgroup v2
# module so). Ours queue here, on one lock; apt waits for anyone else's (DPkg::Lock::Timeout).
set -euo pipefail

cache="${SLURMKUBE_CACHE:-/var/cache/slurmkube}"
mkdir -p "$cache"
exec 9>"$cache/apt.lock"
flock -w 1800 9 || {
  echo "apt-install: $cache/apt.lock held for 30 minutes" >&2
  exit 1
}

# 9>&-: a package's own scripts may start a daemon (docker.io starts dockerd), which would keep
# the lock for as long as it runs.
apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@" 9>&-; }

if [[ ${1:-} == --update ]]; then
  apt_get update -qq
  exit
fi

apt_get install -y -qq "$@" >/dev/null 2>&1 || {
  apt_get update -qq
  apt_get install -y -qq "$@" >/dev/null
}
