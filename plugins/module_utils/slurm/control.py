# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm control through its command-line tools, reading only their JSON output.

The commands run wherever the caller's ``run`` sends them: runner.py sends them to the
controller pod through the Kubernetes exec API (the pod already has munge and the
config, and no extra daemon or token is needed, unlike slurmrestd); tests send them to
real daemons in docker.
"""

from __future__ import annotations

import json
from typing import Callable, Dict, FrozenSet, List, NamedTuple, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError

Runner = Callable[[Sequence[str]], Tuple[int, str, str]]

BUSY_STATES = frozenset(("ALLOCATED", "MIXED", "COMPLETING"))


class SlurmError(SlurmkubeError):
    """A Slurm command failed; the message carries its error output."""


# SlurmControl.each's program: runs the commands of its arguments (each ended by EACH_END), EACH_AT_ONCE
# side by side, and prints, per command in their order, a line: its exit status, its standard output
# and its error output, tab-separated (tabs and newlines within them folded to spaces). The commands'
# words are the script's positional parameters: the shell never parses them ($0, the script's name,
# is the separator; $1 how many run at once).
EACH_END = "--slurmkube-end--"
# Side by side: one's wait for slurmctld's answer overlaps the next one's start. 100 external jobs
# took 0.68 of the time four at once that they took one after the other (13.6 ms a job) on a real
# slurmctld here (tests/bench/bridge_submit.json).
EACH_AT_ONCE = 4
EACH_SCRIPT = r"""
results=$(mktemp -d) || exit 1
trap 'rm -rf "$results"' EXIT
at_once=$1
shift
run() {
  local n=$1 out err code=0
  shift
  out=$("$@" 2>"$results/$n.err") || code=$?
  err=$(<"$results/$n.err")
  printf '%s\t%s\t%s\n' "$code" "${out//[$'\t\n']/ }" "${err//[$'\t\n']/ }" >"$results/$n"
}
n=0
words=()
for word in "$@"; do
  if [[ "$word" != "$0" ]]; then
    words+=("$word")
    continue
  fi
  while (($(jobs -rp | wc -l) >= at_once)); do wait -n; done
  run "$n" "${words[@]}" &
  n=$((n + 1))
  words=()
done
wait
for ((i = 0; i < n; i++)); do cat "$results/$i"; done
"""


class SlurmNode(NamedTuple):
    """One node as slurmctld sees it."""

    name: str
    states: FrozenSet[str]
    reason: str
    features: Tuple[str, ...]

    @property
    def busy(self) -> bool:
        """Jobs are running or finishing on it."""
        return bool(self.states & BUSY_STATES)

    @property
    def draining(self) -> bool:
        """No new job may start on it."""
        return "DRAIN" in self.states

    @property
    def responding(self) -> bool:
        """slurmd answers (a deleted pod's node stops answering)."""
        return not ({"DOWN", "NOT_RESPONDING"} & self.states)


class SlurmJob(NamedTuple):
    """One job from squeue."""

    job_id: int
    states: FrozenSet[str]
    nodes: str
    requeue: bool = True  # False for jobs sent with --no-requeue (or JobRequeue=0)
    external: bool = False  # an external job (the bridge's: Kubernetes pods'): Slurm requeues batch jobs only


def parse_nodes(text: str) -> List[SlurmNode]:
    """Nodes from `scontrol show nodes --json`."""
    data = json.loads(text)
    return [
        SlurmNode(
            name=node["name"],
            states=frozenset(node.get("state") or ()),
            reason=node.get("reason") or "",
            features=tuple(node.get("active_features") or node.get("features") or ()),
        )
        for node in data.get("nodes", [])
    ]


def nodes_by_name(nodes: Sequence[SlurmNode]) -> Dict[str, SlurmNode]:
    """Index nodes by name."""
    return {n.name: n for n in nodes}


def parse_jobs(text: str) -> List[SlurmJob]:
    """Jobs from `squeue --json`."""
    data = json.loads(text)
    return [
        SlurmJob(job_id=int(job["job_id"]), states=frozenset(job.get("job_state") or ()), nodes=job.get("nodes") or "",
                 requeue=bool(job.get("requeue", True)), external="EXTERNAL_JOB" in (job.get("flags") or ()))
        for job in data.get("jobs", [])
    ]


class SlurmControl:
    """The Slurm operations the product needs, over any command runner."""

    def __init__(self, run: Runner) -> None:
        self.run = run

    def output(self, argv: Sequence[str]) -> str:
        """A command's output; SlurmError with its error output when it fails."""
        code, out, err = self.run(argv)
        if code != 0:
            raise SlurmError("%s failed (exit %d): %s" % (" ".join(argv), code, (err or out).strip()))
        return out

    def each(self, commands: Sequence[Sequence[str]]) -> List[Tuple[int, str, str]]:
        """(exit status, output, error output) of each command, run EACH_AT_ONCE side by side by
        one call (a call to the controller pod is an exec: half a second each on a busy node, where
        sbatch takes a twentieth); SlurmError when the call itself fails."""
        if not commands:
            return []
        argv = ["bash", "-c", EACH_SCRIPT, EACH_END, str(EACH_AT_ONCE)]
        for command in commands:
            if EACH_END in command:
                raise ValueError("a command word is the separator %s" % EACH_END)
            argv.extend([*command, EACH_END])
        results = []
        for line in self.output(argv).splitlines():
            code, out, err = (line.split("\t") + ["", ""])[:3]
            results.append((int(code), out.strip(), err.strip()))
        if len(results) != len(commands):
            raise SlurmError("%d of %d commands reported" % (len(results), len(commands)))
        return results

    def release(self) -> str:
        """The Slurm release slurmctld's clients report ("slurm-wlm 26.05.5")."""
        return self.output(["scontrol", "version"]).strip()

    def nodes(self) -> List[SlurmNode]:
        """Every node slurmctld knows."""
        return parse_nodes(self.output(["scontrol", "show", "nodes", "--json"]))

    def jobs_on(self, nodes: Sequence[str]) -> List[SlurmJob]:
        """Jobs that hold any of these nodes."""
        if not nodes:
            return []
        return parse_jobs(self.output(["squeue", "--json", "--nodelist=%s" % ",".join(nodes)]))

    def drain(self, nodes: Sequence[str], reason: str) -> None:
        """No new jobs on these nodes; running ones go on."""
        self._update(nodes, "state=drain", "reason=%s" % reason)

    def down(self, nodes: Sequence[str], reason: str) -> None:
        """The nodes failed: Slurm requeues their jobs (those sent with --no-requeue end NODE_FAIL)."""
        self._update(nodes, "state=down", "reason=%s" % reason)

    def resume(self, nodes: Sequence[str]) -> None:
        """Take the nodes back into service."""
        self._update(nodes, "state=resume")

    def power_up(self, nodes: Sequence[str]) -> None:
        """Resume powered-down nodes without a job (power saving's ResumeProgram runs)."""
        self._update(nodes, "state=power_up")

    def power_down(self, nodes: Sequence[str]) -> None:
        """Suspend idle nodes now rather than after their SuspendTime."""
        self._update(nodes, "state=power_down")

    def _update(self, nodes: Sequence[str], *words: str) -> None:
        if nodes:
            self.output(["scontrol", "update", "nodename=%s" % ",".join(nodes), *words])

    def delete(self, nodes: Sequence[str]) -> None:
        """Forget dynamic nodes (Slurm refuses while a job runs there)."""
        if nodes:
            self.output(["scontrol", "delete", "nodename=%s" % ",".join(nodes)])

    def cancel(self, job_ids: Sequence[int]) -> None:
        """End jobs at once: what they hold goes back to Slurm."""
        if job_ids:
            self.output(["scancel", *(str(j) for j in job_ids)])

    def requeue(self, job_ids: Sequence[int]) -> None:
        """Put jobs back in the queue; they start again elsewhere."""
        if job_ids:
            self.output(["scontrol", "requeue", ",".join(str(j) for j in job_ids)])

    def reconfigure(self) -> None:
        """Re-read the configuration files on slurmctld and every slurmd."""
        self.output(["scontrol", "reconfigure"])
