"""A pod that runs without being a Slurm node is replaced, so that its node registers again."""

from __future__ import annotations

import datetime

from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_nodes import (
    REGISTRATION_GRACE_SECONDS,
    NodeAction,
    PodView,
    plan_reregistration,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmNode

NOW = datetime.datetime(2026, 11, 22, 5, 0, tzinfo=datetime.timezone.utc)
OLD = NOW - datetime.timedelta(seconds=REGISTRATION_GRACE_SECONDS)


def pod(name: str, created: datetime.datetime = OLD, ready: bool = True, terminating: bool = False) -> PodView:
    return PodView(name, "rev", ready, terminating, created)


def node(name: str) -> SlurmNode:
    return SlurmNode(name, frozenset({"IDLE"}), "", ())


def test_a_ready_pod_missing_from_slurm_after_the_grace_is_replaced():
    plan = plan_reregistration("c-cpu", 2, [pod("c-cpu-0"), pod("c-cpu-1")], {"c-cpu-1": node("c-cpu-1")}, NOW)
    assert plan == [NodeAction("delete-pod", "c-cpu-0", "running but not registered with slurmctld")]


def test_registered_young_unready_or_terminating_pods_are_left_alone():
    young = NOW - datetime.timedelta(seconds=REGISTRATION_GRACE_SECONDS - 1)
    pods = [pod("c-cpu-0"), pod("c-cpu-1", created=young), pod("c-cpu-2", ready=False),
            pod("c-cpu-3", terminating=True), pod("c-cpu-4", created=None)]
    assert plan_reregistration("c-cpu", 5, pods, {"c-cpu-0": node("c-cpu-0")}, NOW) == []


def test_pods_past_the_wanted_ordinals_wait_for_the_statefulset_to_shrink():
    # Scale-down 3 → 1 deleted c-cpu-1 and c-cpu-2 from Slurm; their pods go on the next pass.
    pods = [pod("c-cpu-0"), pod("c-cpu-1"), pod("c-cpu-2")]
    assert plan_reregistration("c-cpu", 1, pods, {"c-cpu-0": node("c-cpu-0")}, NOW) == []
    # The scale-up that interrupts it wants c-cpu-1 again: its pod runs unregistered.
    assert [a.node for a in plan_reregistration("c-cpu", 2, pods, {"c-cpu-0": node("c-cpu-0")}, NOW)] == ["c-cpu-1"]


def test_another_node_sets_pods_do_not_count():
    assert plan_reregistration("c-cpu", 3, [pod("c-big-0")], {}, NOW) == []
