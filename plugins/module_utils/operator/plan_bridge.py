# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bridge's decisions: which pods' Slurm jobs to submit, which pods to bind where, which jobs
to cancel and which pods to end. Pure: pods, group sizes and Slurm's bridge jobs in, actions out.

A gang is the pods that must start together: a PodGroup's (scheduler-plugins: its minMember), a
LeaderWorkerSet group's (its leader and workers), a JobSet replicated job's (its Jobs' parallel pods),
a Kubernetes Job's parallel pods (as many as it runs at once), or one pod alone. Each gang is one
external Slurm job of one task per pod. Its key, in the job's comment, is a digest of its pods'
uids, so an operator that restarts finds the job it submitted from Slurm itself and never submits
a second one. A pod is labelled with its job's id and the Slurm node it got before it is bound, so
a restart also finishes a binding it began.

Fail-closed: a pod is ended only when Slurm reports its job ended (cancelled, preempted, timed
out); a job is ended only when none of its pods is left, a terminating pod counting until its
containers are gone, so Slurm never gives away what a pod still holds. A running job whose pods
ran to their end is completed with their exit code (COMPLETED, or FAILED and the code, in sacct);
one whose pods were deleted is cancelled. The one exception is a
pod whose Kubernetes node has stopped reporting for spec.bridge.lostNodeTimeoutSeconds: its
containers' end will never be confirmed, so it is deleted by force and its gang's job cancelled.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import parse_time, pod_terminating
from ansible_collections.slurmkube.core.plugins.module_utils.model.bridge import Bridge
from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import SLURM_NAME
from ansible_collections.slurmkube.core.plugins.module_utils.quantity import parse_quantity
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.external import ExternalJob, ExternalJobRequest

MIB = 1024 * 1024
# What the bridge cannot honour: Slurm alone chooses the node.
UNSUPPORTED_FIELDS = (("nodeSelector", "nodeSelector"), ("affinity", "affinity"),
                      ("topologySpreadConstraints", "topologySpreadConstraints"))
TERMINAL_PHASES = ("Succeeded", "Failed")
# The widest adjustment `sbatch --nice` takes, either way.
NICE_LIMIT = 2147483645
# Slurm's time formats (minutes, [days-]hours:minutes:seconds and their shorter forms).
SLURM_TIME = r"^([0-9]+-)?[0-9]+(:[0-9]+){0,2}$|^(UNLIMITED|INFINITE)$"
ANNOTATION_FORMS = ((C.ANNOTATION_BRIDGE_ACCOUNT, SLURM_NAME), (C.ANNOTATION_BRIDGE_PARTITION, SLURM_NAME),
                    (C.ANNOTATION_BRIDGE_QOS, SLURM_NAME), (C.ANNOTATION_BRIDGE_TIME_LIMIT, SLURM_TIME))


@dataclass(frozen=True)
class Submit:
    request: ExternalJobRequest
    pods: Tuple[str, ...]  # namespace/name


@dataclass(frozen=True)
class Bind:
    namespace: str
    pod: str
    job_id: int
    slurm_node: str
    host: str  # the Kubernetes node of that Slurm node's pod


@dataclass(frozen=True)
class Cancel:
    job_id: int
    why: str


@dataclass(frozen=True)
class Complete:
    """A running job whose pods all ended: EXIT_CODE is the code Slurm records (0: COMPLETED)."""

    job_id: int
    exit_code: int
    why: str


@dataclass(frozen=True)
class EndPod:
    namespace: str
    pod: str
    job_id: int
    why: str


# Slurm's reasons for a pending job that will not run as it was asked (no node of the partition is
# that large, the limits or constraints forbid it, the account or QoS is not the user's); any
# other reason (Resources, Priority, a limit reached for now) is the queue at work.
NEVER_AS_ASKED = frozenset(("PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit", "BadConstraints",
                            "InvalidAccount", "InvalidQOS", "QOSMaxCpuPerJobLimit", "QOSMaxNodePerJobLimit",
                            "AssocMaxCpuPerJobLimit", "AssocMaxNodePerJobLimit", "AssocMaxWallDurationPerJobLimit",
                            "QOSMaxWallDurationPerJobLimit"))


@dataclass(frozen=True)
class Wait:
    """A gang whose job waits in Slurm's queue, and Slurm's reason (said once per reason)."""

    pods: Tuple[str, ...]  # namespace/name
    job_id: int
    reason: str

    @property
    def never_as_asked(self) -> bool:
        return self.reason in NEVER_AS_ASKED


@dataclass(frozen=True)
class Hold:
    """A pod the bridge leaves Pending, and why (said once, as an Event)."""

    namespace: str
    pod: str
    reason: str
    message: str


@dataclass
class BridgePlan:
    submits: List[Submit] = field(default_factory=list)
    binds: List[Bind] = field(default_factory=list)
    cancels: List[Cancel] = field(default_factory=list)
    completes: List[Complete] = field(default_factory=list)
    ends: List[EndPod] = field(default_factory=list)
    forced: List[EndPod] = field(default_factory=list)  # deleted without waiting for their kubelet
    details: List[int] = field(default_factory=list)  # running jobs whose CPUs per node binding needs
    holds: List[Hold] = field(default_factory=list)
    waits: List[Wait] = field(default_factory=list)
    nudge: Optional[ExternalJob] = None  # a waiting job whose update makes Slurm schedule now

    @property
    def frees(self) -> bool:
        """Whether the plan ends jobs, giving their CPUs back to Slurm."""
        return bool(self.cancels or self.completes)


def pod_key(pod: Mapping[str, Any]) -> str:
    return "%s/%s" % (pod["metadata"]["namespace"], pod["metadata"]["name"])


def is_gone(pod: Mapping[str, Any]) -> bool:
    """Its containers have stopped: what it held may go to others."""
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def ended_by_deletion(pod: Mapping[str, Any]) -> bool:
    """Its containers stopped because it was deleted: they ended once its deletion was asked
    (deletionTimestamp less its grace period), or have not ended. Kubernetes gives a deleted pod a
    terminal phase before it removes it; that pod did not run to its end."""
    meta = pod.get("metadata") or {}
    deleted = parse_time(meta.get("deletionTimestamp"))
    if deleted is None:
        return False
    asked = deleted - datetime.timedelta(seconds=int(meta.get("deletionGracePeriodSeconds") or 0))
    ends = [parse_time(((status.get("state") or {}).get("terminated") or {}).get("finishedAt"))
            for status in (pod.get("status") or {}).get("containerStatuses") or ()]
    return not ends or any(end is None or end >= asked for end in ends)


def gang_exit_code(pods: Sequence[Mapping[str, Any]]) -> int:
    """What ended pods say to Slurm: 0 when every one succeeded, else the highest exit code of a
    failed pod's containers (1 when none gives one; 255 at most, as for any job)."""
    failed = [pod for pod in pods if (pod.get("status") or {}).get("phase") == "Failed"]
    if not failed:
        return 0
    codes = [((status.get("state") or {}).get("terminated") or {}).get("exitCode") or 0
             for pod in failed for status in (pod.get("status") or {}).get("containerStatuses") or ()]
    return min(max([code for code in codes if code > 0] or [1]), 255)


def job_label(pod: Mapping[str, Any]) -> Optional[int]:
    value = (pod["metadata"].get("labels") or {}).get(C.LABEL_SLURM_JOB)
    return int(value) if value and value.isdigit() else None


def controller_owner(pod: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    for ref in pod["metadata"].get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def unsupported(pod: Mapping[str, Any]) -> List[str]:
    spec = pod.get("spec") or {}
    return [name for key, name in UNSUPPORTED_FIELDS if spec.get(key)]


def bad_annotations(pod: Mapping[str, Any]) -> List[str]:
    """The bridge's annotations of the pod that Slurm could not read, each with its value."""
    found = pod["metadata"].get("annotations") or {}
    return ["%s=%r" % (key, found[key]) for key, form in ANNOTATION_FORMS
            if key in found and not re.match(form, found[key])]


def allowed_accounts(bridge: Bridge, namespace: str) -> List[str]:
    return [a for given in bridge.accounts if given.namespace == namespace for a in given.accounts]


def forbidden_accounts(pod: Mapping[str, Any], bridge: Bridge) -> List[str]:
    """The account the pod names, when its namespace is not given it (spec.bridge.accounts)."""
    account = (pod["metadata"].get("annotations") or {}).get(C.ANNOTATION_BRIDGE_ACCOUNT)
    return [account] if account and account not in allowed_accounts(bridge, pod["metadata"]["namespace"]) else []


def pod_request(pod: Mapping[str, Any]) -> Tuple[int, int, int]:
    """(CPUs, MiB of memory, GPUs) the pod requests: its containers' sum, at least what its
    largest init container asks; Slurm counts whole CPUs, at least one."""
    def total(containers: Sequence[Mapping[str, Any]], resource: str, part: str = "requests") -> Any:
        return sum((parse_quantity(((c.get("resources") or {}).get(part) or {}).get(resource, "0"))
                    for c in containers), parse_quantity("0"))

    spec = pod.get("spec") or {}
    containers, inits = spec.get("containers") or [], spec.get("initContainers") or []
    cpu = max([total(containers, "cpu")] + [total([c], "cpu") for c in inits])
    memory = max([total(containers, "memory")] + [total([c], "memory") for c in inits])
    gpus = total(containers, C.BRIDGE_GPU_RESOURCE, "limits")
    return max(1, math.ceil(cpu)), math.ceil(memory / MIB), int(gpus)


def gang_nice(pods: Sequence[Mapping[str, Any]]) -> int:
    """The Slurm nice of a gang's job: minus its highest pod priority (the value of the pods'
    PriorityClass, which Kubernetes sets at admission), so a pod's priority adds to its job's
    Slurm priority as `sprio` shows under NICE, beside fair share, age and QoS."""
    priority = max(int((p.get("spec") or {}).get("priority") or 0) for p in pods)
    return max(-NICE_LIMIT, min(NICE_LIMIT, -priority))


def gang_key(pods: Sequence[Mapping[str, Any]]) -> str:
    uids = sorted(p["metadata"]["uid"] for p in pods)
    return hashlib.sha256(",".join(uids).encode()).hexdigest()[:16]


def annotation(pods: Sequence[Mapping[str, Any]], key: str) -> Optional[str]:
    for pod in pods:
        value = (pod["metadata"].get("annotations") or {}).get(key)
        if value:
            return value
    return None


def job_request(pods: Sequence[Mapping[str, Any]], name: str, bridge: Bridge) -> ExternalJobRequest:
    """One task per pod, each as large as the gang's largest pod."""
    cpus, memory, gpus = (max(values) for values in zip(*(pod_request(p) for p in pods)))
    return ExternalJobRequest(
        gang=gang_key(pods), name=name, tasks=len(pods), cpus_per_task=cpus,
        mem_per_cpu_mib=math.ceil(memory / cpus) if memory else 0, gpus_per_task=gpus,
        partition=annotation(pods, C.ANNOTATION_BRIDGE_PARTITION) or bridge.partition,
        account=annotation(pods, C.ANNOTATION_BRIDGE_ACCOUNT), qos=annotation(pods, C.ANNOTATION_BRIDGE_QOS),
        time_limit=annotation(pods, C.ANNOTATION_BRIDGE_TIME_LIMIT), exclusive=bridge.exclusive,
        nice=gang_nice(pods))


class Group(NamedTuple):
    """The pods that start together with a pod: an id (keys the group's size), its kind, a name."""

    id: str
    kind: str
    name: str


def gang_group(pod: Mapping[str, Any]) -> Optional[Group]:
    """The group a pod starts with: its PodGroup (scheduler-plugins' label), its LeaderWorkerSet
    group (leader and workers), its JobSet's replicated job (every Job of it), else the Job that
    owns it; None for a pod that starts alone."""
    namespace = pod["metadata"]["namespace"]
    labels = pod["metadata"].get("labels") or {}
    if labels.get(C.LABEL_POD_GROUP):
        name = labels[C.LABEL_POD_GROUP]
        return Group("PodGroup/%s/%s" % (namespace, name), "PodGroup", name)
    if labels.get(C.LABEL_LWS_GROUP_KEY):
        return Group("LeaderWorkerSet/%s/%s" % (namespace, labels[C.LABEL_LWS_GROUP_KEY]), "LeaderWorkerSet",
                     "%s/%s" % (labels.get(C.LABEL_LWS_NAME, ""), labels.get(C.LABEL_LWS_GROUP_INDEX, "")))
    if labels.get(C.LABEL_JOBSET_NAME) and labels.get(C.LABEL_JOBSET_REPLICATED_JOB):
        name = "%s/%s" % (labels[C.LABEL_JOBSET_NAME], labels[C.LABEL_JOBSET_REPLICATED_JOB])
        return Group("JobSet/%s/%s/%s" % (namespace, name, labels.get(C.LABEL_JOBSET_RESTART, "0")), "JobSet", name)
    owner = controller_owner(pod)
    if owner is not None and owner.get("kind") == "Job" and owner.get("uid"):
        return Group("Job/%s" % owner["uid"], "Job", owner.get("name") or "")
    return None


def gangs_of(waiting: Sequence[Mapping[str, Any]], sizes: Mapping[str, int],
             unknown: Mapping[str, str]) -> Tuple[List[Tuple[str, List[Mapping[str, Any]], int]], List[Hold]]:
    """(name, pods, wanted size) of each gang of the unbound pods: a group's pods (gang_group) in
    creation order, SIZES[its id] at a time (what must start together, less its pods already
    placed); any other pod alone. A group whose size is not known holds its pods (never one alone),
    saying why (UNKNOWN, by group id); a Job's pods without their Job (orphans) go alone."""
    grouped: Dict[str, List[Mapping[str, Any]]] = {}
    out: List[Tuple[str, List[Mapping[str, Any]], int]] = []
    holds: List[Hold] = []
    for pod in sorted(waiting, key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"])):
        group = gang_group(pod)
        if group is not None and group.id in sizes:
            grouped.setdefault(group.id, []).append(pod)
        elif group is not None and group.kind != "Job":
            holds.append(Hold(pod["metadata"]["namespace"], pod["metadata"]["name"], "BridgeGangUnknown",
                              unknown.get(group.id) or "its %s %s cannot be read: how many pods start together "
                              "is unknown" % (group.kind, group.name)))
        else:
            out.append((pod_key(pod), [pod], 1))
    for group_id, pods in grouped.items():
        size = max(1, sizes[group_id])
        name = "%s/%s" % (pods[0]["metadata"]["namespace"], (gang_group(pods[0]) or Group("", "", "")).name)
        for start in range(0, len(pods), size):
            out.append((name, pods[start:start + size], size))
    return out, holds


def slots(job: ExternalJob, cpus_per_task: int, hosts: Mapping[str, str]) -> List[Tuple[str, str]]:
    """(Slurm node, Kubernetes node) for each task of a running job: one on each node Slurm gave
    it first (an exclusive job gets whole nodes, more CPUs than its tasks use, and no node is given
    for nothing), then as many more as each node's CPUs hold."""
    per_node = [(node, max(1, cpus // max(1, cpus_per_task))) for node, cpus in job.allocation]
    firsts = [node for node, _count in per_node]
    order = firsts + [node for node, count in per_node for _more in range(count - 1)]
    return [(node, hosts.get(node, "")) for node in order]


def lost_host(pod: Mapping[str, Any], lost_for: Mapping[str, float], bridge: Bridge) -> Optional[str]:
    """The pod's Kubernetes node when it has not reported for the bridge's lost-node timeout."""
    host = pod["spec"].get("nodeName")
    timeout = bridge.lost_node_timeout_seconds
    return host if timeout and host in lost_for and lost_for[host] >= timeout and not is_gone(pod) else None


def plan_bridge(pods: Sequence[Mapping[str, Any]], sizes: Mapping[str, int], jobs: Sequence[ExternalJob],
                hosts: Mapping[str, str], bridge: Bridge, lost_for: Optional[Mapping[str, float]] = None,
                unknown: Optional[Mapping[str, str]] = None) -> BridgePlan:
    """The next actions for one cluster's bridged pods.

    PODS: the pods that name the bridge's scheduler in the cluster's bridge namespaces. SIZES: by
    gang_group id, how many of a group's pods start together now; UNKNOWN: why a group has no size.
    JOBS: the bridge's Slurm jobs. HOSTS: the Kubernetes node of each Slurm node's pod. LOST_FOR: for
    each Kubernetes node that does not report Ready, for how many seconds.
    """
    plan = BridgePlan()
    by_id = {j.job_id: j for j in jobs}
    latest_by_gang = {j.gang: j for j in sorted(jobs, key=lambda j: j.job_id)}
    held_by: Dict[int, int] = {}  # job id -> its pods still holding resources
    finished: Dict[int, List[Mapping[str, Any]]] = {}  # job id -> its pods that ran to their end
    lost_jobs: Dict[int, str] = {}  # job id -> why it is cancelled
    waiting = []
    for pod in pods:
        job_id = job_label(pod)
        if job_id is None:
            if not pod_terminating(pod) and not is_gone(pod) and not pod["spec"].get("nodeName"):
                waiting.append(pod)
            continue
        host = lost_host(pod, lost_for or {}, bridge)
        if host is not None:
            why = "Kubernetes node %s of pod %s has not reported for %d s or more " \
                "(spec.bridge.lostNodeTimeoutSeconds)" % (host, pod_key(pod), bridge.lost_node_timeout_seconds)
            plan.forced.append(EndPod(pod["metadata"]["namespace"], pod["metadata"]["name"], job_id, why))
            lost_jobs.setdefault(job_id, why)
            continue
        if not is_gone(pod):
            held_by[job_id] = held_by.get(job_id, 0) + 1
        elif not ended_by_deletion(pod):
            finished.setdefault(job_id, []).append(pod)
        plan_labelled(plan, pod, by_id.get(job_id), hosts)
    claimed = set()
    gangs, plan.holds = gangs_of(waiting, sizes, unknown or {})
    for name, gang, size in gangs:
        claimed.add(plan_gang(plan, name, gang, size, latest_by_gang, hosts, bridge))
    for job in jobs:
        if job.ended:
            continue
        if job.job_id in lost_jobs:
            plan.cancels.append(Cancel(job.job_id, lost_jobs[job.job_id]))
        elif job.gang not in claimed and not held_by.get(job.job_id):
            plan_job_end(plan, job, finished.get(job.job_id, []))
    if plan.frees:
        ending = {c.job_id for c in plan.cancels} | {c.job_id for c in plan.completes}
        plan.nudge = next((j for j in jobs if j.state == "PENDING" and j.job_id not in ending), None)
    return plan


def plan_job_end(plan: BridgePlan, job: ExternalJob, finished: Sequence[Mapping[str, Any]]) -> None:
    """A job none of whose pods holds anything: completed with its pods' exit code when it ran and
    they ran to their end, else cancelled (its pods were deleted, or it never started)."""
    if job.running and finished:
        code = gang_exit_code(finished)
        outcome = "succeeded" if code == 0 else "failed"
        plan.completes.append(Complete(job.job_id, code, "its pods %s (%s)" % (
            outcome, ", ".join(sorted(pod_key(p) for p in finished)))))
    else:
        plan.cancels.append(Cancel(job.job_id, "none of its pods is left"))


def plan_labelled(plan: BridgePlan, pod: Mapping[str, Any], job: Optional[ExternalJob],
                  hosts: Mapping[str, str]) -> None:
    """A pod given a job: bound if its binding was cut short; ended when its job ended, or when
    Slurm took back the place it was given (the job requeued, as the operator does with the jobs of
    a drained node past its drain timeout, or Slurm with those of a node that failed): the pod must
    not run on where Slurm now counts nothing, nor wait for a place it will not be told of."""
    meta = pod["metadata"]
    if job is None or is_gone(pod) or pod_terminating(pod):
        return  # a job Slurm no longer lists is not proof that it ended: leave the pod be
    node = (meta.get("annotations") or {}).get(C.ANNOTATION_SLURM_NODE, "")
    if job.ended:
        plan.ends.append(EndPod(meta["namespace"], meta["name"], job.job_id,
                                "its Slurm job %d ended (%s)" % (job.job_id, job.state)))
    elif job.state == "PENDING" or (job.running and node not in job.nodes):
        plan.ends.append(EndPod(meta["namespace"], meta["name"], job.job_id,
                                "its Slurm job %d was requeued: Slurm no longer holds its place on %s"
                                % (job.job_id, node or "its node")))
    elif job.running and not pod["spec"].get("nodeName") and hosts.get(node):
        plan.binds.append(Bind(meta["namespace"], meta["name"], job.job_id, node, hosts[node]))


def plan_gang(plan: BridgePlan, name: str, gang: List[Mapping[str, Any]], size: int,
              latest_by_gang: Mapping[str, ExternalJob], hosts: Mapping[str, str], bridge: Bridge) -> str:
    """Submit a complete gang's job, bind its pods once the job runs, end them when the job ended
    before they started (scancel of a pending job); the gang's key."""
    key = gang_key(gang)
    problems = sorted({field for pod in gang for field in unsupported(pod)})
    if problems:
        for pod in gang:
            plan.holds.append(Hold(pod["metadata"]["namespace"], pod["metadata"]["name"], "BridgeUnsupported",
                                   "Slurm places this pod; it cannot honour %s: remove them, or run the pod "
                                   "outside the bridge's namespaces" % ", ".join(problems)))
        return key
    invalid = sorted({value for pod in gang for value in bad_annotations(pod)})
    if invalid:
        for pod in gang:
            plan.holds.append(Hold(pod["metadata"]["namespace"], pod["metadata"]["name"], "BridgeInvalid",
                                   "annotations Slurm cannot take: %s" % ", ".join(invalid)))
        return key
    forbidden = sorted({account for pod in gang for account in forbidden_accounts(pod, bridge)})
    if forbidden:
        for pod in gang:
            namespace = pod["metadata"]["namespace"]
            plan.holds.append(Hold(namespace, pod["metadata"]["name"], "BridgeForbidden",
                                   "%s=%s: the pods of namespace %s may name %s (spec.bridge.accounts)"
                                   % (C.ANNOTATION_BRIDGE_ACCOUNT, ", ".join(forbidden), namespace,
                                      ", ".join(allowed_accounts(bridge, namespace)) or "no account")))
        return key
    job = latest_by_gang.get(key)
    if job is not None and job.ended:
        for pod in gang:
            plan.ends.append(EndPod(pod["metadata"]["namespace"], pod["metadata"]["name"], job.job_id,
                                    "its Slurm job %d ended before it started (%s)" % (job.job_id, job.state)))
        return key
    if job is None:
        if len(gang) >= size:
            request = job_request(gang, name, bridge)
            plan.submits.append(Submit(request, tuple(pod_key(p) for p in gang)))
        return key
    if job.state == "PENDING" and job.reason:
        plan.waits.append(Wait(tuple(pod_key(p) for p in gang), job.job_id, job.reason))
    if job.running and not job.allocation:
        plan.details.append(job.job_id)
    elif job.running:
        cpus = job_request(gang, name, bridge).cpus_per_task
        places = slots(job, cpus, hosts)
        for pod, (node, host) in zip(sorted(gang, key=lambda p: p["metadata"]["name"]), places):
            if host:
                plan.binds.append(Bind(pod["metadata"]["namespace"], pod["metadata"]["name"], job.job_id, node, host))
    return key
