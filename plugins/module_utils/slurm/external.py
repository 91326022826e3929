# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's external jobs: the jobs that hold Kubernetes pods' resources (the bridge).

An external job (`sbatch --external`, Slurm 25.05+) is scheduled, limited, prioritised and
accounted like any job, but Slurm starts nothing for it: no batch script, no prolog, no step
(slurmctld refuses them). It runs on ordinary nodes beside native jobs, core by core
(select/cons_tres), so a pod and a job share a node without either being counted twice.
Submitted as root through the controller pod, the bridge's jobs carry a comment that names the
gang of pods they hold: only root can make a root job, so no user can forge one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmControl, SlurmError

COMMENT_PREFIX = "slurmkube-bridge:"
# The states of a job that will hold nothing again (Slurm keeps them MinJobAge, 300 s by default).
ENDED_STATES = frozenset(("BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
                          "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT"))


@dataclass(frozen=True)
class ExternalJobRequest:
    """What one gang of pods asks of Slurm: TASKS pods, each CPUS_PER_TASK CPUs and
    MEM_PER_CPU_MIB of memory per CPU (0: the partition's default), GPUS_PER_TASK GPUs."""

    gang: str
    name: str
    tasks: int
    cpus_per_task: int
    mem_per_cpu_mib: int = 0
    gpus_per_task: int = 0
    partition: Optional[str] = None
    account: Optional[str] = None
    qos: Optional[str] = None
    time_limit: Optional[str] = None
    exclusive: bool = False
    nice: int = 0  # Slurm's nice: negative raises the job's priority (only root may, as the bridge submits)


@dataclass(frozen=True)
class ExternalJob:
    """A bridge job as slurmctld reports it: NODES, the Slurm nodes it holds; ALLOCATION, (Slurm
    node, CPUs) in Slurm's order, only when the job was read in detail (ExternalJobs.detailed)."""

    job_id: int
    gang: str
    state: str
    reason: str
    allocation: Tuple[Tuple[str, int], ...] = ()
    nodes: Tuple[str, ...] = ()

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


def sbatch_argv(request: ExternalJobRequest) -> List[str]:
    """The sbatch command of an external job; each value is one argument (no shell reads it)."""
    argv = ["sbatch", "--external", "--parsable", "--job-name=%s" % request.name,
            "--comment=%s%s" % (COMMENT_PREFIX, request.gang), "--ntasks=%d" % request.tasks,
            "--cpus-per-task=%d" % request.cpus_per_task]
    if request.mem_per_cpu_mib:
        argv.append("--mem-per-cpu=%d" % request.mem_per_cpu_mib)
    if request.gpus_per_task:
        argv.append("--gpus-per-task=%d" % request.gpus_per_task)
    for option, value in (("partition", request.partition), ("account", request.account),
                          ("qos", request.qos), ("time", request.time_limit)):
        if value:
            argv.append("--%s=%s" % (option, value))
    if request.exclusive:
        argv.append("--exclusive")
    if request.nice:
        argv.append("--nice=%d" % request.nice)
    return argv


def parse_job_id(sbatch_output: str) -> int:
    """sbatch --parsable prints "ID" or "ID;CLUSTER"."""
    return int(sbatch_output.strip().split(";")[0])


# `squeue -O` fields, each as wide as its value (size 0) and followed by '|', but the comment: it
# comes last, whatever it holds. One line per job: a few dozen bytes, not squeue --json's ~6 KB.
LIST_FIELDS = ("JobID", "State", "BatchFlag", "Reason", "NodeList")
LIST_FORMAT = ",".join("%s:0|" % name for name in LIST_FIELDS) + ",Comment:0"
NO_VALUE = ("", "(null)", "None")


def expand_hostlist(text: str) -> List[str]:
    """The node names of a Slurm hostlist ("demo-cpu-[0-2,7],demo-wide-0"; zero padding kept)."""
    if text.strip() in NO_VALUE:
        return []
    entries, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            entries.append(text[start:i])
            start = i + 1
    entries.append(text[start:])
    return [name for entry in entries if entry for name in _expand_entry(entry.strip())]


def _expand_entry(entry: str) -> List[str]:
    match = re.match(r"^([^\[]*)\[([^\]]*)\](.*)$", entry)
    if not match:
        return [entry]
    prefix, ranges, rest = match.groups()
    names = []
    for part in ranges.split(","):
        low, _dash, high = part.partition("-")
        for number in range(int(low), int(high or low) + 1):
            names.extend("%s%0*d%s" % (prefix, len(low), number, tail) for tail in _expand_entry(rest))
    return names


def parse_listed(squeue_lines: str) -> List[ExternalJob]:
    """The bridge's jobs in `squeue -O LIST_FORMAT` lines of root's jobs: those no batch script
    runs (external) with our comment."""
    found = []
    for line in squeue_lines.splitlines():
        fields = line.split("|", len(LIST_FIELDS))
        if len(fields) != len(LIST_FIELDS) + 1:
            continue
        job_id, state, batch, reason, nodes, comment = fields
        if batch.strip() != "0" or not comment.startswith(COMMENT_PREFIX) or not job_id.strip().isdigit():
            continue
        found.append(ExternalJob(job_id=int(job_id), gang=comment[len(COMMENT_PREFIX):].strip(), state=state.strip(),
                                 reason="" if reason.strip() in NO_VALUE else reason.strip(),
                                 nodes=tuple(expand_hostlist(nodes))))
    return found


def _allocation(job: Mapping[str, Any]) -> Tuple[Tuple[str, int], ...]:
    nodes = ((job.get("job_resources") or {}).get("nodes") or {}).get("allocation") or []
    return tuple((n["name"], int((n.get("cpus") or {}).get("count") or 0)) for n in nodes)


def parse_external_jobs(squeue_json: str) -> List[ExternalJob]:
    """The bridge's jobs in `squeue --json` output: root's external jobs with our comment."""
    found = []
    for job in json.loads(squeue_json).get("jobs", []):
        comment = job.get("comment") or ""
        if (job.get("user_id") != 0 or "EXTERNAL_JOB" not in (job.get("flags") or ())
                or not comment.startswith(COMMENT_PREFIX)):
            continue
        states = job.get("job_state") or ["UNKNOWN"]
        allocation = _allocation(job)
        found.append(ExternalJob(job_id=int(job["job_id"]), gang=comment[len(COMMENT_PREFIX):], state=states[0],
                                 reason=job.get("state_reason") or "", allocation=allocation,
                                 nodes=tuple(node for node, _cpus in allocation)))
    return found


class ExternalJobs:
    """The bridge's Slurm calls, over the controller's tools (SlurmControl)."""

    def __init__(self, slurm: SlurmControl) -> None:
        self.slurm = slurm

    def submit(self, requests: Sequence[ExternalJobRequest]) -> List[Union[int, SlurmError]]:
        """For each request in order, its new job's id, or a SlurmError with sbatch's message when
        Slurm refused it: one call for them all (SlurmError when the call itself fails)."""
        return [parse_job_id(out) if code == 0 else SlurmError("sbatch failed (exit %d): %s" % (code, err or out))
                for code, out, err in self.slurm.each([sbatch_argv(r) for r in requests])]

    def listed(self) -> List[ExternalJob]:
        """Every bridge job slurmctld still knows, ended ones included, with its nodes: one call per
        cycle, a line per job."""
        return parse_listed(self.slurm.output(["squeue", "--noheader", "--states=all", "--user=root",
                                               "--Format=" + LIST_FORMAT]))

    def detailed(self, job_ids: Sequence[int]) -> List[ExternalJob]:
        """These jobs with their allocation (CPUs per node): read only for the jobs whose pods are
        to be bound."""
        return parse_external_jobs(self.slurm.output(["squeue", "--json", "--states=all",
                                                      "--jobs=" + ",".join(str(j) for j in job_ids)]))

    def cancel(self, job_ids: Sequence[int]) -> None:
        """End the jobs (their pods are gone): Slurm frees what they held at once."""
        self.slurm.cancel(job_ids)

    def nudge(self, job: ExternalJob) -> None:
        """Have slurmctld schedule now: an external job that ends frees its nodes without the
        epilog-complete message after which Slurm schedules (node_scheduler.c's deallocate_nodes
        returns before it), so what it held would wait for the next backfill pass (bf_interval,
        30 s by default) or main pass (sched_interval, 60 s). A job update that succeeds queues a
        pass; this one sets a waiting bridge job's comment to what it already is. SlurmError when
        the job has ended meanwhile."""
        self.slurm.output(["scontrol", "update", "JobId=%d" % job.job_id,
                           "Comment=%s%s" % (COMMENT_PREFIX, job.gang)])

    def complete(self, ends: Sequence[Tuple[int, int]]) -> List[Optional[SlurmError]]:
        """End running jobs as their pods ended, (job id, exit code) each: COMPLETED for 0, else
        FAILED with the code (what sacct shows). For each in order, None, or a SlurmError with
        Slurm's word when it refused (the job already ended): one call for them all."""
        outcomes = self.slurm.each([[C.COMPLETE_JOB_PROGRAM, str(job), str(code)] for job, code in ends])
        return [None if code == 0 else SlurmError("%s failed (exit %d): %s"
                                                  % (C.COMPLETE_JOB_PROGRAM, code, err or out))
                for code, out, err in outcomes]
