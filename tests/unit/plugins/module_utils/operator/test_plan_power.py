"""On-demand node sets' decisions (plan_power.py) on Slurm's power states, as slurmctld 26.05 names
them in `scontrol show nodes --json` (slurm_protocol_defs.c)."""

from __future__ import annotations

import datetime

from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_nodes import NodeAction, PodView
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_power import (
    REASON_MAX,
    RESUME_TIMEOUT_REASON,
    plan_node_count,
    plan_power,
    plan_powered_down_updates,
    resume_failed_reason,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmNode
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.drain import (
    PURPOSE_SCALE_DOWN,
    PURPOSE_UPDATE,
    drain_reason,
)

NOW = datetime.datetime(2026, 11, 30, 12, 0, 0, tzinfo=datetime.timezone.utc)
BASE = "hpc-burst"
ASLEEP = ("IDLE", "CLOUD", "POWERED_DOWN")


def node(ordinal, *states, reason=""):
    return SlurmNode("%s-%d" % (BASE, ordinal), frozenset(states), reason, ("burst",))


def nodes(*found):
    return {n.name: n for n in found}


def pod(ordinal, terminating=False, waiting=""):
    return PodView("%s-%d" % (BASE, ordinal), "rev", ready=not terminating and not waiting, terminating=terminating,
                   waiting=waiting)


def test_nothing_to_do_while_every_node_sleeps_and_none_is_kept():
    assert plan_power(BASE, 3, 0, [], nodes(*(node(i, *ASLEEP) for i in range(3)))) == []


def test_a_pod_is_made_for_each_node_slurm_resumes_and_only_once():
    found = nodes(node(0, "ALLOCATED", "CLOUD", "POWERING_UP", "NOT_RESPONDING"),
                  node(1, "ALLOCATED", "CLOUD", "POWERING_UP", "NOT_RESPONDING"), node(2, *ASLEEP))
    assert plan_power(BASE, 3, 0, [pod(1)], found) == [NodeAction("make-pod", BASE + "-0", "Slurm resumed %s-0" % BASE)]


def test_a_pod_waits_for_its_predecessor_to_go_before_it_is_made_again():
    found = nodes(node(0, "ALLOCATED", "CLOUD", "POWERING_UP"))
    assert plan_power(BASE, 1, 0, [pod(0, terminating=True)], found) == []


def test_a_powering_down_node_loses_its_pod_once():
    found = nodes(node(0, "IDLE", "CLOUD", "POWERING_DOWN"), node(1, *ASLEEP))
    assert plan_power(BASE, 2, 0, [pod(0), pod(1, terminating=True)], found) == [
        NodeAction("delete-pod", BASE + "-0", "Slurm powered %s-0 down" % BASE)]


def test_a_suspend_asked_for_keeps_the_pod_until_slurm_powers_the_node_down():
    """POWER_DOWN is Slurm's request, queued: the node still runs until POWERING_DOWN."""
    found = nodes(node(0, "IDLE", "CLOUD", "POWER_DOWN"))
    assert plan_power(BASE, 1, 0, [pod(0)], found) == []


def test_pods_past_the_declared_nodes_go():
    found = nodes(node(0, "IDLE", "CLOUD"))
    assert plan_power(BASE, 1, 0, [pod(0), pod(1)], found) == [
        NodeAction("delete-pod", BASE + "-1", "not one of the set's 1 nodes")]


def test_replicas_are_kept_powered_up_from_the_lowest_free_ordinal():
    found = nodes(node(0, "IDLE", "CLOUD", "POWERED_DOWN", "DRAIN", reason="admin"),
                  node(1, "DOWN", "CLOUD", "POWERED_DOWN", reason="slurmkube: resume failed: x"),
                  node(2, *ASLEEP), node(3, "IDLE", "CLOUD", "POWER_DOWN"), node(4, *ASLEEP), node(5, *ASLEEP))
    actions = plan_power(BASE, 6, 2, [pod(3)], found)
    # Node 3 is being suspended: it does not count as up; drained and DOWN nodes stay asleep.
    assert [a for a in actions if a.kind == "power-up"] == [
        NodeAction("power-up", BASE + "-2", "keeping 2 node(s) powered up"),
        NodeAction("power-up", BASE + "-4", "keeping 2 node(s) powered up")]


def test_replicas_already_up_or_resuming_need_nothing():
    found = nodes(node(0, "IDLE", "CLOUD"), node(1, "IDLE", "CLOUD", "POWERING_UP"), node(2, *ASLEEP))
    actions = plan_power(BASE, 3, 2, [pod(0)], found)
    assert [a.kind for a in actions] == ["make-pod"]


def test_a_failed_resume_is_explained_by_its_pods_words_and_the_pod_goes():
    found = nodes(node(0, "DOWN", "CLOUD", "POWERED_DOWN", reason=RESUME_TIMEOUT_REASON))
    why = "Unschedulable: 0/3 nodes are available: 3 Insufficient memory."
    assert plan_power(BASE, 1, 0, [pod(0, waiting=why)], found) == [
        NodeAction("resume-failed", BASE + "-0", "slurmkube: resume failed: " + why),
        NodeAction("delete-pod", BASE + "-0", "Slurm powered %s-0 down" % BASE)]


def test_a_failed_resume_without_a_pod_says_so_and_an_explained_one_is_left_alone():
    found = nodes(node(0, "DOWN", "CLOUD", "POWERED_DOWN", reason=RESUME_TIMEOUT_REASON),
                  node(1, "DOWN", "CLOUD", "POWERED_DOWN", reason="slurmkube: resume failed: ErrImagePull"))
    assert plan_power(BASE, 2, 0, [], found) == [
        NodeAction("resume-failed", BASE + "-0", "slurmkube: resume failed: no pod registered within Slurm's "
                   "ResumeTimeout")]


def test_a_long_reason_is_cut_for_sinfo():
    reason = resume_failed_reason("ErrImagePull: " + "x" * 500)
    assert len(reason) == REASON_MAX and reason.endswith("...")


def test_a_node_not_yet_known_to_slurmctld_gets_no_pod():
    """Declared in the new file, not yet read by slurmctld (its reconfigure follows the apply)."""
    assert plan_power(BASE, 2, 0, [], nodes(node(1, *ASLEEP))) == []


def test_a_larger_max_declares_more_nodes_at_once_and_resumes_a_scale_down_drain():
    found = nodes(node(0, "IDLE", "CLOUD", "DRAIN", reason=drain_reason(PURPOSE_SCALE_DOWN, NOW)))
    plan = plan_node_count(BASE, 4, 2, found, NOW, 600)
    assert plan.replicas == 4 and plan.actions == [NodeAction("resume", BASE + "-0")] and plan.leaving == []


def test_a_smaller_max_drains_then_powers_down_then_forgets_the_nodes_past_it():
    reason = drain_reason(PURPOSE_SCALE_DOWN, NOW)
    found = nodes(node(0, "IDLE", "CLOUD"), node(1, "ALLOCATED", "CLOUD"),
                  node(2, "IDLE", "CLOUD", "DRAIN", reason=reason), node(3, *ASLEEP))
    plan = plan_node_count(BASE, 1, 4, found, NOW, 600)
    assert plan.actions == [NodeAction("drain", BASE + "-1", reason),
                            NodeAction("power-down", BASE + "-2", "past maxReplicas (1)")]
    # Node 3 sleeps: the file may stop declaring it; node 2 still runs, so 3 nodes stay declared.
    assert plan.replicas == 3 and plan.leaving == [BASE + "-1", BASE + "-2"]


def test_a_smaller_max_waits_for_a_busy_node_then_requeues_after_the_drain_timeout():
    since = NOW - datetime.timedelta(seconds=700)
    found = nodes(node(0, "ALLOCATED", "CLOUD", "DRAIN", reason=drain_reason(PURPOSE_SCALE_DOWN, since)))
    assert plan_node_count(BASE, 0, 1, found, NOW - datetime.timedelta(seconds=200), 600).actions == []
    assert [a.kind for a in plan_node_count(BASE, 0, 1, found, NOW, 600).actions] == ["requeue"]


def test_a_smaller_max_does_not_ask_twice_for_a_power_down():
    found = nodes(node(1, "IDLE", "CLOUD", "DRAIN", "POWERING_DOWN", reason=drain_reason(PURPOSE_SCALE_DOWN, NOW)))
    plan = plan_node_count(BASE, 1, 2, found, NOW, 600)
    assert plan.actions == [] and plan.replicas == 2


def test_powered_down_nodes_drained_for_an_update_are_resumed_their_next_pod_is_new():
    update = drain_reason(PURPOSE_UPDATE, NOW)
    found = nodes(node(0, "IDLE", "CLOUD", "POWERED_DOWN", "DRAIN", reason=update),
                  node(1, "IDLE", "CLOUD", "DRAIN", reason=update),
                  node(2, "IDLE", "CLOUD", "POWERED_DOWN", "DRAIN", reason="admin"))
    assert plan_powered_down_updates(BASE, 3, found) == [NodeAction("resume", BASE + "-0")]
