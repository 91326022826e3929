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
# The copy is made by progress_relay, which also speaks when the script is quiet (below).

# progress_relay FILE: each line of stdin to stderr and to FILE (started afresh), as tee would;
# and when no line came for PROGRESS_SECONDS + 2, a line of its own saying what the script said
# last and how long ago. progress_run's steps each say something every PROGRESS_SECONDS, but several
# quiet steps in a row did not: in CI, kind.sh said nothing for 70 s between "creating cluster"
# (kind create, 40 s) and its restart of a kube-router (30 s into the pod network's wait). The 2 s
# leave a step's own line, due at PROGRESS_SECONDS, the first word.
progress_relay() {
  local file=$1 line="" part last="" status spoke=$SECONDS said=$SECONDS quiet=$((${PROGRESS_SECONDS:-60} + 2)) fd
  exec {fd}>"$file"
  while :; do
    status=0
    IFS= read -r -t 1 part || status=$?
    line+=$part # a timed-out read keeps its part of a line: the rest comes with the next read
    if ((status > 128)); then
      if ((SECONDS - said >= quiet)); then
        printf -v part '[%s %(%H:%M:%S)T] still working, %d min %02d s since: %s' "${PROGRESS_TAG:-progress}" -1 \
          $(((SECONDS - spoke) / 60)) $(((SECONDS - spoke) % 60)) "${last:0:200}"
        printf '%s\n' "$part" >&2
        printf '%s\n' "$part" >&"$fd"
        said=$SECONDS
      fi
      continue
    fi
    if ((status == 0)) || [[ -n $line ]]; then
      printf '%s\n' "$line" >&2
      printf '%s\n' "$line" >&"$fd"
      last=${line#\[* ??:??:??\] }
      line=""
      spoke=$SECONDS
      said=$SECONDS
    fi
    ((status == 0)) || return 0 # end of input: the script and everything it started are done
  done
}

if [[ -n ${SLURMKUBE_PROGRESS_FILE:-} ]]; then
  mkdir -p "$(dirname "$SLURMKUBE_PROGRESS_FILE")"
  exec 2> >(progress_relay "$SLURMKUBE_PROGRESS_FILE")
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
