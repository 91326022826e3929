"""The operator's metrics of one pass: bounded labels, a deleted node set's gauges gone, a refused
spec counted apart."""

from __future__ import annotations

from ansible_collections.slurmkube.core.plugins.module_utils.operator.telemetry import (
    cluster_gauges,
    pass_result,
)


def condition(kind, ok):
    return {"type": kind, "status": "True" if ok else "False"}


def test_a_refused_spec_is_its_own_result():
    assert pass_result({"phase": "Ready"}) == "ok"
    assert pass_result({"phase": "Invalid", "message": "bad"}) == "invalid"


def test_gauges_say_where_the_cluster_and_each_node_set_stand():
    status = {"nodes": {"desired": 3, "ready": 2},
              "conditions": [condition("ControllerReady", True), condition("MungeKeyInUse", False),
                             condition("Ready", False)]}
    nodeset_status = {"cpu": {"readyReplicas": 2, "conditions": [condition("Ready", False)]},
                      "gpu": {"readyReplicas": 1, "conditions": [condition("Ready", True)]},
                      "retired": {"readyReplicas": 0}}
    gauges = {(g.name, g.labels): g.value for g in cluster_gauges(status, nodeset_status, {"cpu": 2, "gpu": 1})}
    assert gauges[("cluster_nodes", (("kind", "ready"),))] == 2
    assert gauges[("cluster_ready", ())] == 0
    assert gauges[("controller_ready", ())] == 1
    assert gauges[("munge_key_rotation_pending", ())] == 1
    assert gauges[("nodeset_replicas", (("kind", "desired"), ("node_set", "cpu")))] == 2
    assert gauges[("nodeset_ready", (("node_set", "cpu"),))] == 0
    assert gauges[("nodeset_ready", (("node_set", "gpu"),))] == 1
    # A node set the operator no longer has (its object is gone) has no gauges.
    assert not any(dict(labels).get("node_set") == "retired" for _name, labels in gauges)


def test_gauges_say_which_controller_serves_and_which_part_of_the_control_plane_is_up():
    status = {"controller": {"serving": "c-controller-1", "standby": ["c-controller-0"]},
              "controlPlane": {"controller": True, "rest": False}}
    gauges = {(g.name, g.labels): g.value for g in cluster_gauges(status, {}, {})}
    assert gauges[("controller_serving", (("pod", "c-controller-1"),))] == 1
    assert gauges[("controller_serving", (("pod", "c-controller-0"),))] == 0
    assert gauges[("control_plane_up", (("part", "controller"),))] == 1
    assert gauges[("control_plane_up", (("part", "rest"),))] == 0
    # A part the spec does not ask for has no gauge; with no controller up, no serving gauge.
    bare = {(g.name, g.labels) for g in cluster_gauges({"controller": {"serving": ""}}, {}, {})}
    assert not [name for name, _labels in bare if name in ("control_plane_up", "controller_serving")]
