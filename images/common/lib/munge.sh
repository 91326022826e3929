# shellcheck shell=bash
# munged beside a Slurm daemon (sourced after base.sh): the key copied from the Secret, munged
# made non-dumpable, started again with a new key on SIGHUP (entrypoint_start reload_munge_key).

MUNGE_SOCKET="$MUNGE_SOCKET_DIR/munge.socket.2"

# Secret files are root-owned symlinks; munged refuses both, so the key is copied.
install_munge_key() {
  local src="$MUNGE_KEY_MOUNT_DIR/$MUNGE_KEY_SECRET_KEY"
  [[ -r "$src" ]] || die "no munge key at $src (mount the cluster's munge key Secret there)"
  install -d -o munge -g munge -m 0700 /etc/munge
  install -o munge -g munge -m 0400 "$src" /etc/munge/munge.key
  log "installed munge key from $src"
}

key_fingerprint() { echo "sha256:$(sha256sum "$1" | cut -d' ' -f1)"; }

start_munged() {
  install -d -o munge -g munge -m 0755 "$MUNGE_SOCKET_DIR"
  install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
  # setpriv execs (runuser would stay in between): the pid is munged's own, for signals.
  # munged's real gid is nogroup, its effective and saved gid munge's: an exec whose real and
  # effective ids differ leaves the process non-dumpable, so munged's memory, environment and
  # maps (the keys it derives from the key file are in its heap) are root's and refused even to
  # a process of munged's own uid and gid, which a job could otherwise become.
  # Ten threads, as SchedMD's high-throughput guide suggests: munged's two by default queue the
  # credentials of many jobs starting or ending at once.
  with_stamped_stderr setpriv --reuid=munge --rgid=nogroup --egid=munge --clear-groups -- \
    munged --foreground --num-threads=10 --socket="$MUNGE_SOCKET" &
  MUNGED_PID=$!
  local i
  for i in $(seq 1 300); do
    if [[ -S "$MUNGE_SOCKET" ]] && munge -n -S "$MUNGE_SOCKET" | unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1; then
      install -d "$(dirname "$MUNGE_RUNNING_KEY_FILE")"
      key_fingerprint /etc/munge/munge.key >"$MUNGE_RUNNING_KEY_FILE"
      # munged holds the key in memory now: no copy stays readable by munged's uid (the
      # Secret's own file is root's, 0400).
      rm -f /etc/munge/munge.key
      log "munged is up (pid $MUNGED_PID, key $(cat "$MUNGE_RUNNING_KEY_FILE"))"
      return 0
    fi
    kill -0 "$MUNGED_PID" 2>/dev/null || die "munged exited at start"
    ((i % 50)) || log "waiting for munged's socket $MUNGE_SOCKET"
    sleep 0.1
  done
  die "munged did not answer on $MUNGE_SOCKET within 30 s"
}

# SIGHUP (sent by slurmkube-munge-key switch): munged again, with the key now mounted from
# the Secret. The daemon keeps running; its munge calls fail for the moment munged is away
# and Slurm retries them. Before munged started there is nothing to do.
reload_munge_key() {
  [[ -n "$MUNGED_PID" ]] || return 0
  log "SIGHUP: restarting munged with the mounted key"
  install_munge_key
  stop_munged
  start_munged
}

stop_munged() {
  if [[ -n "$MUNGED_PID" ]] && kill -0 "$MUNGED_PID" 2>/dev/null; then
    kill -TERM "$MUNGED_PID" 2>/dev/null || true
    wait "$MUNGED_PID" 2>/dev/null || true
    log "munged stopped"
  fi
  MUNGED_PID=""
}
