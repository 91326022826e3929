"""Topology from a node label (spec.slurm.switchLabel): the operator reads which machine each
worker runs on and that machine's label, and topology.conf follows pods and labels."""

from __future__ import annotations

import datetime

import pytest
from test_reconcile_health import T0, SlurmKube, make_world

from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R
from ansible_collections.slurmkube.core.plugins.module_utils.operator.topology import switch_placement
from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import (
    hostlist,
    labelled_switches,
    render_config_files,
    render_slurm_conf,
    render_topology_conf,
)

LABEL = "example.com/switch"


def cluster(slurm):
    return parse_cluster({"metadata": {"name": "demo", "namespace": "hpc"}, "spec": {"slurm": slurm}})


@pytest.mark.parametrize("names, expected", [
    (["demo-cpu-0"], "demo-cpu-0"),
    (["demo-cpu-2", "demo-cpu-0", "demo-cpu-1", "demo-cpu-5", "demo-cpu-10"], "demo-cpu-[0-2,5,10]"),
    (["demo-cpu-1", "demo-big-0", "demo-cpu-0"], "demo-big-0,demo-cpu-[0-1]"),
    (["node01", "node02", "login"], "login,node01,node02"),  # zero-padded names are left whole
    (["demo-cpu-3", "demo-cpu-3"], "demo-cpu-3"),
])
def test_node_names_are_written_as_slurm_hostlists(names, expected):
    assert hostlist(names) == expected


def test_one_leaf_per_label_value_under_one_top_switch():
    placement = {"demo-cpu-0": "rack-a", "demo-cpu-1": "rack-b", "demo-cpu-2": "rack-a", "demo-big-0": ""}
    assert labelled_switches(placement) == [
        ("rack-a", "Nodes=demo-cpu-[0,2]"),
        ("rack-b", "Nodes=demo-cpu-1"),
        ("unlabelled", "Nodes=demo-big-0"),
        ("top", "Switches=rack-a,rack-b,unlabelled"),
    ]


def test_a_label_value_named_top_keeps_the_tree_a_tree():
    assert labelled_switches({"demo-cpu-0": "top"}) == [("top", "Nodes=demo-cpu-0"), ("top-up", "Switches=top")]


def test_topology_conf_follows_the_placement_and_enables_the_tree_plugin():
    with_label = cluster({"switchLabel": LABEL})
    text = render_topology_conf(with_label, {"demo-cpu-0": "rack-a", "demo-cpu-1": "rack-b"})
    assert text.splitlines()[-3:] == ["SwitchName=rack-a Nodes=demo-cpu-0", "SwitchName=rack-b Nodes=demo-cpu-1",
                                      "SwitchName=top Switches=rack-a,rack-b"]
    assert "TopologyPlugin=topology/tree" in render_slurm_conf(with_label, [])
    # Before any worker is placed the file is there (topology/tree reads it) with no switch.
    empty = render_config_files(with_label, [])["topology.conf"]
    assert empty.startswith("#") and "SwitchName" not in empty


def test_without_a_label_the_placement_changes_nothing():
    plain = cluster({})
    assert render_config_files(plain, [], {"demo-cpu-0": "rack-a"}) == render_config_files(plain, [])
    assert "TopologyPlugin" not in render_slurm_conf(plain, [])


@pytest.mark.parametrize("slurm, field", [
    ({"switchLabel": LABEL, "topology": [{"name": "leaf", "nodes": "demo-cpu-0"}]}, "spec.slurm.switchLabel"),
    ({"switchLabel": "Rack Switch"}, "spec.slurm.switchLabel"),
    ({"switchLabel": "example.com/"}, "spec.slurm.switchLabel"),
])
def test_bad_switch_labels_are_refused_with_the_field(slurm, field):
    with pytest.raises(SpecError, match=field.replace(".", r"\.")):
        cluster(slurm)


def pod(name, host=None):
    return {"metadata": {"name": name}, "spec": {"nodeName": host} if host else {}}


def host(name, labels=None):
    return {"metadata": {"name": name, "labels": labels or {}}}


def test_each_scheduled_worker_gets_its_machines_label_value():
    pods = [pod("demo-cpu-0", "kind-worker"), pod("demo-cpu-1", "kind-worker2"), pod("demo-cpu-2"),
            pod("demo-cpu-3", "gone-host")]
    hosts = [host("kind-worker", {LABEL: "rack-a"}), host("kind-worker2", {"other": "x"})]
    assert switch_placement(pods, hosts, LABEL) == {"demo-cpu-0": "rack-a", "demo-cpu-1": "", "demo-cpu-3": ""}


class ControllerKube(SlurmKube):
    """SlurmKube whose controller pod reads /etc/slurm from the ConfigMap as the kubelet last
    synced it (`synced`, None: as it is now) and counts its reconfigures."""

    def __init__(self):
        super().__init__()
        self.synced = None
        self.reconfigures = 0

    def files_seen(self, pod):
        """The ConfigMap's files as POD reads them in /etc/slurm."""
        return self.synced if self.synced is not None else self.get(
            "v1", "ConfigMap", "cpu-slurm-config", "research")["data"]

    def exec(self, namespace, pod, container, command, timeout=60):
        if command[0] == "cat":
            files = self.files_seen(pod)
            return 0, "".join(files.get(path.rsplit("/", 1)[1], "") for path in command[1:]), ""
        if command[:2] == ["scontrol", "reconfigure"]:
            self.reconfigures += 1
            return 0, "", ""
        return super().exec(namespace, pod, container, command, timeout)


@pytest.fixture
def labelled_world(monkeypatch):
    """The cpu-only cluster with a switch label, its four workers on two labelled machines."""
    kube, obj = make_world(monkeypatch, ControllerKube(), {"slurm": {"switchLabel": LABEL}})
    for name, rack in (("host-a", "rack-a"), ("host-b", "rack-b")):
        kube.host(name, cordoned=False)
        kube.objects[("Node", None, name)]["metadata"]["labels"] = {LABEL: rack}
    for i in (2, 3):
        kube.pod("cpu-compute-%d" % i, T0 - datetime.timedelta(days=2), host="host-b")
    return kube, obj


def topology_lines(kube, obj):
    config = kube.get("v1", "ConfigMap", names.slurm_config(parse_cluster(obj).name), obj["metadata"]["namespace"])
    return [ln for ln in config["data"].get("topology.conf", "").splitlines() if ln and not ln.startswith("#")]


def test_the_operator_writes_the_workers_switches_and_follows_a_relabelled_machine(labelled_world):
    kube, obj = labelled_world
    R.Reconciler(kube, clock=lambda: T0).reconcile(obj)
    assert topology_lines(kube, obj) == ["SwitchName=rack-a Nodes=cpu-compute-[0-1]",
                                         "SwitchName=rack-b Nodes=cpu-compute-[2-3]",
                                         "SwitchName=top Switches=rack-a,rack-b"]
    kube.objects[("Node", None, "host-b")]["metadata"]["labels"] = {}
    R.Reconciler(kube, clock=lambda: T0).reconcile(obj)
    assert topology_lines(kube, obj) == ["SwitchName=rack-a Nodes=cpu-compute-[0-1]",
                                         "SwitchName=unlabelled Nodes=cpu-compute-[2-3]",
                                         "SwitchName=top Switches=rack-a,unlabelled"]


def topology_ready(outcome):
    return next(c for c in outcome.status["conditions"] if c["type"] == "TopologyReady")


def test_the_cluster_is_ready_only_once_slurmctld_has_read_the_workers_switches(labelled_world):
    """topology/tree refuses every job while no registered node is in its tree: Ready waits for
    the reconfigure that brings the new topology.conf in, which waits for the kubelet's sync."""
    kube, obj = labelled_world
    kube.synced = {}  # the controller pod still reads the files it started with
    outcome = R.Reconciler(kube, clock=lambda: T0).reconcile(obj)
    assert topology_ready(outcome)["status"] == "False" and kube.reconfigures == 0
    ready = next(c for c in outcome.status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and "waiting for slurmctld to read topology.conf" in ready["message"]
    obj["status"] = outcome.status
    kube.synced = None  # the kubelet has synced the ConfigMap
    outcome = R.Reconciler(kube, clock=lambda: T0).reconcile(obj)
    assert topology_ready(outcome)["status"] == "True" and kube.reconfigures == 1
    obj["status"] = outcome.status
    outcome = R.Reconciler(kube, clock=lambda: T0).reconcile(obj)
    assert topology_ready(outcome)["status"] == "True" and kube.reconfigures == 1  # nothing new: no reconfigure


def test_a_cluster_without_topology_has_no_topology_condition(monkeypatch):
    kube, obj = make_world(monkeypatch, ControllerKube())
    outcome = R.Reconciler(kube, clock=lambda: T0).reconcile(obj)
    assert "TopologyReady" not in [c["type"] for c in outcome.status["conditions"]]
