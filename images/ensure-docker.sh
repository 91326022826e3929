#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine: install docker.io from Debian when the
# daemon is missing and start dockerd in the background when it is not running. Machines
# without systemd (CI, containers) have no service manager to do it for us.
set -euo pipefail

log="${SLURMKUBE_CACHE:-/var/cache/slurmkube}/dockerd.log"

if docker info >/dev/null 2>&1; then
  exit 0
fi

# dockerd keeps every descriptor it is given for as long as it runs. Callers hold their build
# locks on open descriptors (images/build.sh, tools/kind's node-image.sh and kind.sh), and a lock
# passed on to the daemon is never released: every later build waits an hour for it (a CI run
# timed out so). It gets its log and nothing else.
close_inherited_descriptors() {
  local fd
  for fd in /proc/"$BASHPID"/fd/*; do
    fd=${fd##*/}
    if ((fd > 2)); then eval "exec $fd>&-"; fi
  done
}

if ! command -v dockerd >/dev/null 2>&1; then
  # Where no policy-rc.d forbids it, the package's own script starts the daemon: without them too.
  (
    close_inherited_descriptors
    exec bash "$(dirname "${BASH_SOURCE[0]}")/../tools/apt-install.sh" docker.io
  )
fi

mkdir -p "$(dirname "$log")"
# On a fresh machine both test lanes' builds get here at once: one starts the daemon.
exec 7>"$(dirname "$log")/dockerd-start.lock"
flock -w 120 7 || true
if ! pgrep -x dockerd >/dev/null 2>&1; then
  (
    close_inherited_descriptors
    exec nohup dockerd >"$log" 2>&1 </dev/null
  ) &
fi

for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    exit 0
  fi
  sleep 1
done
echo "dockerd did not answer within 60 s; its log is $log" >&2
tail -n 20 "$log" >&2 || true
exit 1
