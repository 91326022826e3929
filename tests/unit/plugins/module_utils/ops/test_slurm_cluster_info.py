"""slurm_cluster_info's reading of Slurm 24.11 JSON (shapes taken from a real slurmctld) and of the cluster."""

from __future__ import annotations

import json

import pytest
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_cluster_info import (
    ClusterInfoError,
    gather,
    listed,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmControl
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.facts import (
    default_partitions,
    job_facts,
    node_facts,
    number,
    partition_facts,
    slurm_facts,
)

UNSET = {"set": False, "infinite": False, "number": 0}
NODES = json.dumps({"nodes": [
    {"name": "n2", "state": ["IDLE", "DRAIN"], "reason": "bad disk", "cpus": 2, "alloc_cpus": 0,
     "real_memory": 1000, "partitions": ["main", "big"], "features": ["cpu"], "active_features": ["cpu"],
     "free_mem": UNSET},
    {"name": "n1", "state": ["ALLOCATED"], "reason": "", "cpus": 2, "alloc_cpus": 2, "real_memory": 1000,
     "partitions": ["main"], "features": ["cpu"], "active_features": ["cpu"]},
], "meta": {"slurm": {"version": {"major": "26", "micro": "5", "minor": "05"}, "release": "26.05.5"}}})
PARTITIONS = json.dumps({"partitions": [
    {"name": "main", "nodes": {"allowed_allocation": "", "configured": "n[1-2]", "total": 2}, "node_sets": "cpu,big",
     "partition": {"state": ["UP"]}, "cpus": {"task_binding": 0, "total": 4},
     "maximums": {"time": {"set": False, "infinite": True, "number": 0}}},
    {"name": "big", "nodes": {"allowed_allocation": "", "configured": "n2", "total": 1}, "node_sets": "",
     "partition": {"state": ["UP"]}, "cpus": {"task_binding": 0, "total": 2},
     "maximums": {"time": {"set": True, "infinite": False, "number": 60}}},
]})
PARTITION_LINES = ("PartitionName=main AllowGroups=ALL Default=YES QoS=N/A\n"
                   "PartitionName=big AllowGroups=ALL Default=NO QoS=N/A\n")
JOBS = json.dumps({"jobs": [
    {"job_id": 7, "name": "train", "user_name": "alice", "job_state": ["RUNNING"], "nodes": "n1",
     "partition": "main", "state_reason": "None", "node_count": {"set": True, "infinite": False, "number": 1}},
    {"job_id": 3, "name": "myjob", "user_name": "root", "job_state": ["PENDING"], "nodes": "", "partition": "big",
     "state_reason": "ReqNodeNotAvail", "node_count": {"set": True, "infinite": False, "number": 1}},
]})


def test_slurm_numbers_plain_or_wrapped():
    assert number(4) == 4 and number({"set": True, "infinite": False, "number": 60}) == 60
    assert number(UNSET) is None and number({"set": True, "infinite": True, "number": 0}) is None
    assert number(None) is None and number(True) is None


def test_nodes_keep_every_state_flag_and_reason():
    nodes = node_facts(NODES)
    assert [n["name"] for n in nodes] == ["n1", "n2"]
    assert nodes[1] == {"name": "n2", "state": ["IDLE", "DRAIN"], "reason": "bad disk", "cpus": 2, "alloc_cpus": 0,
                        "real_memory_mb": 1000, "partitions": ["main", "big"], "features": ["cpu"]}


def test_partitions_with_default_node_sets_and_time_limit():
    parts = partition_facts(PARTITIONS, default_partitions(PARTITION_LINES))
    assert parts[0] == {"name": "main", "state": ["UP"], "default": True, "nodes": "n[1-2]", "total_nodes": 2,
                        "total_cpus": 4, "node_sets": ["cpu", "big"], "max_time_minutes": None}
    assert parts[1]["default"] is False and parts[1]["node_sets"] == [] and parts[1]["max_time_minutes"] == 60


def test_jobs_by_id_with_user_state_and_nodes():
    jobs = job_facts(JOBS)
    assert [j["job_id"] for j in jobs] == [3, 7]
    assert jobs[1] == {"job_id": 7, "name": "train", "user": "alice", "state": ["RUNNING"], "state_reason": "None",
                       "partition": "main", "nodes": "n1", "node_count": 1}


def answers(argv):
    table = {"nodes": NODES, "partitions": PARTITIONS, "--json": JOBS}
    if "--oneliner" in argv:
        return 0, PARTITION_LINES, ""
    return 0, table["nodes" if "nodes" in argv else "partitions" if "partitions" in argv else "--json"], ""


def test_slurm_facts_count_nodes_by_state_and_can_skip_jobs():
    facts = slurm_facts(SlurmControl(answers), include_jobs=False)
    assert facts["nodes_by_state"] == {"idle": 1, "drain": 1, "allocated": 1}
    assert facts["jobs"] == [] and len(facts["partitions"]) == 2
    assert facts["slurm_version"] == "26.05.5"  # the answer's meta.slurm.release


class KubeWithController(MemoryKube):
    def __init__(self, ready: bool, runner=answers):
        super().__init__()
        self.runner = runner
        self.apply({"apiVersion": "slurmkube.io/v1alpha1", "kind": "SlurmCluster",
                    "metadata": {"name": "demo", "namespace": "hpc"}, "spec": {}, "status": {"phase": "Ready"}})
        labels = names.selector_labels("demo", C.COMPONENT_CONTROLLER)
        self.apply({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "demo-controller-0", "namespace": "hpc", "labels": labels},
                    "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}})

    def exec(self, namespace, pod, container, argv, timeout=60):
        assert (pod, container) == ("demo-controller-0", "slurmctld")
        return self.runner(argv)


def test_gather_reads_status_and_slurm_without_writing():
    kube = KubeWithController(ready=True)
    writes = kube.writes
    facts = gather(kube, "demo", "hpc", include_jobs=True)
    assert facts["slurm_reachable"] is True and facts["status"] == {"phase": "Ready"}
    assert [j["user"] for j in facts["jobs"]] == ["root", "alice"]
    assert kube.writes == writes


def test_a_cluster_still_starting_still_returns_its_status():
    facts = gather(KubeWithController(ready=False), "demo", "hpc", include_jobs=True)
    assert facts["slurm_reachable"] is False and facts["nodes"] == []
    assert facts["slurm_error"] == "no ready controller pod of SlurmCluster hpc/demo"
    down = gather(KubeWithController(ready=True, runner=lambda argv: (1, "", "Unable to contact slurm controller")),
                  "demo", "hpc", include_jobs=True)
    assert "Unable to contact slurm controller" in down["slurm_error"]


def test_an_unknown_cluster_fails_naming_the_option():
    with pytest.raises(ClusterInfoError, match=r"^name: no SlurmCluster nosuch in namespace hpc$"):
        gather(MemoryKube(), "nosuch", "hpc", include_jobs=True)


def test_a_listing_names_the_namespaces_clusters_without_asking_slurm():
    kube = KubeWithController(ready=True, runner=lambda argv: pytest.fail("Slurm asked: %s" % argv))
    for name, namespace in (("alpha", "hpc"), ("zeta", "other")):
        kube.apply({"apiVersion": "slurmkube.io/v1alpha1", "kind": "SlurmCluster",
                    "metadata": {"name": name, "namespace": namespace}, "spec": {"login": {}}})
    clusters = listed(kube, "hpc")
    assert [(c["name"], c["namespace"]) for c in clusters] == [("alpha", "hpc"), ("demo", "hpc")]
    assert clusters[0]["spec"] == {"login": {}} and clusters[0]["status"] == {}
    assert clusters[1]["status"] == {"phase": "Ready"}
    assert listed(kube, "empty") == []
