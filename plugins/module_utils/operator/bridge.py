# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bridge's cycle for one cluster: read the bridged pods, their Jobs, the worker pods, the
Kubernetes nodes (when a pod is bound) and Slurm's bridge jobs (one squeue, a line per job; a second,
in detail, only for the jobs whose pods are to be bound), plan (plan_bridge.py), then act: submit,
label and bind, cancel, end pods (by force on a lost node), and say each action as an Event. The
binds, pod deletions and Events of a cycle go to the API server side by side, as kube-scheduler binds
pods in goroutines: one after the other, a cycle binding 68 of 100 pods took 28 s on a loaded kind
cluster (the operator's log in tests/k8s/test_bridge_bench.py), every pod behind it waiting.

State kept between cycles (in memory: a restarted operator rebuilds it from Kubernetes and
Slurm) is only what keeps it quiet and cheap: the backoff of gangs Slurm refused, the holds
already said, and whether the last cycle saw any bridged pod (without one now or then, Slurm is
not asked at all).
"""

from __future__ import annotations

import contextlib
import datetime
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Set,
    Tuple,
    TypeVar,
    Union,
)

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube, KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import (
    host_lost_since,
    parse_time,
    pod_terminating,
    pods_by_name,
    utc_now,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.bridge import Bridge
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.operator import telemetry
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_bridge import (
    Bind,
    BridgePlan,
    Complete,
    EndPod,
    Group,
    Hold,
    Submit,
    controller_owner,
    gang_group,
    is_gone,
    job_label,
    plan_bridge,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmError
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.external import ExternalJob, ExternalJobs
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.runner import controller_control

# A gang Slurm refused (no such account, larger than any node) is tried again after this long,
# doubled on each refusal up to the cap.
BACKOFF_FIRST_SECONDS = 15.0
BACKOFF_MAX_SECONDS = 300.0
SOURCE = C.OPERATOR_NAME
# How many of a cycle's binds, pod deletions and Events are asked of the API server at once.
API_WORKERS = 8
Item = TypeVar("Item")
Result = TypeVar("Result")


def side_by_side(call: Callable[[Item], Result], items: Sequence[Item]) -> List[Union[Result, KubeError]]:
    """CALL's result for each item, in their order, API_WORKERS calls at once; an item whose call
    the API server refused has the KubeError as its result."""
    def caught(item: Item) -> Union[Result, KubeError]:
        try:
            return call(item)
        except KubeError as exc:
            return exc

    with ThreadPoolExecutor(API_WORKERS) as pool:
        return list(pool.map(caught, items))


@dataclass
class BridgeMemory:
    """What one cluster's cycles remember."""

    backoff: Dict[str, Tuple[float, float]] = field(default_factory=dict)  # gang -> (retry at, delay)
    said: Set[Tuple[str, str]] = field(default_factory=set)  # (pod uid, hold or pending reason)
    had_pods: bool = True  # the first cycle after a start always asks Slurm


@dataclass
class CycleReport:
    """What a cycle did, for the operator's log and metrics."""

    submitted: int = 0
    bound: int = 0
    cancelled: int = 0
    completed: int = 0
    ended: int = 0
    slurm_calls: int = 0
    api_calls: int = 0
    seconds: float = 0.0  # the whole cycle's
    slurm_seconds: float = 0.0  # its calls into the controller pod's
    queue: Dict[str, int] = field(default_factory=lambda: dict.fromkeys(telemetry.BRIDGE_POD_STATES, 0))
    bind_seconds: List[float] = field(default_factory=list)  # each bound pod's wait since its creation

    @property
    def acted(self) -> bool:
        return bool(self.submitted or self.bound or self.cancelled or self.completed or self.ended)

    def summary(self) -> str:
        return ("%d job(s) submitted, %d pod(s) bound, %d job(s) cancelled, %d job(s) completed, %d pod(s) ended "
                "in %.1f s (%.1f s of them in %d Slurm call(s), %d API call(s))"
                % (self.submitted, self.bound, self.cancelled, self.completed, self.ended, self.seconds,
                   self.slurm_seconds, self.slurm_calls, self.api_calls))


class Said(NamedTuple):
    """An Event a cycle posts; SAID, a hold or wait said once per pod (BridgeMemory.said)."""

    obj: Mapping[str, Any]
    kind: str
    reason: str
    message: str
    said: Optional[Tuple[str, str]]


def bridged_pods(kube: Kube, namespaces: Sequence[str]) -> List[Dict[str, Any]]:
    """The pods of the bridge's namespaces that name its scheduler (one list per namespace)."""
    return [dict(pod, apiVersion="v1", kind="Pod") for ns in namespaces
            for pod in kube.list("v1", "Pod", ns, fields={"spec.schedulerName": C.BRIDGE_SCHEDULER_NAME})]


def worker_hosts(kube: Kube, cluster: str, namespace: str) -> Dict[str, str]:
    """The Kubernetes node of each worker pod, by its Slurm node name (the pod's name)."""
    pods = pods_by_name(kube, namespace, names.selector_labels(cluster, C.COMPONENT_WORKER))
    return {p["metadata"]["name"]: p["spec"].get("nodeName") or "" for p in pods if not pod_terminating(p)}


def wanted_now(job: Mapping[str, Any], running: int) -> int:
    """How many of a Job's pods start together now: its parallelism, no more than the completions
    it still needs, less its pods already placed."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    size = int(spec.get("parallelism") if spec.get("parallelism") is not None else 1)
    if spec.get("completions") is not None:
        size = min(size, int(spec["completions"]) - int(status.get("succeeded") or 0))
    return max(1, size - running)


def group_size(kube: Kube, group: Group, pod: Mapping[str, Any], placed: int) -> Tuple[Optional[int], str]:
    """How many of a group's pods start together now (POD: one of its unplaced pods); None, and
    why when the group cannot be placed whole, when that cannot be known."""
    namespace = pod["metadata"]["namespace"]
    if group.kind == "PodGroup":
        found = kube.get(C.POD_GROUP_API, "PodGroup", group.name, namespace) \
            if kube.serves(C.POD_GROUP_API, "PodGroup") else None
        return (max(1, int((found.get("spec") or {}).get("minMember") or 1) - placed) if found else None), ""
    if group.kind == "LeaderWorkerSet":
        return lws_group_size(kube, pod, placed)
    owner = controller_owner(pod) or {}
    job = kube.get("batch/v1", "Job", owner.get("name") or "", namespace) if owner.get("kind") == "Job" else None
    if job is None or job["metadata"].get("uid") != owner.get("uid"):
        return None, ""
    if group.kind == "JobSet":  # every Job of the replicated job, each its parallel pods
        replicas = int((pod["metadata"].get("labels") or {}).get(C.LABEL_JOBSET_REPLICAS) or 1)
        return max(1, replicas * wanted_now(job, 0) - placed), ""
    return wanted_now(job, placed), ""


def lws_group_size(kube: Kube, pod: Mapping[str, Any], placed: int) -> Tuple[Optional[int], str]:
    """A LeaderWorkerSet group's size (its pods' annotation), unless its workers are made only
    once the leader is Ready: then the group can never be complete while it waits."""
    meta = pod["metadata"]
    size = (meta.get("annotations") or {}).get(C.ANNOTATION_LWS_SIZE, "")
    if not size.isdigit():
        return None, ""
    name = (meta.get("labels") or {}).get(C.LABEL_LWS_NAME, "")
    found = kube.get(C.LWS_API, "LeaderWorkerSet", name, meta["namespace"]) \
        if name and kube.serves(C.LWS_API, "LeaderWorkerSet") else None
    if ((found or {}).get("spec") or {}).get("startupPolicy") == "LeaderReady":
        return None, ("LeaderWorkerSet %s makes its workers only once its leader is Ready (startupPolicy "
                      "LeaderReady): Slurm places a group whole, so it would never start; use LeaderCreated" % name)
    return max(1, int(size) - placed), ""


def gang_sizes(kube: Kube, pods: Sequence[Mapping[str, Any]]) -> Tuple[Dict[str, int], Dict[str, str]]:
    """group_size of the groups (gang_group) with unplaced pods, by group id (a read or two per
    group), and why a group has none when that is known."""
    placed: Dict[str, int] = {}
    groups: Dict[str, Tuple[Group, Mapping[str, Any]]] = {}
    for pod in pods:
        group = gang_group(pod)
        if group is None:
            continue
        if job_label(pod) is not None:
            if not is_gone(pod):
                placed[group.id] = placed.get(group.id, 0) + 1
        else:
            groups.setdefault(group.id, (group, pod))
    sizes, unknown = {}, {}
    for group_id, (group, pod) in groups.items():
        size, why = group_size(kube, group, pod, placed.get(group_id, 0))
        if size is not None:
            sizes[group_id] = size
        elif why:
            unknown[group_id] = why
    return sizes, unknown


def bridge_queue(pods: Sequence[Mapping[str, Any]], holds: Sequence[Hold]) -> Dict[str, int]:
    """How many of the pods wait for Slurm, are held by the bridge, are bound (telemetry's states)."""
    held = {(hold.namespace, hold.pod) for hold in holds}
    queue = dict.fromkeys(telemetry.BRIDGE_POD_STATES, 0)
    for pod in pods:
        meta = pod["metadata"]
        if is_gone(pod) or pod_terminating(pod):
            continue
        state = "bound" if pod["spec"].get("nodeName") else "held" if (meta["namespace"], meta["name"]) in held \
            else "pending"
        queue[state] += 1
    return queue


class BridgeCycle:
    """One cluster's cycle; the caller gives it the cluster's ExternalJobs when there is a
    serving controller."""

    def __init__(self, kube: Kube, memory: BridgeMemory, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime.datetime] = utc_now) -> None:
        self.kube = kube
        self.memory = memory
        self.clock = clock
        self.wall = wall  # what the nodes' condition times are compared with
        self.report = CycleReport()
        self.events: List[Said] = []

    def run(self, cluster: Mapping[str, Any], bridge: Bridge,
            slurm: Callable[[], Optional[ExternalJobs]]) -> CycleReport:
        """The cycle (cycle), timed."""
        started = self.clock()
        try:
            return self.cycle(cluster, bridge, slurm)
        finally:
            self.report.seconds = self.clock() - started

    def cycle(self, cluster: Mapping[str, Any], bridge: Bridge,
              slurm: Callable[[], Optional[ExternalJobs]]) -> CycleReport:
        meta = cluster["metadata"]
        pods = bridged_pods(self.kube, bridge.namespaces)
        self.report.api_calls += len(bridge.namespaces)
        if not pods and not self.memory.had_pods:
            return self.report
        present = {p["metadata"]["uid"] for p in pods}
        self.memory.said = {said for said in self.memory.said if said[0] in present}  # gone pods are forgotten
        jobs_client = slurm()
        if jobs_client is None:
            return self.report  # no serving controller: nothing is decided without Slurm's word
        with self.asking_slurm():
            jobs = jobs_client.listed()
        hosts = worker_hosts(self.kube, meta["name"], meta["namespace"])
        sizes, unknown = gang_sizes(self.kube, pods)
        self.report.api_calls += 1 + len(sizes) + len(unknown)
        lost = self.lost_hosts(pods)
        plan = plan_bridge(pods, sizes, jobs, hosts, bridge, lost, unknown)
        if plan.details:  # jobs that just started: their CPUs per node say where each pod goes
            with self.asking_slurm():
                detailed = {job.job_id: job for job in jobs_client.detailed(plan.details)}
            jobs = [detailed.get(job.job_id, job) for job in jobs]
            plan = plan_bridge(pods, sizes, jobs, hosts, bridge, lost, unknown)
        self.report.queue = bridge_queue(pods, plan.holds)
        try:
            self.act(cluster, plan, {"%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"]): p
                                     for p in pods}, jobs_client)
        finally:  # what was done is said, also when a later step failed
            unsaid = self.say_all()
        if unsaid is not None:
            raise unsaid
        self.memory.had_pods = bool(pods)
        return self.report

    @contextlib.contextmanager
    def asking_slurm(self) -> Iterator[None]:
        """A call into the controller pod, counted and timed in the cycle's report."""
        started = self.clock()
        try:
            yield
        finally:
            self.report.slurm_calls += 1
            self.report.slurm_seconds += self.clock() - started

    def lost_hosts(self, pods: Sequence[Mapping[str, Any]]) -> Dict[str, float]:
        """For each Kubernetes node under a bridged pod that does not report Ready, for how many
        seconds (the nodes are read only when a pod is bound)."""
        if not any(p["spec"].get("nodeName") and not is_gone(p) for p in pods):
            return {}
        now = self.wall()
        self.report.api_calls += 1
        lost = ((node["metadata"]["name"], host_lost_since(node)) for node in self.kube.list("v1", "Node"))
        return {name: (now - since).total_seconds() for name, since in lost if since is not None}

    def act(self, cluster: Mapping[str, Any], plan: BridgePlan, pods: Mapping[str, Mapping[str, Any]],
            jobs: ExternalJobs) -> None:
        for hold in plan.holds:
            self.say_once(pods["%s/%s" % (hold.namespace, hold.pod)], "Warning", hold.reason, hold.message)
        for wait in plan.waits:
            message = "Slurm job %d waits: %s" % (wait.job_id, wait.reason)
            if wait.never_as_asked:
                message += " (it will not run as asked: change the pod's request or annotations)"
            for key in wait.pods:
                self.say_once(pods[key], "Warning" if wait.never_as_asked else "Normal", "SlurmJobPending", message,
                              wait.reason)
        waiting = {submit.request.gang for submit in plan.submits}
        self.memory.backoff = {gang: when for gang, when in self.memory.backoff.items() if gang in waiting}
        self.submit(plan.submits, pods, jobs)
        self.bind(plan.binds, pods)
        if plan.cancels:
            with self.asking_slurm():
                jobs.cancel([c.job_id for c in plan.cancels])
            self.report.cancelled += len(plan.cancels)
            for cancel in plan.cancels:
                self.event(cluster, "Normal", "BridgeJobCancelled",
                           "cancelled Slurm job %d: %s" % (cancel.job_id, cancel.why))
        self.complete(cluster, plan.completes, jobs)
        if plan.nudge is not None:
            self.nudge(plan.nudge, jobs)
        self.end(plan.ends, plan.forced, pods)

    def end(self, ends: Sequence[EndPod], forced: Sequence[EndPod], pods: Mapping[str, Mapping[str, Any]]) -> None:
        """Delete the pods of ended jobs, and by force those on lost nodes, side by side; the first
        deletion the API server refused is raised once every pod was tried and said."""
        def deleted(end_force: Tuple[EndPod, bool]) -> bool:
            end, force = end_force
            return self.kube.delete("v1", "Pod", end.pod, end.namespace, grace_period_seconds=0 if force else None)

        todo = [(end, False) for end in ends] + [(end, True) for end in forced]
        outcomes = side_by_side(deleted, todo)
        self.report.api_calls += len(todo)
        for (end, force), outcome in zip(todo, outcomes):
            if outcome is not True:
                continue
            self.report.ended += 1
            pod = pods["%s/%s" % (end.namespace, end.pod)]
            if force:
                self.event(pod, "Warning", "BridgeNodeLost", "deleted by force, without its kubelet's word: %s"
                           % end.why)
            else:
                self.event(pod, "Normal", "SlurmJobEnded", "deleted: %s" % end.why)
        refused = [outcome for outcome in outcomes if isinstance(outcome, KubeError)]
        if refused:
            raise refused[0]

    def complete(self, cluster: Mapping[str, Any], completes: Sequence[Complete], jobs: ExternalJobs) -> None:
        """End jobs as their pods ended (one Slurm call); those Slurm refuses (an image without the
        tool, a job that ended meanwhile) are cancelled: none may hold its nodes for want of an
        exit code."""
        if not completes:
            return
        with self.asking_slurm():
            outcomes = jobs.complete([(done.job_id, done.exit_code) for done in completes])
        refused = []
        for done, error in zip(completes, outcomes):
            if error is not None:
                refused.append((done, error))
                continue
            self.report.completed += 1
            self.event(cluster, "Normal", "BridgeJobCompleted", "completed Slurm job %d with exit code %d: %s"
                       % (done.job_id, done.exit_code, done.why))
        if refused:
            with self.asking_slurm():
                jobs.cancel([done.job_id for done, _error in refused])
            self.report.cancelled += len(refused)
        for done, error in refused:
            self.event(cluster, "Warning", "BridgeJobCancelled", "cancelled Slurm job %d, %s: Slurm did not "
                       "take its exit code %d: %s" % (done.job_id, done.why, done.exit_code, error))

    def nudge(self, waiting: ExternalJob, jobs: ExternalJobs) -> None:
        """What the cycle's ended jobs held goes to the waiting jobs now, not at Slurm's next
        periodic pass; a job that ended meanwhile is no reason to fail the cycle."""
        with contextlib.suppress(SlurmError), self.asking_slurm():
            jobs.nudge(waiting)

    def submit(self, submits: Sequence[Submit], pods: Mapping[str, Mapping[str, Any]], jobs: ExternalJobs) -> None:
        """Submit the gangs not backing off (one Slurm call); a gang Slurm refuses backs off,
        doubling its delay each time, and its pods are told why."""
        now = self.clock()
        due = [s for s in submits if now >= self.memory.backoff.get(s.request.gang, (0.0, 0.0))[0]]
        if not due:
            return
        with self.asking_slurm():
            outcomes = jobs.submit([s.request for s in due])
        for submit, outcome in zip(due, outcomes):
            gang = [pods[p] for p in submit.pods]
            if isinstance(outcome, SlurmError):
                delay = self.memory.backoff.get(submit.request.gang, (0.0, 0.0))[1]
                delay = min(BACKOFF_MAX_SECONDS, delay * 2 if delay else BACKOFF_FIRST_SECONDS)
                self.memory.backoff[submit.request.gang] = (now + delay, delay)
                for pod in gang:
                    self.event(pod, "Warning", "SlurmRefused", "%s (tried again in %d s)" % (outcome, delay))
                continue
            self.memory.backoff.pop(submit.request.gang, None)
            self.report.submitted += 1
            request = submit.request
            for pod in gang:
                self.event(pod, "Normal", "SlurmJobSubmitted",
                           "Slurm job %d (%s: %d task(s) of %d CPU(s)) waits for Slurm to place it"
                           % (outcome, request.name, request.tasks, request.cpus_per_task))

    def bind(self, binds: Sequence[Bind], pods: Mapping[str, Mapping[str, Any]]) -> None:
        """Label and bind each pod (placed), the pods side by side; a pod that could not be is told
        why, and the next cycle tries again."""
        errors = side_by_side(lambda bind: self.placed(pods["%s/%s" % (bind.namespace, bind.pod)], bind), binds)
        self.report.api_calls += 2 * len(binds)
        for bind, error in zip(binds, errors):
            pod = pods["%s/%s" % (bind.namespace, bind.pod)]
            if error is not None:
                self.event(pod, "Warning", "FailedBinding", str(error))
                continue
            self.report.bound += 1
            created = parse_time(pod["metadata"].get("creationTimestamp"))
            if created is not None:
                self.report.bind_seconds.append(max(0.0, (self.wall() - created).total_seconds()))
            self.event(pod, "Normal", "Scheduled", "Slurm job %d placed it on Slurm node %s (Kubernetes node %s)"
                       % (bind.job_id, bind.slurm_node, bind.host))

    def placed(self, pod: Mapping[str, Any], bind: Bind) -> None:
        """Label first, then bind: a restart between the two finds the pod labelled and binds it."""
        meta = pod["metadata"]
        self.kube.merge_patch("v1", "Pod", meta["name"], meta["namespace"], {"metadata": {
            "labels": {C.LABEL_SLURM_JOB: str(bind.job_id)},
            "annotations": {C.ANNOTATION_SLURM_NODE: bind.slurm_node}}})
        self.kube.bind(meta["namespace"], meta["name"], bind.host)

    def say_once(self, pod: Mapping[str, Any], kind: str, reason: str, message: str, detail: str = "") -> None:
        """An Event a pod gets once for the same reason (and detail) for as long as it exists."""
        said = (pod["metadata"]["uid"], reason + (":" + detail if detail else ""))
        if said not in self.memory.said:
            self.event(pod, kind, reason, message, said)

    def event(self, obj: Mapping[str, Any], kind: str, reason: str, message: str,
              said: Optional[Tuple[str, str]] = None) -> None:
        """An Event posted once the cycle has acted (say_all); SAID is remembered once it is posted."""
        self.report.api_calls += 1
        self.events.append(Said(obj, kind, reason, message, said))

    def say_all(self) -> Optional[KubeError]:
        """Post the cycle's Events, the objects side by side and each object's in order; the first
        that could not be posted, once all were tried (the operator logs it, as any API error of a
        cycle)."""
        by_object: Dict[Tuple[str, str, str], List[Said]] = {}
        for said in self.events:
            meta = said.obj["metadata"]
            by_object.setdefault((said.obj["kind"], meta.get("namespace") or "", meta["name"]), []).append(said)
        self.events = []
        failed = [error for errors in side_by_side(self.posted, list(by_object.values())) for error in errors]
        return failed[0] if failed else None

    def posted(self, events: Sequence[Said]) -> List[KubeError]:
        """Post EVENTS in order; what could not be posted."""
        failed = []
        for event in events:
            try:
                self.kube.post_event(event.obj, event.kind, event.reason, event.message, SOURCE)
            except KubeError as exc:
                failed.append(exc)
                continue
            if event.said is not None:
                self.memory.said.add(event.said)
        return failed


def bridge_cycle(kube: Kube, cluster: Mapping[str, Any], memories: Dict[str, BridgeMemory]) -> Optional[CycleReport]:
    """One cycle of a cluster whose spec names bridge namespaces; None for any other (and for a
    spec the reconcile pass reports as invalid). MEMORIES: each cluster's, by namespace/name."""
    meta = cluster["metadata"]
    key = "%s/%s" % (meta["namespace"], meta["name"])
    try:
        bridge = parse_cluster(cluster).spec.bridge
    except SpecError:
        return None
    if not bridge.namespaces:
        memories.pop(key, None)
        return None

    def slurm() -> Optional[ExternalJobs]:
        control = controller_control(kube, meta["name"], meta["namespace"])
        return ExternalJobs(control) if control is not None else None

    return BridgeCycle(kube, memories.setdefault(key, BridgeMemory())).run(cluster, bridge, slurm)
