# shellcheck shell=bash
# The entrypoints' base (sourced after constants.sh): logs with a timestamp, one daemon run in
# the foreground's stead and supervised with its munged, signals passed on to it.

ROLE="${SLURMKUBE_ROLE:-}"
DAEMON_PID=""
MUNGED_PID="" # set by munge.sh's start_munged

log() { printf '%s slurmkube-entrypoint[%s]: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${ROLE:-exec}" "$*"; }

die() {
  log "error: $*"
  exit 1
}

# Daemons that print plain lines on stderr (munged, sshd -e) get the time Slurm's own lines
# carry (LogTimeFormat=iso8601_ms,format_stderr): "[2026-11-25T10:57:53.008] message".
stamp_lines() {
  local line now frac
  while IFS= read -r line; do
    now="$EPOCHREALTIME"
    frac="${now#*.}"
    printf '[%(%Y-%m-%dT%H:%M:%S)T.%s] %s\n' "${now%.*}" "${frac:0:3}" "$line"
  done
}

# Exec a daemon with its stderr through stamp_lines; run in the background, $! is the daemon.
with_stamped_stderr() {
  exec "$@" 2> >(stamp_lines >&2)
}

# TERM and INT go to the daemon; HUP to HANDLER (the munge key roll's), or nowhere. The pid is
# written where slurmkube-munge-key finds it.
entrypoint_start() {
  local hangup="${1:-:}"
  trap 'on_signal TERM' TERM
  trap 'on_signal INT' INT
  # shellcheck disable=SC2064 # the handler's name is fixed now
  trap "$hangup" HUP
  install -d "$(dirname "$ENTRYPOINT_PID_FILE")"
  echo "$$" >"$ENTRYPOINT_PID_FILE"
}

on_signal() {
  log "received SIG$1; stopping"
  if [[ -n "$DAEMON_PID" ]]; then
    kill -"$1" "$DAEMON_PID" 2>/dev/null || true
  else
    # Still waiting for something before the daemon started: just leave.
    stop_companions
    exit 0
  fi
}

# The daemon's munged, when the role started one.
stop_companions() {
  [[ -z "$MUNGED_PID" ]] || stop_munged
}

# Run the daemon in the background and wait for it; a munged that dies takes the daemon
# down with it (the pod restarts), a signal is forwarded by on_signal.
run_daemon() {
  log "starting: $*"
  "$@" &
  DAEMON_PID=$!
  local who rc name="$1"
  [[ "$name" != with_stamped_stderr ]] || name="$2"
  while :; do
    who=""
    set +e
    wait -n -p who "$DAEMON_PID" ${MUNGED_PID:+"$MUNGED_PID"}
    rc=$?
    set -e
    who="${who:-}" # a trapped signal interrupting wait leaves it unset
    if [[ "$who" == "$DAEMON_PID" ]]; then
      log "$name exited with status $rc"
      stop_companions
      exit "$rc"
    elif [[ -n "$who" && "$who" == "$MUNGED_PID" ]]; then
      log "munged exited with status $rc; stopping $name"
      MUNGED_PID=""
      kill -TERM "$DAEMON_PID" 2>/dev/null || true
      wait "$DAEMON_PID" 2>/dev/null || true
      exit 1
    fi
    # Otherwise a trapped signal interrupted wait: keep waiting for the daemon to finish.
  done
}

# Wait until HOST:PORT accepts TCP (for ever: the pod is not ready meanwhile).
wait_for_tcp() {
  local what="$1" host="$2" port="$3" i=0
  until timeout 3 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null; do
    ((i++ % 15)) || log "waiting for $what at $host:$port"
    sleep 2
  done
  log "$what at $host:$port answers"
}
