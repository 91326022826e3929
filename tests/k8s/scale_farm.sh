#!/usr/bin/env bash
# The scale bench's slurmd farm (tests/k8s/test_scale_bench.py), run in one real worker pod through
# `kubectl exec -i ... bash -s NAME:PORT:FEATURE...`: one slurmd per simulated node (kwok's pods run
# nothing), each registering as that node (-Z -N, its own port: Debian's Slurm is built with
# multiple-slurmd support) with its node set's feature (partitions choose node sets by it), so
# slurmctld knows every node as it would know real ones. Keeps running exactly the nodes named:
# starts the missing ones, stops the others.
#
# Their slurm.conf is the cluster's with what many slurmd on one machine must not share (spool,
# pid file) made per node, and nothing that would run on a schedule or confine jobs: no health
# check, no cgroups (a thousand slurmd would each set up their own). slurmctld only logs that its
# hash differs (the bench sets DebugFlags=NO_CONF_HASH).
set -euo pipefail

farm=/tmp/farm
conf="$farm/slurm.conf"
if [ ! -f "$conf" ]; then
  mkdir -p "$farm"
  for file in /etc/slurm/*; do
    [ "$file" = /etc/slurm/slurm.conf ] || ln -sf "$file" "$farm/"
  done
  grep -Ev '^(SlurmdSpoolDir|SlurmdPidFile|SlurmdLogFile|HealthCheck[A-Za-z]*|TaskPlugin|ProctrackType|JobAcctGatherType)=' \
    /etc/slurm/slurm.conf >"$conf.new"
  cat >>"$conf.new" <<EOF
SlurmdSpoolDir=$farm/%n
SlurmdPidFile=$farm/%n.pid
TaskPlugin=task/none
ProctrackType=proctrack/linuxproc
JobAcctGatherType=jobacct_gather/none
EOF
  mv "$conf.new" "$conf"
fi

declare -A port=() feature=()
for node in "$@"; do
  IFS=: read -r name port["${node%%:*}"] feature["${node%%:*}"] <<<"$node"
done
# Each started slurmd's process id, in NAME.run (its own pid file appears only once it is up).
declare -A stopped=()
for run in "$farm"/*.run; do
  [ -e "$run" ] || continue
  name="$(basename "$run" .run)"
  if [ -z "${port[$name]:-}" ]; then
    stopped["$name"]="$(cat "$run")"
    kill "${stopped[$name]}" 2>/dev/null || true
  fi
done
# Gone before their files are, and before any is started again: a node made again takes its port back.
for name in "${!stopped[@]}"; do
  for _ in $(seq 100); do
    kill -0 "${stopped[$name]}" 2>/dev/null || break
    sleep 0.1
  done
  rm -rf "${farm:?}/$name.run" "${farm:?}/$name"
done
for name in "${!port[@]}"; do
  # Running already (one that died, or lost with its container, is started again).
  [ -e "$farm/$name.run" ] && kill -0 "$(cat "$farm/$name.run")" 2>/dev/null && continue
  mkdir -p "$farm/$name"
  setsid slurmd -D -Z -N "$name" -f "$conf" \
    --conf "CPUs=1 RealMemory=512 Feature=${feature[$name]} Port=${port[$name]}" \
    </dev/null >"$farm/$name/slurmd.log" 2>&1 &
  echo "$!" >"$farm/$name.run"
done
