# shellcheck shell=bash
# What the Slurm daemons' entrypoints share (sourced after base.sh): slurm.conf's values, the
# jail and its accounts, the wait for slurmctld.

SLURM_CONF="$SLURM_CONFIG_DIR/slurm.conf"

# The value of KEY in slurm.conf (keys are case-insensitive; the last one wins), or DEFAULT.
slurm_conf_value() {
  local key="$1" default="$2" value=""
  if [[ -r "$SLURM_CONF" ]]; then
    value="$(sed -n "s/^[[:space:]]*${key}[[:space:]]*=[[:space:]]*\([^[:space:]#]*\).*/\1/Ip" "$SLURM_CONF" | tail -n1)"
  fi
  echo "${value:-$default}"
}

jail_path() { echo "${SLURMKUBE_JAIL_PATH-$JAIL_MOUNT_PATH}"; }

# Workers and login nodes are useless before the jail is populated. An empty
# SLURMKUBE_JAIL_PATH means "no jail" (tests, bare Slurm).
wait_for_jail() {
  local jail marker i=0
  jail="$(jail_path)"
  if [[ -z "$jail" ]]; then
    log "SLURMKUBE_JAIL_PATH is empty: running without a jail"
    return 0
  fi
  marker="$jail/$JAIL_MARKER_FILE"
  until [[ -r "$marker" ]]; do
    ((i++ % 30)) || log "waiting for the jail to be populated ($marker)"
    sleep 2
  done
  log "jail $jail is populated (version $(head -n1 "$marker"))"
}

controller_host() {
  if [[ -n "${SLURMKUBE_CONTROLLER_HOST:-}" ]]; then
    echo "$SLURMKUBE_CONTROLLER_HOST"
    return
  fi
  # SlurmctldHost=name(address): the address when given, else the name.
  local host
  host="$(slurm_conf_value SlurmctldHost "")"
  [[ -n "$host" ]] || die "SLURMKUBE_CONTROLLER_HOST is unset and slurm.conf has no SlurmctldHost"
  if [[ "$host" == *"("*")" ]]; then
    host="${host#*(}"
    host="${host%)}"
  fi
  echo "$host"
}

# `scontrol ping` says UP. Its output is read whole: `scontrol ping | grep -q` is false under
# pipefail whenever grep quits at the match before scontrol has written its next line (the
# backup controller's) and scontrol dies of SIGPIPE.
controller_answers_up() {
  local answer
  answer="$(scontrol ping 2>/dev/null)" || true
  [[ $answer == *"is UP"* ]]
}

# slurmd started before slurmctld answers backs off for minutes: wait for TCP, then ping.
# With a limit in seconds, give up (exit 1) after it; without, wait for ever.
wait_for_controller() {
  local limit="${1:-0}" host port i=0
  host="$(controller_host)"
  port="$(slurm_conf_value SlurmctldPort "$SLURMCTLD_PORT")"
  until timeout 3 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null; do
    ((i++ % 15)) || log "waiting for TCP $host:$port"
    ((limit == 0 || SECONDS < limit)) || die "controller $host:$port did not answer within $limit s"
    sleep 2
  done
  i=0
  until controller_answers_up; do
    ((i++ % 15)) || log "waiting for 'scontrol ping' to answer UP"
    ((limit == 0 || SECONDS < limit)) || die "controller $host:$port did not answer within $limit s"
    sleep 2
  done
  log "controller $host:$port answers"
}

# Users and groups live in the jail. slurmctld (job credentials carry names) and sshd (logins)
# resolve them through nss-extrausers, whose directory is the jail's /etc: a user added in
# the jail exists here at once. The image's own system users (files) come first.
use_jail_accounts() {
  local jail
  jail="$(jail_path)"
  [[ -n "$jail" ]] || return 0
  ln -sfn "$jail/etc" /var/lib/extrausers
  log "accounts: /etc/passwd, then $jail/etc/{passwd,group,shadow}"
}
