"""The reconciler and a Kubernetes node that stopped reporting (NotReady): its workers' Slurm
nodes go DOWN at once, so Slurm requeues their jobs, and their pods are deleted by force after
the node set's lostNodeTimeoutSeconds, so that their StatefulSet makes them again elsewhere.

Slurm is the small table of test_reconcile_health (scontrol and squeue as the controller pod
answers them); pods and Kubernetes nodes live in the in-memory API.
"""

from __future__ import annotations

import datetime

import pytest
from test_reconcile_health import T0, make_world, reconcile_at

from ansible_collections.slurmkube.core.plugins.module_utils.model.types import NodeSetSpec
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.metrics import reason_kind

LOST = "slurmkube: kubernetes node host-b lost"
TIMEOUT = NodeSetSpec.__dataclass_fields__["lost_node_timeout_seconds"].default


@pytest.fixture
def world(monkeypatch):
    kube, cluster = make_world(monkeypatch)
    kube.host("host-a", cordoned=False)
    kube.host("host-b", cordoned=False, lost_since=T0 - datetime.timedelta(seconds=10))
    for name in ("cpu-compute-2", "cpu-compute-3"):
        kube.pod(name, T0 - datetime.timedelta(days=2), host="host-b")
    return kube, cluster


def test_workers_on_a_lost_host_go_down_at_once_and_slurm_requeues_their_jobs(world):
    kube, cluster = world
    kube.job(71, "cpu-compute-2")
    kube.job(72, "cpu-compute-0")
    kube.node("cpu-compute-3", "IDLE", "DRAIN", reason="admin: fan")
    outcome = reconcile_at(kube, cluster, T0)
    assert {n: (kube.nodes[n]["state"], kube.nodes[n]["reason"]) for n in ("cpu-compute-2", "cpu-compute-3")} == {
        "cpu-compute-2": (["DOWN"], LOST), "cpu-compute-3": (["DOWN", "DRAIN"], "admin: fan")}
    assert 71 not in kube.jobs and 72 in kube.jobs  # the lost host's job only
    assert R.Event("Normal", "NodeDown", "down cpu-compute-2: " + LOST) in outcome.events
    assert reason_kind(LOST) == "node-lost"
    # DOWN already: the next pass leaves the nodes alone.
    again = reconcile_at(kube, cluster, T0 + datetime.timedelta(seconds=10))
    assert not [e for e in again.events if e.reason == "NodeDown"]
    assert kube.forced == []


def test_pods_on_a_lost_host_are_deleted_by_force_once_it_has_been_lost_for_the_timeout(world):
    kube, cluster = world
    reconcile_at(kube, cluster, T0 + datetime.timedelta(seconds=TIMEOUT - 11))
    assert kube.forced == []
    outcome = reconcile_at(kube, cluster, T0 + datetime.timedelta(seconds=TIMEOUT - 10))
    assert kube.forced == [("Pod", "cpu-compute-2"), ("Pod", "cpu-compute-3")]
    assert R.Event("Normal", "NodeForceDeletePod", "force-delete-pod cpu-compute-2: kubernetes node host-b lost for "
                   "%ds or more" % TIMEOUT) in outcome.events
    assert kube.get("v1", "Pod", "cpu-compute-0", "research") is not None  # host-a's pods stay


def test_a_host_that_reports_again_changes_nothing_and_a_timeout_of_0_never_forces(world):
    kube, cluster = world
    kube.host("host-b", cordoned=False)
    outcome = reconcile_at(kube, cluster, T0 + datetime.timedelta(hours=1))
    assert not [e for e in outcome.events if e.reason in ("NodeDown", "NodeForceDeletePod")]
    kube.host("host-b", cordoned=False, lost_since=T0)
    nodeset = kube.get("slurmkube.io/v1alpha1", "NodeSet", "compute", "research")
    nodeset["spec"]["lostNodeTimeoutSeconds"] = 0
    kube.apply(nodeset)
    reconcile_at(kube, cluster, T0 + datetime.timedelta(hours=1))
    assert kube.forced == [] and kube.nodes["cpu-compute-2"]["reason"] == LOST
