# shellcheck shell=bash
# A Slurm node's status as the image scripts read it (the worker's stop hook, the entrypoint,
# the health check): one line "<reason>\t<state flags joined by ,>\t<gres>" from scontrol's
# JSON, taken apart by the functions below. `IFS=$'\t' read` would not do: a tab is IFS white
# space, so an empty reason would take the state's place.

# node_status NODE: the line; fails when slurmctld could not be asked. Time-limited: with munged
# hung, scontrol would wait forever.
node_status() {
  timeout 15 scontrol show node "$1" --json 2>/dev/null |
    jq -r '.nodes[0] | [(.reason // ""), ((.state // []) | join(",")), (.gres // "")] | @tsv'
}

status_reason() { printf '%s\n' "${1%%$'\t'*}"; }

status_gres() {
  [[ "$1" == *$'\t'*$'\t'* ]] || return 0
  printf '%s\n' "${1##*$'\t'}"
}

# status_has STATUS FLAG: whether the node's state flags include FLAG (DRAIN, DOWN, IDLE, ...).
status_has() {
  [[ "$1" == *$'\t'* ]] || return 1
  local state="${1#*$'\t'}"
  state="${state%%$'\t'*}"
  [[ ",$state," == *",$2,"* ]]
}
