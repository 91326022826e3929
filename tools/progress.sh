# shellcheck shell=bash
# progress_run WHAT LOG CMD...: run CMD (a command or a shell function) with its output in LOG
# and, while it runs, say on stderr every PROGRESS_SECONDS (default 60) what is being done, for
# how long, and where the log is: a cold build is never silent for minutes. Returns CMD's
# status; on failure the end of the log goes to stderr.
# Sourced by tools/kubernetes/build-env.sh and images/build.sh; PROGRESS_TAG names the caller.
#
# SLURMKUBE_PROGRESS_FILE: a file that gets a copy of all the script says on stderr (its
# progress lines), started afresh; the module slurmkube.core.job_progress prints its new lines
# while a playbook waits for the script. Unset for the children: they write to the same stderr.
if [[ -n ${SLURMKUBE_PROGRESS_FILE:-} ]]; then
  mkdir -p "$(dirname "$SLURMKUBE_PROGRESS_FILE")"
  exec 2> >(tee "$SLURMKUBE_PROGRESS_FILE" >&2)
  unset SLURMKUBE_PROGRESS_FILE
fi

progress_run() {
  local what="$1" logfile="$2" start=$SECONDS next pid status=0
  shift 2
  next=$((SECONDS + ${PROGRESS_SECONDS:-60}))
  mkdir -p "$(dirname "$logfile")"
  "$@" >"$logfile" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if ((SECONDS >= next)) && kill -0 "$pid" 2>/dev/null; then
      printf '[%s %(%H:%M:%S)T] %s: %d min %02d s so far (log: %s)\n' "${PROGRESS_TAG:-progress}" -1 "$what" \
        $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "$logfile" >&2
      next=$((SECONDS + ${PROGRESS_SECONDS:-60}))
    fi
  done
  wait "$pid" || status=$?
  if ((status != 0)); then
    tail -n 30 "$logfile" >&2
  fi
  return "$status"
}
