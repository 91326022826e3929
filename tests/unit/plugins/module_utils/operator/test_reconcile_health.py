"""The reconciler's health reactions: replacing hardware-drained nodes, explaining unresponsive ones.

Slurm is a small table behind the exec API (scontrol as the controller pod answers it, with the
JSON shape of a real 24.11); pods and StatefulSets live in the in-memory API.
"""

from __future__ import annotations

import copy
import datetime
import json

import pytest
from example_clusters import example_resources
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R
from ansible_collections.slurmkube.core.plugins.module_utils.operator import secrets as operator_secrets

T0 = datetime.datetime(2026, 11, 22, 12, 0, 0, tzinfo=datetime.timezone.utc)
GPU_REASON = "slurmkube: gpu 00000000:34:00.0: 1 uncorrectable ECC errors (max 0)"
MUNGE_DOWN = "munged does not answer on /run/munge/munge.socket.2"


class SlurmKube(MemoryKube):
    """MemoryKube whose controller pod answers scontrol and whose worker pods run the check."""

    def __init__(self):
        super().__init__()
        self.nodes = {}
        self.jobs = {}
        self.reports = {}
        self.execs = []

    def exec(self, namespace, pod, container, command, timeout=60):
        self.execs.append((pod, container, tuple(command)))
        if container == C.CONTAINER_WORKER:
            return self.reports.get(pod, (0, "healthy\n", ""))
        if command[:3] == ["scontrol", "show", "nodes"]:
            return 0, json.dumps({"nodes": list(self.nodes.values())}), ""
        if command[:2] == ["squeue", "--json"]:
            wanted = set(command[2].split("=", 1)[1].split(","))
            return 0, json.dumps({"jobs": [j for j in self.jobs.values() if j["nodes"] in wanted]}), ""
        if command[0] == "scancel":
            for job_id in command[1:]:
                self.jobs.pop(int(job_id))
            return 0, "", ""
        if command[:2] == ["scontrol", "requeue"]:
            for job_id in command[2].split(","):
                job = self.jobs.pop(int(job_id))
                if not job["requeue"]:
                    return 1, "", "Requested operation is presently disabled for job %s" % job_id
            return 0, "", ""
        if command[:2] == ["scontrol", "update"]:
            name = command[2].split("=", 1)[1]
            words = dict(w.split("=", 1) for w in command[3:])
            node = self.nodes[name]
            if words["state"] == "drain":
                node["state"] = sorted(set(node["state"]) | {"DRAIN"})
                node["reason"] = words["reason"]
            elif words["state"] == "down":  # Slurm requeues the node's jobs at once
                node["state"] = sorted((set(node["state"]) - {"IDLE", "ALLOCATED", "MIXED"}) | {"DOWN"})
                node["reason"] = words["reason"]
                for job_id in [j for j, job in self.jobs.items() if job["nodes"] == name and job["requeue"]]:
                    del self.jobs[job_id]
            else:
                node["state"] = [s for s in node["state"] if s != "DRAIN"]
                node["reason"] = ""
            return 0, "", ""
        return 1, "", "not in this test"  # e.g. `cat` of the config: no reconfigure here

    def node(self, name, *states, reason=""):
        self.nodes[name] = {"name": name, "state": list(states), "reason": reason, "features": ["compute"]}

    def job(self, job_id, node, requeue=True, external=False):
        """A running job on a node, as squeue --json shows it (EXTERNAL: the bridge's, Kubernetes pods')."""
        self.jobs[job_id] = {"job_id": job_id, "job_state": ["RUNNING"], "nodes": node, "requeue": requeue,
                             "flags": ["EXTERNAL_JOB"] if external else []}
        self.nodes[node]["state"] = sorted((set(self.nodes[node]["state"]) - {"IDLE"}) | {"ALLOCATED"})

    def host(self, name, cordoned, lost_since=None):
        """A Kubernetes node (cluster-scoped); one lost since a time reports Ready Unknown from then."""
        ready = {"type": "Ready", "status": "True"} if lost_since is None else {
            "type": "Ready", "status": "Unknown", "lastTransitionTime": lost_since.strftime("%Y-%m-%dT%H:%M:%SZ")}
        self.objects[("Node", None, name)] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                                              "spec": {"unschedulable": True} if cordoned else {},
                                              "status": {"conditions": [ready]}}

    def pod(self, name, created, ready=True, host="host-a"):
        sts = self.get("apps/v1", "StatefulSet", name.rsplit("-", 1)[0], "research")
        labels = sts["spec"]["template"]["metadata"]["labels"] if sts else {}
        self.objects[("Pod", "research", name)] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "research", "labels": labels,
                         "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ")},
            "spec": {"nodeName": host},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
        }


@pytest.fixture
def world(monkeypatch):
    return make_world(monkeypatch)


def make_world(monkeypatch, kube=None, spec=None):
    """A cpu-only cluster with its objects applied, a controller pod, four idle nodes and their
    pods; `kube` a SlurmKube of the caller's kind, `spec` the cluster's (else replacing drained nodes)."""
    keys = {"ssh_host_ed25519_key": b"k", "ssh_host_ed25519_key.pub": b"p"}
    monkeypatch.setattr(operator_secrets, "new_ssh_host_keys", lambda types: keys)
    kube = kube if kube is not None else SlurmKube()
    raw = example_resources("cpu-only")
    cluster = copy.deepcopy(raw["cluster"])
    cluster["metadata"].update(uid="u-1", generation=1)
    cluster["spec"] = spec if spec is not None else {"healthChecks": {"replaceDrainedNodes": True}}
    for nodeset in raw["nodesets"]:
        kube.apply(nodeset)
    R.Reconciler(kube, clock=lambda: T0).reconcile(cluster)  # objects exist; Slurm is not up yet
    kube.pod("cpu-controller-0", T0 - datetime.timedelta(days=3))
    for i in range(4):
        kube.pod("cpu-compute-%d" % i, T0 - datetime.timedelta(days=2))
        kube.node("cpu-compute-%d" % i, "IDLE")
    kube.objects[("StatefulSet", "research", "cpu-compute")]["status"] = {"readyReplicas": 4}
    return kube, cluster


def reconcile_at(kube, cluster, when):
    return R.Reconciler(kube, clock=lambda: when).reconcile(cluster)


def test_hardware_drained_idle_node_gets_a_new_pod_and_rejoins(world):
    kube, cluster = world
    kube.node("cpu-compute-1", "IDLE", "DRAIN", reason=GPU_REASON)
    kube.node("cpu-compute-2", "IDLE", "DRAIN", reason="slurmkube: gpu 0000:44:00: Xid 79")
    outcome = reconcile_at(kube, cluster, T0)
    # One at a time: compute-1's pod goes, its drain now says why it stays drained.
    assert ("Pod", "research", "cpu-compute-1") not in kube.objects
    assert ("Pod", "research", "cpu-compute-2") in kube.objects
    assert kube.nodes["cpu-compute-1"]["reason"] == "slurmkube: replace since 2026-11-22T12:00:00Z"
    assert R.Event("Normal", "NodeDeletePod", "delete-pod cpu-compute-1: " + GPU_REASON) in outcome.events
    # The StatefulSet made a new pod; slurmd has not registered yet: nothing happens.
    later = T0 + datetime.timedelta(minutes=1)
    kube.pod("cpu-compute-1", later, ready=False)
    kube.node("cpu-compute-1", "IDLE", "DRAIN", "NOT_RESPONDING", reason=kube.nodes["cpu-compute-1"]["reason"])
    reconcile_at(kube, cluster, later)
    assert ("Pod", "research", "cpu-compute-2") in kube.objects
    # Registered and ready: resumed; the next node's turn comes on the next pass.
    kube.pod("cpu-compute-1", later, ready=True)
    kube.node("cpu-compute-1", "IDLE", "DRAIN", reason=kube.nodes["cpu-compute-1"]["reason"])
    reconcile_at(kube, cluster, later + datetime.timedelta(minutes=1))
    assert kube.nodes["cpu-compute-1"]["state"] == ["IDLE"]
    assert ("Pod", "research", "cpu-compute-2") in kube.objects
    reconcile_at(kube, cluster, later + datetime.timedelta(minutes=2))
    assert ("Pod", "research", "cpu-compute-2") not in kube.objects


def test_without_replace_drained_nodes_nothing_is_replaced(world):
    kube, cluster = world
    cluster["spec"] = {}
    kube.node("cpu-compute-1", "IDLE", "DRAIN", reason=GPU_REASON)
    reconcile_at(kube, cluster, T0)
    assert ("Pod", "research", "cpu-compute-1") in kube.objects
    assert kube.nodes["cpu-compute-1"]["reason"] == GPU_REASON


def test_unresponsive_node_is_drained_with_its_checks_reason(world):
    kube, cluster = world
    kube.node("cpu-compute-3", "IDLE", "NOT_RESPONDING")
    kube.reports["cpu-compute-3"] = (1, MUNGE_DOWN + "\n", "")
    outcome = reconcile_at(kube, cluster, T0)
    assert kube.nodes["cpu-compute-3"]["reason"] == "%s %s" % (C.DRAIN_REASON_PREFIX, MUNGE_DOWN)
    assert "DRAIN" in kube.nodes["cpu-compute-3"]["state"]
    assert any(e.reason == "NodeDrain" for e in outcome.events)
    # Responding nodes are not asked at all.
    asked = {e[0] for e in kube.execs if e[1] == C.CONTAINER_WORKER}
    assert asked == {"cpu-compute-3"}
    # Already drained with that reason: no second write.
    kube.execs.clear()
    outcome = reconcile_at(kube, cluster, T0)
    assert not any(e.reason == "NodeDrain" for e in outcome.events)


def test_admin_and_planned_drains_of_unresponsive_nodes_are_not_rewritten(world):
    kube, cluster = world
    kube.node("cpu-compute-2", "IDLE", "DRAIN", "NOT_RESPONDING", reason="admin: reseating the NIC")
    kube.node("cpu-compute-3", "IDLE", "DRAIN", "NOT_RESPONDING",
              reason="slurmkube: update since 2026-11-22T11:59:00Z")
    kube.reports.update({n: (1, MUNGE_DOWN + "\n", "") for n in ("cpu-compute-2", "cpu-compute-3")})
    reconcile_at(kube, cluster, T0)
    assert kube.nodes["cpu-compute-2"]["reason"] == "admin: reseating the NIC"
    assert kube.nodes["cpu-compute-3"]["reason"] == "slurmkube: update since 2026-11-22T11:59:00Z"
    assert not [e for e in kube.execs if e[1] == C.CONTAINER_WORKER]


def test_unresponsive_node_whose_check_passes_is_left_to_slurm(world):
    kube, cluster = world
    kube.node("cpu-compute-0", "IDLE", "NOT_RESPONDING")
    reconcile_at(kube, cluster, T0)
    assert kube.nodes["cpu-compute-0"]["state"] == ["IDLE", "NOT_RESPONDING"]


def test_a_starting_pod_is_not_asked(world):
    kube, cluster = world
    kube.pod("cpu-compute-3", T0, ready=False)  # restarted; slurmd not listening yet
    kube.node("cpu-compute-3", "IDLE", "NOT_RESPONDING")
    kube.reports["cpu-compute-3"] = (1, "slurmd is not running\n", "")
    reconcile_at(kube, cluster, T0)
    assert kube.nodes["cpu-compute-3"]["state"] == ["IDLE", "NOT_RESPONDING"]
    assert not [e for e in kube.execs if e[1] == C.CONTAINER_WORKER]


def nodes_ready(outcome):
    return next(c for c in outcome.status["conditions"] if c["type"] == "NodesReady")


def test_a_scale_down_is_not_ready_until_its_nodes_have_left_slurm(world):
    kube, cluster = world
    done = nodes_ready(reconcile_at(kube, cluster, T0))
    assert done["status"] == "True", done
    for i in (2, 3):
        kube.node("cpu-compute-%d" % i, "ALLOCATED")
    kube.objects[("NodeSet", "research", "compute")]["spec"]["replicas"] = 2
    scaling = nodes_ready(reconcile_at(kube, cluster, T0))
    assert scaling["status"] == "False"
    assert scaling["message"] == "2/2 nodes in service, 2 leaving"
    # The operator removed them from slurmctld: the scale-down is done.
    for i in (2, 3):
        del kube.nodes["cpu-compute-%d" % i]
    done = nodes_ready(reconcile_at(kube, cluster, T0))
    assert done["status"] == "True", done
