"""The bridge's decisions: gangs submitted whole, pods bound where Slurm placed their job, jobs
cancelled only once no pod holds them, pods ended only when Slurm says their job ended."""

from __future__ import annotations

from typing import Any, Dict, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.bridge import Bridge, BridgeAccounts
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_bridge import (
    gang_key,
    plan_bridge,
    pod_request,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.external import ExternalJob

BRIDGE = Bridge(namespaces=["ml"])
HOSTS = {"demo-cpu-0": "kind-worker", "demo-cpu-1": "kind-worker2"}
JOB_UID = "job-uid-1"
GROUP = "Job/" + JOB_UID


def pod(name: str, cpu: str = "1", memory: str = "", owner: Optional[str] = JOB_UID, created: str = "",
        job: Optional[int] = None, node: str = "", phase: str = "Pending", slurm_node: str = "",
        annotations: Optional[Dict[str, str]] = None, **spec: Any) -> Dict[str, Any]:
    requests = {"cpu": cpu}
    if memory:
        requests["memory"] = memory
    meta: Dict[str, Any] = {"name": name, "namespace": "ml", "uid": "uid-" + name,
                            "creationTimestamp": created or "2026-11-29T10:00:00Z",
                            "labels": {C.LABEL_SLURM_JOB: str(job)} if job else {},
                            "annotations": dict(annotations or {})}
    if slurm_node:
        meta["annotations"][C.ANNOTATION_SLURM_NODE] = slurm_node
    if owner:
        meta["ownerReferences"] = [{"kind": "Job", "name": "train", "uid": owner, "controller": True}]
    return {"metadata": meta,
            "spec": dict({"schedulerName": C.BRIDGE_SCHEDULER_NAME, "nodeName": node,
                          "containers": [{"name": "main", "resources": {"requests": requests}}]}, **spec),
            "status": {"phase": phase}}


def job(job_id: int, gang: str, state: str = "PENDING", allocation=(), detailed: bool = True) -> ExternalJob:
    """As Slurm lists it (its nodes), and read in detail (its CPUs per node) unless DETAILED is False."""
    return ExternalJob(job_id=job_id, gang=gang, state=state, reason="",
                       allocation=tuple(allocation) if detailed else (), nodes=tuple(n for n, _cpus in allocation))


def test_a_jobs_parallel_pods_wait_until_all_exist_then_go_as_one_slurm_job_of_one_task_each():
    first = pod("train-a")
    assert plan_bridge([first], {GROUP: 2}, [], HOSTS, BRIDGE).submits == []
    plan = plan_bridge([first, pod("train-b")], {GROUP: 2}, [], HOSTS, BRIDGE)
    (submit,) = plan.submits
    assert submit.pods == ("ml/train-a", "ml/train-b")
    assert (submit.request.name, submit.request.tasks, submit.request.cpus_per_task) == ("ml/train", 2, 1)
    assert submit.request.gang == gang_key([first, pod("train-b")])


def test_a_gang_whose_job_exists_is_not_submitted_again_after_a_restart():
    pods = [pod("train-a"), pod("train-b")]
    plan = plan_bridge(pods, {GROUP: 2}, [job(7, gang_key(pods))], HOSTS, BRIDGE)
    assert plan.submits == [] and plan.cancels == [] and plan.binds == []


def test_a_running_job_binds_each_pod_to_the_kubernetes_node_of_its_slurm_node():
    pods = [pod("train-a"), pod("train-b")]
    running = job(7, gang_key(pods), "RUNNING", [("demo-cpu-0", 1), ("demo-cpu-1", 1)])
    plan = plan_bridge(pods, {GROUP: 2}, [running], HOSTS, BRIDGE)
    assert [(b.pod, b.slurm_node, b.host, b.job_id) for b in plan.binds] == [
        ("train-a", "demo-cpu-0", "kind-worker", 7), ("train-b", "demo-cpu-1", "kind-worker2", 7)]


def test_a_running_job_read_without_its_cpus_per_node_is_asked_for_in_detail_before_any_pod_is_bound():
    pods = [pod("train-a"), pod("train-b")]
    listed = job(7, gang_key(pods), "RUNNING", [("demo-cpu-0", 1), ("demo-cpu-1", 1)], detailed=False)
    plan = plan_bridge(pods, {GROUP: 2}, [listed], HOSTS, BRIDGE)
    assert plan.details == [7] and plan.binds == [] and plan.submits == [] and plan.cancels == []


def test_two_tasks_on_one_node_both_go_there():
    pods = [pod("train-a", cpu="2"), pod("train-b", cpu="1500m")]
    running = job(7, gang_key(pods), "RUNNING", [("demo-cpu-1", 4)])
    assert {b.host for b in plan_bridge(pods, {GROUP: 2}, [running], HOSTS, BRIDGE).binds} == {"kind-worker2"}


def test_an_exclusive_job_on_two_whole_nodes_puts_a_pod_on_each():
    pods = [pod("train-a"), pod("train-b")]
    running = job(7, gang_key(pods), "RUNNING", [("demo-cpu-0", 4), ("demo-cpu-1", 4)])
    exclusive = Bridge(namespaces=["ml"], exclusive=True)
    assert sorted(b.slurm_node for b in plan_bridge(pods, {GROUP: 2}, [running], HOSTS, exclusive).binds) == [
        "demo-cpu-0", "demo-cpu-1"]


def test_a_binding_cut_short_by_a_restart_is_finished_from_the_pods_label():
    labelled = pod("train-a", job=7, slurm_node="demo-cpu-1")
    plan = plan_bridge([labelled], {}, [job(7, "other", "RUNNING", [("demo-cpu-1", 1)])], HOSTS, BRIDGE)
    assert [(b.pod, b.host) for b in plan.binds] == [("train-a", "kind-worker2")]
    assert plan.cancels == []


def test_a_job_ends_only_once_none_of_its_pods_is_left_completed_when_they_ran_out_cancelled_when_deleted():
    terminating = pod("train-a", job=7, node="kind-worker", phase="Running")
    terminating["metadata"]["deletionTimestamp"] = "2026-11-29T10:05:00Z"
    running = job(7, "gang", "RUNNING", [("demo-cpu-0", 1)])
    waiting = plan_bridge([terminating], {}, [running], HOSTS, BRIDGE)
    assert waiting.cancels == [] and waiting.completes == []  # containers still up
    done = pod("train-a", job=7, node="kind-worker", phase="Succeeded")
    half = plan_bridge([done, pod("train-b", job=7, node="kind-worker2", phase="Running")], {}, [running], HOSTS,
                       BRIDGE)  # fmt: skip
    assert half.cancels == [] and half.completes == []
    (completed,) = plan_bridge([done], {}, [running], HOSTS, BRIDGE).completes
    assert (completed.job_id, completed.exit_code) == (7, 0) and "ml/train-a" in completed.why
    deleted = plan_bridge([], {}, [running], HOSTS, BRIDGE)
    assert [c.job_id for c in deleted.cancels] == [7] and deleted.completes == []


def failed_pod(name: str, *exit_codes: int) -> Dict[str, Any]:
    ended = pod(name, job=7, node="kind-worker", phase="Failed")
    ended["status"]["containerStatuses"] = [{"name": "c%d" % i, "state": {"terminated": {"exitCode": code}}}
                                            for i, code in enumerate(exit_codes)]
    return ended


def test_a_job_whose_pods_failed_ends_with_their_highest_exit_code():
    running = job(7, "gang", "RUNNING", [("demo-cpu-0", 2)])
    succeeded = pod("train-a", job=7, node="kind-worker", phase="Succeeded")
    for pods, code in (([succeeded, failed_pod("train-b", 0, 3)], 3), ([failed_pod("a", 2), failed_pod("b", 137)], 137),
                       ([failed_pod("evicted")], 1), ([failed_pod("odd", 300)], 255)):
        (completed,) = plan_bridge(pods, {}, [running], HOSTS, BRIDGE).completes
        assert completed.exit_code == code, pods


def test_a_pod_deleted_while_it_ran_counts_as_deleted_though_kubernetes_gave_it_a_terminal_phase():
    """Kubernetes sets a deleted pod's phase (Failed: its container killed) before removing it: its
    job is cancelled, as for a pod already gone (CI saw it COMPLETED as FAILED 143 instead)."""
    running = job(7, "gang", "RUNNING", [("demo-cpu-0", 1)])
    killed = failed_pod("first", 143)
    killed["metadata"].update(deletionTimestamp="2026-11-29T10:05:01Z", deletionGracePeriodSeconds=1)
    killed["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = "2026-11-29T10:05:01Z"
    plan = plan_bridge([killed], {}, [running], HOSTS, BRIDGE)
    assert [c.job_id for c in plan.cancels] == [7] and plan.completes == []
    # One that had ended before anyone deleted it ran to its end: its job ends as it did.
    killed["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = "2026-11-29T10:04:00Z"
    (completed,) = plan_bridge([killed], {}, [running], HOSTS, BRIDGE).completes
    assert completed.exit_code == 143


def test_a_job_that_never_started_is_cancelled_even_if_its_pods_ended():
    ended = pod("train-a", job=7, phase="Failed")  # ended by the bridge: Slurm requeued its job
    plan = plan_bridge([ended], {}, [job(7, "gang", "PENDING")], HOSTS, BRIDGE)
    assert [c.job_id for c in plan.cancels] == [7] and plan.completes == []


def test_a_pending_job_whose_pods_were_deleted_is_cancelled_and_an_ended_one_is_left_alone():
    jobs = [job(7, "gone-gang"), job(8, "old", "CANCELLED")]
    assert [c.job_id for c in plan_bridge([], {}, jobs, HOSTS, BRIDGE).cancels] == [7]


def test_pods_end_when_slurm_ends_their_job_and_never_when_slurm_does_not_list_it():
    running = pod("train-a", job=7, node="kind-worker", phase="Running")
    ended = plan_bridge([running], {}, [job(7, "g", "TIMEOUT")], HOSTS, BRIDGE)
    assert [(e.pod, e.job_id) for e in ended.ends] == [("train-a", 7)]
    assert "TIMEOUT" in ended.ends[0].why
    unknown = plan_bridge([running], {}, [], HOSTS, BRIDGE)
    assert unknown.ends == [] and unknown.cancels == []


def test_scancel_of_a_pending_gang_ends_its_pods_instead_of_submitting_again():
    pods = [pod("train-a"), pod("train-b")]
    plan = plan_bridge(pods, {GROUP: 2}, [job(7, gang_key(pods), "CANCELLED")], HOSTS, BRIDGE)
    assert plan.submits == [] and [e.pod for e in plan.ends] == ["train-a", "train-b"]


def test_a_pod_without_a_job_owner_is_a_gang_of_its_own():
    plan = plan_bridge([pod("solo", owner=None), pod("other", owner="rs-uid")], {}, [], HOSTS, BRIDGE)
    assert sorted(s.request.name for s in plan.submits) == ["ml/other", "ml/solo"]


def test_what_slurm_cannot_honour_holds_the_pod_with_the_reason():
    plan = plan_bridge([pod("pinned", owner=None, nodeSelector={"disk": "ssd"})], {}, [], HOSTS, BRIDGE)
    assert plan.submits == []
    (hold,) = plan.holds
    assert hold.reason == "BridgeUnsupported" and "nodeSelector" in hold.message
    bad = pod("bad", owner=None,
              annotations={C.ANNOTATION_BRIDGE_ACCOUNT: "a b", C.ANNOTATION_BRIDGE_TIME_LIMIT: "soon"})
    (hold,) = plan_bridge([bad], {}, [], HOSTS, BRIDGE).holds
    assert hold.reason == "BridgeInvalid" and C.ANNOTATION_BRIDGE_ACCOUNT in hold.message
    assert C.ANNOTATION_BRIDGE_TIME_LIMIT in hold.message


def test_annotations_and_the_spec_become_the_jobs_options():
    annotated = pod("solo", owner=None, memory="3Gi", cpu="1500m", annotations={
        C.ANNOTATION_BRIDGE_ACCOUNT: "physics", C.ANNOTATION_BRIDGE_QOS: "high",
        C.ANNOTATION_BRIDGE_TIME_LIMIT: "1-00:00:00"})
    exclusive = Bridge(namespaces=["ml"], partition="gpu", exclusive=True,
                       accounts=[BridgeAccounts(namespace="ml", accounts=["physics"])])
    (submit,) = plan_bridge([annotated], {}, [], HOSTS, exclusive).submits
    request = submit.request
    options = (request.account, request.qos, request.time_limit, request.partition)
    assert options == ("physics", "high", "1-00:00:00", "gpu")
    assert (request.cpus_per_task, request.mem_per_cpu_mib, request.exclusive) == (2, 1536, True)


def test_a_pods_request_counts_its_largest_init_container_and_whole_cpus():
    spec = pod("p", cpu="250m", memory="100Mi")
    spec["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]
    spec["spec"]["containers"][0]["resources"]["limits"] = {C.BRIDGE_GPU_RESOURCE: "2"}
    assert pod_request(spec) == (3, 1024, 2)
    assert pod_request(pod("q", cpu="100m")) == (1, 0, 0)


def test_a_gangs_highest_pod_priority_raises_its_jobs_slurm_priority_by_as_much():
    def prioritised(name: str, priority: Optional[int]) -> Dict[str, Any]:
        return pod(name, **({"priority": priority} if priority is not None else {}))

    (submit,) = plan_bridge([prioritised("a", 10), prioritised("b", 1000)], {GROUP: 2}, [], HOSTS, BRIDGE).submits
    assert submit.request.nice == -1000
    assert [s.request.nice for s in plan_bridge([prioritised("c", None)], {GROUP: 1}, [], HOSTS, BRIDGE).submits] == [0]
    # Kubernetes allows negative priorities, and more than `sbatch --nice` takes: lowered, and bounded.
    assert [s.request.nice for s in plan_bridge([prioritised("d", -5)], {GROUP: 1}, [], HOSTS, BRIDGE).submits] == [5]
    assert [s.request.nice for s in plan_bridge([prioritised("e", -2 ** 31)], {GROUP: 1}, [], HOSTS,
                                                BRIDGE).submits] == [2147483645]


def test_a_plan_that_ends_a_job_names_a_waiting_job_to_touch_so_that_slurm_schedules_now():
    done = pod("done", owner=None, job=7, node="kind-worker", phase="Succeeded", slurm_node="demo-cpu-0")
    waiting = pod("waiting", owner=None)
    running = job(7, gang_key([done]), "RUNNING", [("demo-cpu-0", 1)])
    queued = job(8, gang_key([waiting]))
    plan = plan_bridge([done, waiting], {}, [running, queued], HOSTS, BRIDGE)
    assert [c.job_id for c in plan.completes] == [7] and plan.nudge == queued
    assert plan_bridge([waiting], {}, [queued], HOSTS, BRIDGE).nudge is None  # nothing ends
    # The only waiting job is the one cancelled (its pod deleted): nothing to touch.
    assert plan_bridge([done], {}, [running, queued], HOSTS, BRIDGE).nudge is None


def grouped(name: str) -> Dict[str, Any]:
    member = pod(name, owner=None)
    member["metadata"]["labels"][C.LABEL_POD_GROUP] = "pg"
    return member


def test_a_pod_groups_members_go_as_one_job_of_its_min_member_and_none_goes_alone():
    members = [grouped("w-0"), grouped("w-1")]
    assert plan_bridge(members[:1], {"PodGroup/ml/pg": 2}, [], HOSTS, BRIDGE).submits == []
    (submit,) = plan_bridge(members, {"PodGroup/ml/pg": 2}, [], HOSTS, BRIDGE).submits
    assert (submit.request.name, submit.request.tasks) == ("ml/pg", 2)
    unknown = plan_bridge(members, {}, [], HOSTS, BRIDGE)  # its PodGroup could not be read
    assert unknown.submits == [] and {h.reason for h in unknown.holds} == {"BridgeGangUnknown"}


def test_a_pod_naming_an_account_its_namespace_is_not_given_is_held_saying_which_it_may_name():
    charging = pod("solo", owner=None, annotations={C.ANNOTATION_BRIDGE_ACCOUNT: "physics"})
    given = Bridge(namespaces=["ml"], accounts=[BridgeAccounts(namespace="ml", accounts=["ml-team"])])
    plan = plan_bridge([charging], {}, [], HOSTS, given)
    assert plan.submits == []
    (hold,) = plan.holds
    assert hold.reason == "BridgeForbidden" and "physics" in hold.message and "ml-team" in hold.message
    (hold,) = plan_bridge([charging], {}, [], HOSTS, BRIDGE).holds  # no accounts given: none may be named
    assert hold.reason == "BridgeForbidden" and "no account" in hold.message
    assert plan_bridge([pod("plain", owner=None)], {}, [], HOSTS, given).submits  # root's default account


def test_a_pod_whose_job_slurm_requeued_is_ended_and_the_job_cancelled_once_it_is_gone():
    """The operator requeues the jobs of a node drained past its timeout, Slurm those of a failed
    node: the pod's place is gone, wherever the job runs next."""
    running = pod("train-a", job=7, node="kind-worker", phase="Running", slurm_node="demo-cpu-0")
    for requeued in (job(7, "g", "PENDING"), job(7, "g", "RUNNING", [("demo-cpu-1", 1)])):
        (end,) = plan_bridge([running], {}, [requeued], HOSTS, BRIDGE).ends
        assert end.pod == "train-a" and "requeued" in end.why
    assert plan_bridge([running], {}, [job(7, "g", "RUNNING", [("demo-cpu-0", 1)])], HOSTS, BRIDGE).ends == []
    assert [c.job_id for c in plan_bridge([], {}, [job(7, "g", "PENDING")], HOSTS, BRIDGE).cancels] == [7]
    unbound = pod("train-b", job=8, slurm_node="demo-cpu-0")  # labelled, then the job moved
    (end,) = plan_bridge([unbound], {}, [job(8, "g2", "RUNNING", [("demo-cpu-1", 1)])], HOSTS, BRIDGE).ends
    assert end.pod == "train-b"


def test_a_pod_on_a_node_lost_past_the_timeout_is_ended_by_force_and_its_gangs_job_cancelled():
    """Its kubelet will never confirm the containers stopped, terminating or not: the gang's
    job is cancelled (its other pods end when Slurm says so), Slurm takes the CPUs back."""
    gang = [pod("train-a", job=7, node="kind-worker", phase="Running", slurm_node="demo-cpu-0"),
            pod("train-b", job=7, node="kind-worker2", phase="Running", slurm_node="demo-cpu-1")]
    running = job(7, "g", "RUNNING", [("demo-cpu-0", 1), ("demo-cpu-1", 1)])
    timeout = BRIDGE.lost_node_timeout_seconds
    assert timeout == 300
    not_yet = plan_bridge(gang, {}, [running], HOSTS, BRIDGE, {"kind-worker": timeout - 1})
    assert not_yet.forced == [] and not_yet.cancels == [] and not_yet.ends == []
    plan = plan_bridge(gang, {}, [running], HOSTS, BRIDGE, {"kind-worker": timeout})
    (forced,) = plan.forced
    assert (forced.pod, forced.job_id) == ("train-a", 7)
    (cancel,) = plan.cancels
    assert cancel.job_id == 7 and "kind-worker of pod ml/train-a" in cancel.why and "300 s" in cancel.why
    assert plan.ends == []  # train-b ends once Slurm says its job ended
    terminating = dict(gang[0], metadata=dict(gang[0]["metadata"], deletionTimestamp="2026-11-29T10:00:00Z"))
    ended = job(7, "g", "NODE_FAIL")
    again = plan_bridge([terminating], {}, [ended], HOSTS, BRIDGE, {"kind-worker": 900})
    assert [f.pod for f in again.forced] == ["train-a"] and again.cancels == []  # ended: nothing to cancel
    never = Bridge(namespaces=["ml"], lost_node_timeout_seconds=0)
    assert plan_bridge(gang, {}, [running], HOSTS, never, {"kind-worker": 10 ** 6}).forced == []


def labelled(name: str, owner: Optional[str], **labels: str) -> Dict[str, Any]:
    member = pod(name, owner=owner)
    member["metadata"]["labels"].update(labels)
    return member


def test_a_jobset_replicated_jobs_pods_of_every_job_go_as_one_slurm_job():
    """Two Jobs of replicated job 'workers' (each its own owner): one gang, named after the set."""
    replicated = {C.LABEL_JOBSET_NAME: "train", C.LABEL_JOBSET_REPLICATED_JOB: "workers",
                  C.LABEL_JOBSET_REPLICAS: "2", C.LABEL_JOBSET_RESTART: "0"}
    members = [labelled("train-workers-%d-0" % j, "job-%d" % j, **replicated) for j in (0, 1)]
    group = "JobSet/ml/train/workers/0"
    assert plan_bridge(members[:1], {group: 2}, [], HOSTS, BRIDGE).submits == []
    (submit,) = plan_bridge(members, {group: 2}, [], HOSTS, BRIDGE).submits
    assert (submit.request.name, submit.request.tasks) == ("ml/train/workers", 2)
    held = plan_bridge(members, {}, [], HOSTS, BRIDGE)  # its Jobs cannot be read: none goes alone
    assert held.submits == [] and {h.reason for h in held.holds} == {"BridgeGangUnknown"}


def test_a_leaderworkerset_groups_leader_and_workers_go_as_one_slurm_job_and_a_reason_is_said():
    group = {C.LABEL_LWS_NAME: "serve", C.LABEL_LWS_GROUP_INDEX: "0", C.LABEL_LWS_GROUP_KEY: "k1"}
    members = [labelled("serve-0", None, **group), labelled("serve-0-1", None, **group)]
    (submit,) = plan_bridge(members, {"LeaderWorkerSet/ml/k1": 2}, [], HOSTS, BRIDGE).submits
    assert (submit.request.name, submit.request.tasks) == ("ml/serve/0", 2)
    why = {"LeaderWorkerSet/ml/k1": "LeaderWorkerSet serve makes its workers only once its leader is Ready"}
    (hold,) = plan_bridge(members[:1], {}, [], HOSTS, BRIDGE, unknown=why).holds
    assert hold.reason == "BridgeGangUnknown" and hold.message == why["LeaderWorkerSet/ml/k1"]


def test_an_orphan_pod_of_a_job_that_is_gone_goes_alone():
    (submit,) = plan_bridge([pod("left")], {}, [], HOSTS, BRIDGE).submits
    assert (submit.pods, submit.request.tasks) == (("ml/left",), 1)


def test_a_waiting_gangs_slurm_reason_is_passed_on_and_one_that_never_runs_as_asked_is_told_apart():
    pods = [pod("train-a"), pod("train-b")]
    queued = ExternalJob(job_id=7, gang=gang_key(pods), state="PENDING", reason="Resources")
    (wait,) = plan_bridge(pods, {GROUP: 2}, [queued], HOSTS, BRIDGE).waits
    assert (wait.pods, wait.job_id, wait.reason, wait.never_as_asked) == (
        ("ml/train-a", "ml/train-b"), 7, "Resources", False)
    too_large = ExternalJob(job_id=8, gang=gang_key(pods), state="PENDING", reason="PartitionConfig")
    (wait,) = plan_bridge(pods, {GROUP: 2}, [too_large], HOSTS, BRIDGE).waits
    assert wait.never_as_asked
