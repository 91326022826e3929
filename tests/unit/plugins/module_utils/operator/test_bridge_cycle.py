"""The bridge's cycle acting on what it planned: labels before it binds (pods side by side), says each action as an
Event, backs off a gang Slurm refused, and asks Slurm nothing while no pod is bridged."""

from __future__ import annotations

import dataclasses
import datetime
import threading

from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.model.bridge import Bridge
from ansible_collections.slurmkube.core.plugins.module_utils.operator.bridge import BridgeCycle, BridgeMemory
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_bridge import gang_key
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmError
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.external import ExternalJob

CLUSTER = {"apiVersion": C.GROUP_VERSION, "kind": C.KIND_CLUSTER,
           "metadata": {"name": "demo", "namespace": "hpc", "uid": "c"}}
BRIDGE = Bridge(namespaces=["ml"])


class FakeSlurm:
    """Slurm's answers for one test: the jobs it lists (without their CPUs per node, as the
    one-line listing has them; in detail when asked by id), what a submission does."""

    def __init__(self, jobs=(), refuse=""):
        self.jobs, self.refuse, self.submitted, self.cancelled, self.lists = list(jobs), refuse, [], [], 0
        self.details, self.completed, self.refuse_completion, self.nudged, self.refuse_nudge = [], [], "", [], ""
        self.submissions = 0

    def listed(self):
        self.lists += 1
        return [dataclasses.replace(j, allocation=(), nodes=tuple(n for n, _cpus in j.allocation)) for j in self.jobs]

    def detailed(self, job_ids):
        self.details.append(list(job_ids))
        return [dataclasses.replace(j, nodes=tuple(n for n, _cpus in j.allocation))
                for j in self.jobs if j.job_id in job_ids]

    def submit(self, requests):
        self.submissions += 1
        if self.refuse:
            return [SlurmError(self.refuse) for _request in requests]
        self.submitted.extend(requests)
        return list(range(40 + len(self.submitted) - len(requests) + 1, 40 + len(self.submitted) + 1))

    def cancel(self, job_ids):
        self.cancelled.extend(job_ids)

    def nudge(self, job):
        self.nudged.append(job.job_id)
        if self.refuse_nudge:
            raise SlurmError(self.refuse_nudge)

    def complete(self, ends):
        if self.refuse_completion:
            return [SlurmError(self.refuse_completion) for _end in ends]
        self.completed.extend(ends)
        return [None for _end in ends]


def kube_with(*pods):
    kube = MemoryKube()
    worker = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "demo-cpu-0", "namespace": "hpc", "labels": names.selector_labels("demo", C.COMPONENT_WORKER)},
        "spec": {"nodeName": "kind-worker"}}
    for obj in (worker, *pods):
        kube.objects[("Pod", obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
    return kube


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml", "uid": "uid-" + name, "labels": {}, "annotations": {}},
            "spec": {"schedulerName": C.BRIDGE_SCHEDULER_NAME,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Pending"}}


def cycle(kube, slurm, memory, now=0.0):
    return BridgeCycle(kube, memory, clock=lambda: now).run(CLUSTER, BRIDGE, lambda: slurm)


def test_a_pod_is_submitted_then_labelled_and_bound_where_its_job_runs():
    kube, memory, slurm = kube_with(pod("p")), BridgeMemory(), FakeSlurm()
    assert cycle(kube, slurm, memory).submitted == 1
    assert kube.events[-1][:3] == ("ml/p", "Normal", "SlurmJobSubmitted")
    gang = slurm.submitted[0].gang
    slurm.jobs = [ExternalJob(41, gang, "RUNNING", "", (("demo-cpu-0", 1),))]
    assert cycle(kube, slurm, memory).bound == 1
    assert slurm.details == [[41]]  # its CPUs per node read by id, once it ran
    bound = kube.get("v1", "Pod", "p", "ml")
    assert bound["spec"]["nodeName"] == "kind-worker"
    assert bound["metadata"]["labels"][C.LABEL_SLURM_JOB] == "41"
    assert bound["metadata"]["annotations"][C.ANNOTATION_SLURM_NODE] == "demo-cpu-0"
    assert kube.events[-1][2] == "Scheduled" and "Slurm job 41" in kube.events[-1][3]


def running_jobs(slurm):
    return [ExternalJob(41 + i, request.gang, "RUNNING", "", (("demo-cpu-0", 1),))
            for i, request in enumerate(slurm.submitted)]


class SideBySideKube(MemoryKube):
    """A kube whose binds each wait until FOUR are in flight: binds made one after the other never
    get there (the barrier breaks after 10 s and the bind fails)."""

    def __init__(self, four):
        super().__init__()
        self.barrier = threading.Barrier(four, timeout=10)

    def bind(self, namespace, pod, node):
        self.barrier.wait()
        super().bind(namespace, pod, node)


def test_a_cycles_binds_are_asked_side_by_side():
    kube, memory, slurm = SideBySideKube(4), BridgeMemory(), FakeSlurm()
    kube.objects.update(kube_with(*(pod("p%d" % i) for i in range(4))).objects)
    cycle(kube, slurm, memory)
    slurm.jobs = running_jobs(slurm)
    assert cycle(kube, slurm, memory).bound == 4
    assert not [e for e in kube.events if e[2] == "FailedBinding"]


class RefusingKube(MemoryKube):
    """A kube that refuses to bind, or to delete, the pods it is told to (by name), and to post the
    Events it is told to (by reason)."""

    def __init__(self, pods=(), reasons=(), deletes=()):
        super().__init__()
        self.refused_pods, self.refused_reasons, self.refused_deletes = set(pods), set(reasons), set(deletes)

    def delete(self, api_version, kind, name, namespace=None, propagation="Background", grace_period_seconds=None):
        if name in self.refused_deletes:
            raise KubeError("cannot delete %s %s/%s: the server timed out" % (kind, namespace, name))
        return super().delete(api_version, kind, name, namespace, propagation, grace_period_seconds)

    def bind(self, namespace, pod, node):
        if pod in self.refused_pods:
            raise KubeError("cannot bind pod %s/%s to node %s: node not found" % (namespace, pod, node))
        super().bind(namespace, pod, node)

    def post_event(self, obj, kind, reason, message, source):
        if reason in self.refused_reasons:
            raise KubeError("cannot post event %s: etcdserver: request timed out" % reason)
        super().post_event(obj, kind, reason, message, source)


def test_a_pod_that_cannot_be_bound_is_told_why_and_the_others_are_bound():
    kube, memory, slurm = RefusingKube(pods=["b"]), BridgeMemory(), FakeSlurm()
    kube.objects.update(kube_with(pod("a"), pod("b"), pod("c")).objects)
    cycle(kube, slurm, memory)
    slurm.jobs = running_jobs(slurm)
    assert cycle(kube, slurm, memory).bound == 2
    (failed,) = [e for e in kube.events if e[2] == "FailedBinding"]
    assert failed[0] == "ml/b" and "node not found" in failed[3]
    assert not kube.get("v1", "Pod", "b", "ml")["spec"].get("nodeName")
    kube.refused_pods.clear()
    assert cycle(kube, slurm, memory).bound == 1  # labelled already: bound by the next cycle


def test_an_event_the_api_server_did_not_take_fails_the_cycle_after_the_others_and_a_hold_is_said_again():
    held = pod("q")
    held["spec"] = dict(held["spec"], nodeSelector={"disk": "ssd"})
    kube, memory, slurm = RefusingKube(reasons=["BridgeUnsupported"]), BridgeMemory(), FakeSlurm()
    kube.objects.update(kube_with(pod("p"), held).objects)
    try:
        cycle(kube, slurm, memory)
    except KubeError as exc:
        assert "BridgeUnsupported" in str(exc)
    else:
        raise AssertionError("the cycle did not say the Event it could not post")
    assert [e[:3] for e in kube.events] == [("ml/p", "Normal", "SlurmJobSubmitted")]
    kube.refused_reasons.clear()
    cycle(kube, slurm, memory)
    cycle(kube, slurm, memory)
    assert [e[2] for e in kube.events if e[0] == "ml/q"] == ["BridgeUnsupported"]  # said once it could be


def test_the_pods_of_a_cycle_are_submitted_by_one_slurm_call_each_told_its_job():
    kube, slurm = kube_with(pod("a"), pod("b"), pod("c")), FakeSlurm()
    report = cycle(kube, slurm, BridgeMemory())
    assert (report.submitted, slurm.submissions, report.slurm_calls) == (3, 1, 2)  # the listing, the submission
    told = sorted((e[0], e[3].split(" (")[0]) for e in kube.events if e[2] == "SlurmJobSubmitted")
    assert told == [("ml/a", "Slurm job 41"), ("ml/b", "Slurm job 42"), ("ml/c", "Slurm job 43")]


class SlowSlurm(FakeSlurm):
    """Slurm whose listing takes 2 s and whose submissions take 3 s, on the clock it is given."""

    def __init__(self, clock):
        super().__init__()
        self.clock = clock

    def listed(self):
        self.clock[0] += 2.0
        return super().listed()

    def submit(self, requests):
        self.clock[0] += 3.0
        return super().submit(requests)


def test_a_cycle_says_how_long_it_took_and_how_much_of_it_went_to_slurm():
    clock = [100.0]
    kube = kube_with(pod("a"), pod("b"))
    report = BridgeCycle(kube, BridgeMemory(), clock=lambda: clock[0]).run(CLUSTER, BRIDGE,
                                                                           lambda: SlowSlurm(clock))
    assert (report.seconds, report.slurm_seconds, report.slurm_calls) == (5.0, 5.0, 2)
    assert report.summary().startswith("2 job(s) submitted, 0 pod(s) bound")
    assert report.summary().endswith("in 5.0 s (5.0 s of them in 2 Slurm call(s), %d API call(s))"
                                     % report.api_calls)


def test_a_refused_gang_is_said_once_and_tried_again_only_after_its_backoff():
    kube, memory = kube_with(pod("p")), BridgeMemory()
    slurm = FakeSlurm(refuse="sbatch failed: Invalid account")
    cycle(kube, slurm, memory, now=0.0)
    cycle(kube, slurm, memory, now=5.0)
    refusals = [e for e in kube.events if e[2] == "SlurmRefused"]
    assert len(refusals) == 1 and "Invalid account" in refusals[0][3]
    cycle(kube, slurm, memory, now=16.0)
    assert len([e for e in kube.events if e[2] == "SlurmRefused"]) == 2


def test_without_bridged_pods_now_or_before_slurm_is_not_asked():
    kube, memory, slurm = kube_with(), BridgeMemory(), FakeSlurm()
    cycle(kube, slurm, memory)  # the first cycle after a start asks (jobs of pods deleted meanwhile)
    cycle(kube, slurm, memory)
    assert slurm.lists == 1


def test_a_pod_whose_job_ended_is_deleted_with_an_event():
    running = dict(pod("p"), status={"phase": "Running"})
    running["metadata"]["labels"] = {C.LABEL_SLURM_JOB: "41"}
    running["spec"] = dict(running["spec"], nodeName="kind-worker")
    kube, slurm = kube_with(running), FakeSlurm([ExternalJob(41, "g", "PREEMPTED", "")])
    assert cycle(kube, slurm, BridgeMemory()).ended == 1
    assert kube.get("v1", "Pod", "p", "ml") is None
    assert kube.events[-1][2] == "SlurmJobEnded" and "PREEMPTED" in kube.events[-1][3]


def test_the_pods_of_ended_jobs_are_deleted_all_though_one_deletion_is_refused_which_fails_the_cycle():
    pods = []
    for i, name in enumerate(("a", "b", "c")):
        running = dict(pod(name), status={"phase": "Running"})
        running["metadata"]["labels"] = {C.LABEL_SLURM_JOB: str(41 + i)}
        running["spec"] = dict(running["spec"], nodeName="kind-worker")
        pods.append(running)
    kube = RefusingKube(deletes=["b"])
    kube.objects.update(kube_with(*pods).objects)
    slurm = FakeSlurm([ExternalJob(41 + i, "g%d" % i, "CANCELLED", "") for i in range(3)])
    try:
        cycle(kube, slurm, BridgeMemory())
    except KubeError as exc:
        assert "ml/b" in str(exc)
    else:
        raise AssertionError("the refused deletion was not raised")
    assert [name for name in "abc" if kube.get("v1", "Pod", name, "ml")] == ["b"]
    assert sorted(e[0] for e in kube.events if e[2] == "SlurmJobEnded") == ["ml/a", "ml/c"]


RUNNING_41 = ExternalJob(41, "g", "RUNNING", "", (("demo-cpu-0", 1),))


def ended_pod(phase):
    ended = dict(pod("p"), status={"phase": phase, "containerStatuses": [
        {"name": "c", "state": {"terminated": {"exitCode": 0 if phase == "Succeeded" else 2}}}]})
    ended["metadata"]["labels"] = {C.LABEL_SLURM_JOB: "41"}
    ended["spec"] = dict(ended["spec"], nodeName="kind-worker")
    return ended


def test_a_running_job_whose_pod_ran_out_is_completed_with_its_exit_code_and_an_event():
    for phase, code in (("Succeeded", 0), ("Failed", 2)):
        kube, slurm = kube_with(ended_pod(phase)), FakeSlurm([RUNNING_41])
        report = cycle(kube, slurm, BridgeMemory())
        assert (report.completed, report.cancelled, slurm.completed, slurm.cancelled) == (1, 0, [(41, code)], [])
        assert kube.events[-1][:3] == ("hpc/demo", "Normal", "BridgeJobCompleted")
        assert "Slurm job 41 with exit code %d" % code in kube.events[-1][3] and "ml/p" in kube.events[-1][3]


def test_a_cycle_that_ends_a_job_has_slurm_schedule_its_waiting_jobs_now():
    """An external job's end does not make slurmctld schedule (no epilog to wait for): a job update
    does, so a cycle that ended one touches a waiting job of its own."""
    waiting = pod("q")
    queued = ExternalJob(job_id=42, gang=gang_key([waiting]), state="PENDING", reason="Resources")
    kube, slurm = kube_with(ended_pod("Succeeded"), waiting), FakeSlurm([RUNNING_41, queued])
    report = cycle(kube, slurm, BridgeMemory())
    assert (slurm.completed, slurm.nudged, slurm.submitted) == ([(41, 0)], [42], [])
    assert report.slurm_calls == 3  # the listing, the completion, the update
    # Nothing ended: no update. A waiting job gone meanwhile: the cycle goes on.
    calm = FakeSlurm([queued])
    cycle(kube_with(waiting), calm, BridgeMemory())
    assert calm.nudged == []
    gone = FakeSlurm([RUNNING_41, queued])
    gone.refuse_nudge = "scontrol update: Job has already finished"
    assert cycle(kube_with(ended_pod("Succeeded"), waiting), gone, BridgeMemory()).completed == 1
    assert gone.nudged == [42]


def test_a_job_slurm_will_not_complete_is_cancelled_rather_than_left_holding_its_nodes():
    kube, slurm = kube_with(ended_pod("Succeeded")), FakeSlurm([RUNNING_41])
    slurm.refuse_completion = "slurmkube-complete-job: not found"
    report = cycle(kube, slurm, BridgeMemory())
    assert (report.completed, report.cancelled, slurm.cancelled) == (0, 1, [41])
    assert kube.events[-1][1:3] == ("Warning", "BridgeJobCancelled") and "not found" in kube.events[-1][3]


def test_a_pod_groups_min_member_is_read_from_it_and_a_missing_group_is_said_once():
    members = [pod("w-0"), pod("w-1")]
    for member in members:
        member["metadata"]["labels"][C.LABEL_POD_GROUP] = "pg"
    kube, slurm, memory = kube_with(*members), FakeSlurm(), BridgeMemory()
    cycle(kube, slurm, memory)
    cycle(kube, slurm, memory, now=1.0)
    assert slurm.submitted == []
    assert [e[2] for e in kube.events] == ["BridgeGangUnknown", "BridgeGangUnknown"]  # one per pod
    group = {"apiVersion": C.POD_GROUP_API, "kind": "PodGroup", "metadata": {"name": "pg", "namespace": "ml"},
             "spec": {"minMember": 2}}
    kube.objects[("PodGroup", "ml", "pg")] = group
    cycle(kube, slurm, memory, now=2.0)
    (request,) = slurm.submitted
    assert (request.name, request.tasks) == ("ml/pg", 2)


def test_a_pod_whose_node_is_lost_past_the_timeout_is_deleted_by_force_and_its_job_cancelled():
    bound = dict(pod("p"), status={"phase": "Running"})
    bound["metadata"]["labels"] = {C.LABEL_SLURM_JOB: "41"}
    bound["metadata"]["annotations"] = {C.ANNOTATION_SLURM_NODE: "demo-cpu-0"}
    bound["spec"] = dict(bound["spec"], nodeName="kind-worker")
    kube = kube_with(bound)
    lost_at = datetime.datetime(2026, 11, 29, 10, 0, tzinfo=datetime.timezone.utc)
    kube.objects[("Node", None, "kind-worker")] = {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "kind-worker"}, "status": {"conditions": [
            {"type": "Ready", "status": "Unknown", "lastTransitionTime": "2026-11-29T10:00:00Z"}]}}
    slurm = FakeSlurm([ExternalJob(41, "g", "RUNNING", "", (("demo-cpu-0", 1),))])

    def at(seconds):
        return BridgeCycle(kube, BridgeMemory(), wall=lambda: lost_at + datetime.timedelta(seconds=seconds)).run(
            CLUSTER, BRIDGE, lambda: slurm)

    at(299)
    assert kube.forced == [] and slurm.cancelled == [] and kube.get("v1", "Pod", "p", "ml") is not None
    assert at(300).ended == 1
    assert kube.forced == [("Pod", "p")] and slurm.cancelled == [41]
    said = {e[2]: e for e in kube.events[-2:]}  # on two objects, posted side by side
    assert sorted(said) == ["BridgeJobCancelled", "BridgeNodeLost"]
    assert "kind-worker" in said["BridgeNodeLost"][3] and "by force" in said["BridgeNodeLost"][3]


def member(name, owner=None, labels=(), annotations=()):
    found = pod(name)
    found["metadata"]["labels"].update(dict(labels))
    found["metadata"]["annotations"].update(dict(annotations))
    if owner:
        found["metadata"]["ownerReferences"] = [{"kind": "Job", "name": owner, "uid": "uid-" + owner,
                                                 "controller": True}]
    return found


def test_a_jobset_replicated_job_is_sized_from_its_replicas_and_a_jobs_parallelism():
    labels = {C.LABEL_JOBSET_NAME: "train", C.LABEL_JOBSET_REPLICATED_JOB: "workers", C.LABEL_JOBSET_REPLICAS: "2"}
    pods = [member("w-%d-%d" % (j, i), "train-workers-%d" % j, labels) for j in (0, 1) for i in (0, 1)]
    kube, slurm = kube_with(*pods), FakeSlurm()
    for j in (0, 1):
        kube.objects[("Job", "ml", "train-workers-%d" % j)] = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
            "name": "train-workers-%d" % j, "namespace": "ml", "uid": "uid-train-workers-%d" % j},
            "spec": {"parallelism": 2, "completions": 2}}
    cycle(kube, slurm, BridgeMemory())
    (request,) = slurm.submitted
    assert (request.name, request.tasks) == ("ml/train/workers", 4)


def test_a_leaderworkerset_group_is_sized_from_its_annotation_unless_workers_wait_for_the_leader():
    labels = {C.LABEL_LWS_NAME: "serve", C.LABEL_LWS_GROUP_INDEX: "0", C.LABEL_LWS_GROUP_KEY: "k1"}
    leader = member("serve-0", labels=labels, annotations={C.ANNOTATION_LWS_SIZE: "2"})
    kube, slurm = kube_with(leader), FakeSlurm()
    lws = {"apiVersion": C.LWS_API, "kind": "LeaderWorkerSet", "metadata": {"name": "serve", "namespace": "ml"},
           "spec": {"startupPolicy": "LeaderReady"}}
    kube.objects[("LeaderWorkerSet", "ml", "serve")] = lws
    cycle(kube, slurm, BridgeMemory())
    assert slurm.submitted == [] and kube.events[-1][2] == "BridgeGangUnknown"
    assert "startupPolicy LeaderReady" in kube.events[-1][3]
    lws["spec"]["startupPolicy"] = "LeaderCreated"
    worker = member("serve-0-1", labels=labels, annotations={C.ANNOTATION_LWS_SIZE: "2"})
    kube.objects[("Pod", "ml", "serve-0-1")] = worker
    cycle(kube, slurm, BridgeMemory())
    (request,) = slurm.submitted
    assert (request.name, request.tasks) == ("ml/serve/0", 2)


def test_a_cycle_reports_its_queue_and_each_bound_pods_wait_since_its_creation():
    waiting, held = pod("p"), pod("q")
    waiting["metadata"]["creationTimestamp"] = "2026-11-29T10:00:00Z"
    held["spec"] = dict(held["spec"], nodeSelector={"disk": "ssd"})
    kube, memory, slurm = kube_with(waiting, held), BridgeMemory(), FakeSlurm()
    created = datetime.datetime(2026, 11, 29, 10, 0, tzinfo=datetime.timezone.utc)

    def at(seconds):
        def wall():
            return created + datetime.timedelta(seconds=seconds)
        return BridgeCycle(kube, memory, wall=wall).run(CLUSTER, BRIDGE, lambda: slurm)

    assert at(1).queue == {"pending": 1, "held": 1, "bound": 0}
    slurm.jobs = [ExternalJob(41, slurm.submitted[0].gang, "RUNNING", "", (("demo-cpu-0", 1),))]
    report = at(12.5)
    assert report.bind_seconds == [12.5] and report.queue["pending"] == 1  # read before it was bound
    assert at(13).queue == {"pending": 0, "held": 1, "bound": 1}
    assert report.api_calls >= 4 and report.slurm_calls == 2  # the listing, then the started job by id


def test_slurms_reason_for_a_waiting_pod_is_said_once_per_reason_a_request_too_large_as_a_warning():
    kube, memory, slurm = kube_with(pod("p")), BridgeMemory(), FakeSlurm()
    cycle(kube, slurm, memory)
    gang = slurm.submitted[0].gang
    for reason in ("Priority", "Priority", "PartitionConfig"):
        slurm.jobs = [ExternalJob(41, gang, "PENDING", reason)]
        cycle(kube, slurm, memory)
    said = [e for e in kube.events if e[2] == "SlurmJobPending"]
    assert [(e[1], e[3]) for e in said] == [
        ("Normal", "Slurm job 41 waits: Priority"),
        ("Warning", "Slurm job 41 waits: PartitionConfig (it will not run as asked: change the pod's request or "
                    "annotations)")]
