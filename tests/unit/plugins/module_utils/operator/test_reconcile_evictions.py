"""The reconciler and Kubernetes evictions: which worker pods an eviction may take, what happens
to the jobs of a worker whose Kubernetes node is being emptied, and what it reports.

Slurm is the small table of test_reconcile_health (scontrol and squeue as the controller pod
answers them); pods, Kubernetes nodes and StatefulSets live in the in-memory API.
"""

from __future__ import annotations

import datetime

import pytest
from test_reconcile_health import T0, make_world, reconcile_at

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R

EVICTION_DRAIN = "slurmkube: kubernetes eviction since 2026-11-22T12:00:00Z"


@pytest.fixture
def world(monkeypatch):
    return make_world(monkeypatch)


def labels(kube, pod):
    return kube.objects[("Pod", "research", pod)]["metadata"]["labels"]


def with_status(cluster, outcome):
    """The SlurmCluster as the next pass reads it: the status the last one wrote."""
    return dict(cluster, status=outcome.status)


def test_idle_workers_are_labelled_evictable_busy_ones_are_not_and_a_steady_pass_writes_nothing(world):
    kube, cluster = world
    kube.host("host-a", cordoned=False)
    kube.job(41, "cpu-compute-1")
    reconcile_at(kube, cluster, T0)
    assert [labels(kube, "cpu-compute-%d" % i).get(C.LABEL_EVICTABLE) for i in range(4)] == \
        ["true", None, "true", "true"]
    writes = kube.writes
    reconcile_at(kube, cluster, T0)
    assert kube.writes == writes
    # The job ended: its node may go; a job started on another: that one may not.
    del kube.jobs[41]
    kube.node("cpu-compute-1", "IDLE")
    kube.job(42, "cpu-compute-3")
    reconcile_at(kube, cluster, T0)
    assert labels(kube, "cpu-compute-1")[C.LABEL_EVICTABLE] == "true"
    assert C.LABEL_EVICTABLE not in labels(kube, "cpu-compute-3")


def test_a_cordoned_hosts_workers_are_drained_and_their_jobs_requeued_after_the_timeout(world):
    kube, cluster = world
    kube.host("host-a", cordoned=False)
    kube.host("host-b", cordoned=True)
    for name in ("cpu-compute-2", "cpu-compute-3"):
        kube.pod(name, T0 - datetime.timedelta(days=2), host="host-b")
    kube.job(51, "cpu-compute-2")
    outcome = reconcile_at(kube, cluster, T0)
    assert {n: kube.nodes[n]["reason"] for n in ("cpu-compute-0", "cpu-compute-2", "cpu-compute-3")} == {
        "cpu-compute-0": "", "cpu-compute-2": EVICTION_DRAIN, "cpu-compute-3": EVICTION_DRAIN}
    assert R.Event("Normal", "NodeDrain", "drain cpu-compute-2: " + EVICTION_DRAIN) in outcome.events
    # Before the timeout (the example's node set has the default, an hour) the job runs on.
    reconcile_at(kube, cluster, T0 + datetime.timedelta(seconds=3599))
    assert 51 in kube.jobs
    outcome = reconcile_at(kube, cluster, T0 + datetime.timedelta(seconds=3600))
    assert 51 not in kube.jobs
    assert R.Event("Normal", "JobRequeued", "requeued job 51 from cpu-compute-2 (kubernetes eviction: drain timeout "
                   "of 3600s passed)") in outcome.events


def test_kubernetes_pods_job_past_the_timeout_is_cancelled_not_requeued(world):
    """Slurm requeues batch jobs only: the bridge's external job is cancelled, and the bridge ends
    its pods (their controller makes them again, to wait for Slurm anew)."""
    kube, cluster = world
    kube.host("host-a", cordoned=True)
    kube.job(71, "cpu-compute-0", external=True)
    reconcile_at(kube, cluster, T0)
    outcome = reconcile_at(kube, cluster, T0 + datetime.timedelta(minutes=61))
    assert 71 not in kube.jobs and ("cpu-controller-0", C.CONTAINER_CONTROLLER, ("scancel", "71")) in kube.execs
    assert not [e for e in kube.execs if e[2][:2] == ("scontrol", "requeue")]
    (said,) = [e for e in outcome.events if e.reason == "JobCancelled"]
    assert said.message.startswith("cancelled job 71 of Kubernetes pods on cpu-compute-0 (kubernetes eviction")
    assert outcome.status["jobsNotRequeued"] == []


def test_a_no_requeue_job_past_the_timeout_is_reported_once_and_never_requeued(world):
    kube, cluster = world
    kube.host("host-a", cordoned=True)
    kube.job(61, "cpu-compute-0", requeue=False)
    reconcile_at(kube, cluster, T0)
    later = T0 + datetime.timedelta(minutes=61)
    first = reconcile_at(kube, cluster, later)
    assert 61 in kube.jobs and not [e for e in kube.execs if e[2][:2] == ("scontrol", "requeue")]
    assert first.status["jobsNotRequeued"] == [{"jobId": 61, "node": "cpu-compute-0"}]
    warnings = [e for e in first.events if e.reason == "JobNotRequeued"]
    assert len(warnings) == 1 and warnings[0].kind == "Warning"
    assert "job 61 on cpu-compute-0 was sent with --no-requeue" in warnings[0].message
    nodes = next(c for c in first.status["conditions"] if c["type"] == "NodesReady")
    assert "job 61 on cpu-compute-0 was sent with --no-requeue" in nodes["message"]
    # The next pass sees it in the status: no second Event.
    second = R.Reconciler(kube, clock=lambda: later).reconcile(with_status(cluster, first))
    assert not [e for e in second.events if e.reason == "JobNotRequeued"]
    assert second.status["jobsNotRequeued"] == first.status["jobsNotRequeued"]
    # slurmctld unreachable for a pass: the list stays as it was (no second Event later).
    kube.objects.pop(("Pod", "research", "cpu-controller-0"))
    blind = R.Reconciler(kube, clock=lambda: later).reconcile(with_status(cluster, second))
    assert blind.status["jobsNotRequeued"] == first.status["jobsNotRequeued"]
    kube.pod("cpu-controller-0", T0 - datetime.timedelta(days=3))
    # It ended: the list empties.
    del kube.jobs[61]
    kube.node("cpu-compute-0", "IDLE", "DRAIN", reason=EVICTION_DRAIN)
    assert reconcile_at(kube, cluster, later).status["jobsNotRequeued"] == []


def test_an_evicted_worker_serving_on_another_host_is_resumed(world):
    kube, cluster = world
    kube.host("host-a", cordoned=True)
    kube.host("host-b", cordoned=False)
    reconcile_at(kube, cluster, T0)
    assert kube.nodes["cpu-compute-1"]["reason"] == EVICTION_DRAIN
    # Evicted; the StatefulSet made it again on host-b, slurmd registered.
    kube.pod("cpu-compute-1", T0 + datetime.timedelta(minutes=1), host="host-b")
    outcome = reconcile_at(kube, cluster, T0 + datetime.timedelta(minutes=1))
    assert kube.nodes["cpu-compute-1"]["state"] == ["IDLE"]
    assert R.Event("Normal", "NodeResume", "resume cpu-compute-1") in outcome.events
    assert kube.nodes["cpu-compute-0"]["reason"] == EVICTION_DRAIN  # still on the cordoned host


def test_each_node_set_reports_a_ready_condition(world):
    kube, cluster = world
    ready = reconcile_at(kube, cluster, T0).nodeset_status["compute"]["conditions"]
    assert [(c["type"], c["status"], c["reason"]) for c in ready] == [("Ready", "True", "NodesInService")]
    kube.objects[("StatefulSet", "research", "cpu-compute")]["status"] = {"readyReplicas": 3}
    below = reconcile_at(kube, cluster, T0).nodeset_status["compute"]["conditions"][0]
    assert (below["status"], below["reason"]) == ("False", "BelowReplicas")
    assert below["message"] == "4/4 nodes in service, 3/4 pods ready"
