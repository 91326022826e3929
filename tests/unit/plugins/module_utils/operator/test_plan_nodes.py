"""Scale and update decisions, on node states recorded from a real Slurm 24.11 controller."""

from __future__ import annotations

import datetime

import pytest
from example_clusters import FIXTURES

from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_nodes import (
    NodeAction,
    PodView,
    evictable,
    plan_evictions,
    plan_replacements,
    plan_scale,
    plan_update,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import (
    SlurmControl,
    SlurmError,
    SlurmNode,
    nodes_by_name,
    parse_jobs,
    parse_nodes,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.drain import (
    PURPOSE_EVICTION,
    PURPOSE_REPLACE,
    drain_reason,
    is_hardware_drain,
    parse_drain_reason,
)

NOW = datetime.datetime(2026, 11, 22, 12, 0, 0, tzinfo=datetime.timezone.utc)
RECORDED = FIXTURES / "slurm"


def node(name, *states, reason=""):
    return SlurmNode(name, frozenset(states), reason, ("cpu",))


def ours(purpose, minutes_ago):
    return drain_reason(purpose, NOW - datetime.timedelta(minutes=minutes_ago))


def test_recorded_nodes_parse_with_states_and_reasons():
    nodes = nodes_by_name(parse_nodes((RECORDED / "nodes-draining.json").read_text()))
    busy = nodes["hpc-small-0"]
    assert busy.busy and busy.draining and busy.responding
    assert busy.reason == "slurmkube: scale-down"
    assert busy.features == ("small",)
    idle = nodes["hpc-small-1"]
    assert idle.draining and not idle.busy and idle.reason == "admin: bad dimm"
    drained = nodes_by_name(parse_nodes((RECORDED / "nodes-drained.json").read_text()))
    assert not drained["hpc-small-0"].busy
    gone = nodes_by_name(parse_nodes((RECORDED / "nodes-after-delete.json").read_text()))
    assert set(gone) == {"hpc-small-1"}


def test_recorded_jobs_parse():
    jobs = parse_jobs((RECORDED / "squeue-running.json").read_text())
    assert [(j.job_id, j.nodes) for j in jobs] == [(2, "hpc-small-0")]
    assert "RUNNING" in jobs[0].states


def test_drain_reason_round_trips_and_ignores_admins():
    reason = drain_reason("scale-down", NOW)
    assert reason == "slurmkube: scale-down since 2026-11-22T12:00:00Z"
    assert parse_drain_reason(reason) == ("scale-down", NOW)
    assert parse_drain_reason("admin: bad dimm") is None
    assert parse_drain_reason("slurmkube: scale-down") is None


def test_scale_up_is_immediate_and_resumes_our_scale_down_drains():
    nodes = nodes_by_name([node("c-cpu-0", "IDLE"), node("c-cpu-1", "IDLE", "DRAIN", reason=ours("scale-down", 1)),
                           node("c-cpu-2", "IDLE", "DRAIN", reason="admin: fan")])
    plan = plan_scale("c-cpu", 5, 3, nodes, NOW, 600)
    assert plan.replicas == 5
    assert plan.actions == [NodeAction("resume", "c-cpu-1")]


def test_scale_down_drains_first_and_keeps_pods():
    nodes = nodes_by_name([node("c-cpu-%d" % i, "IDLE") for i in range(3)] + [node("c-cpu-3", "ALLOCATED")])
    plan = plan_scale("c-cpu", 2, 4, nodes, NOW, 600)
    assert plan.replicas == 4
    reason = drain_reason("scale-down", NOW)
    assert plan.actions == [NodeAction("drain", "c-cpu-2", reason), NodeAction("drain", "c-cpu-3", reason)]
    assert plan.leaving == ["c-cpu-2", "c-cpu-3"]


def test_idle_drained_nodes_are_deleted_busy_ones_wait_then_are_requeued():
    nodes = nodes_by_name([
        node("c-cpu-0", "IDLE"),
        node("c-cpu-1", "IDLE", "DRAIN", reason=ours("scale-down", 1)),
        node("c-cpu-2", "MIXED", "DRAIN", reason=ours("scale-down", 5)),
        node("c-cpu-3", "ALLOCATED", "DRAIN", reason=ours("scale-down", 11)),
    ])
    plan = plan_scale("c-cpu", 1, 4, nodes, NOW, 600)
    assert plan.actions == [NodeAction("delete", "c-cpu-1"),
                            NodeAction("requeue", "c-cpu-3", "scale-down: drain timeout of 600s passed")]
    assert plan.replicas == 4


def test_admin_drained_busy_node_is_waited_for_without_requeue():
    nodes = nodes_by_name([node("c-cpu-0", "IDLE"), node("c-cpu-1", "ALLOCATED", "DRAIN", reason="admin: hold")])
    assert plan_scale("c-cpu", 1, 2, nodes, NOW, 0).actions == []


def test_statefulset_shrinks_only_past_nodes_gone_from_slurm():
    nodes = nodes_by_name([node("c-cpu-0", "IDLE"), node("c-cpu-2", "MIXED", "DRAIN", reason=ours("scale-down", 1))])
    plan = plan_scale("c-cpu", 1, 4, nodes, NOW, 600)
    assert plan.replicas == 3  # c-cpu-3 is gone; c-cpu-2 still has a job
    assert plan_scale("c-cpu", 1, 4, nodes_by_name([node("c-cpu-0", "IDLE")]), NOW, 600).replicas == 1


def pod(name, revision="new", ready=True, terminating=False):
    return PodView(name, revision, ready, terminating)


def test_update_replaces_one_outdated_node_at_a_time():
    nodes = nodes_by_name([node("c-cpu-0", "IDLE"), node("c-cpu-1", "ALLOCATED")])
    pods = [pod("c-cpu-0", "old"), pod("c-cpu-1", "old")]
    assert plan_update(pods, "new", nodes, NOW) == [NodeAction("drain", "c-cpu-0", drain_reason("update", NOW))]


def test_update_deletes_the_drained_idle_pod_and_waits_for_busy_ones():
    reason = ours("update", 1)
    idle = nodes_by_name([node("c-cpu-0", "IDLE", "DRAIN", reason=reason), node("c-cpu-1", "IDLE")])
    pods = [pod("c-cpu-0", "old"), pod("c-cpu-1", "old")]
    assert plan_update(pods, "new", idle, NOW) == [NodeAction("delete-pod", "c-cpu-0")]
    busy = nodes_by_name([node("c-cpu-0", "MIXED", "DRAIN", reason=ours("update", 600)), node("c-cpu-1", "IDLE")])
    assert plan_update(pods, "new", busy, NOW) == []


def test_update_resumes_replaced_nodes_and_waits_for_terminating_pods():
    nodes = nodes_by_name([node("c-cpu-0", "IDLE", "DRAIN", reason=ours("update", 3)), node("c-cpu-1", "IDLE")])
    pods = [pod("c-cpu-0", "new"), pod("c-cpu-1", "old", terminating=True)]
    assert plan_update(pods, "new", nodes, NOW) == [NodeAction("resume", "c-cpu-0")]


def test_update_drains_the_next_node_only_once_the_replaced_one_serves_again():
    replaced = node("c-cpu-0", "IDLE", "DRAIN", reason=ours("update", 30))
    pods = [pod("c-cpu-0", "new", ready=False), pod("c-cpu-1", "old")]
    assert plan_update(pods, "new", nodes_by_name([replaced, node("c-cpu-1", "IDLE")]), NOW) == []
    # Its new pod serves: it is resumed, and the next node drained, in one pass.
    back = [pod("c-cpu-0", "new"), pod("c-cpu-1", "old")]
    assert plan_update(back, "new", nodes_by_name([replaced, node("c-cpu-1", "IDLE")]), NOW) == [
        NodeAction("resume", "c-cpu-0"), NodeAction("drain", "c-cpu-1", drain_reason("update", NOW))]


def test_update_stops_at_a_replaced_node_that_does_not_answer():
    """A configuration that keeps slurmd from starting takes out one node, not the node set."""
    silent = node("c-cpu-0", "DOWN", "DRAIN", "NOT_RESPONDING", reason=ours("update", 900))
    pods = [pod("c-cpu-0", "new"), pod("c-cpu-1", "old"), pod("c-cpu-2", "old")]
    assert plan_update(pods, "new", nodes_by_name([silent, node("c-cpu-1", "IDLE"), node("c-cpu-2", "IDLE")]),
                       NOW) == []


def test_update_deletes_pods_whose_node_never_registered():
    assert plan_update([pod("c-cpu-0", "old", ready=False)], "new", {}, NOW) == [NodeAction("delete-pod", "c-cpu-0")]


def test_control_builds_commands_and_reports_failures():
    calls = []

    def run(argv):
        calls.append(list(argv))
        if argv[1] == "delete":
            return 1, "", "delete_node nodename=x: Invalid node name specified\n"
        return 0, (RECORDED / "nodes-drained.json").read_text(), ""

    control = SlurmControl(run)
    control.drain(["a", "b"], "slurmkube: scale-down since 2026-11-22T12:00:00Z")
    assert calls[-1] == ["scontrol", "update", "nodename=a,b", "state=drain",
                         "reason=slurmkube: scale-down since 2026-11-22T12:00:00Z"]
    assert [n.name for n in control.nodes()] == ["hpc-small-0", "hpc-small-1"]
    control.resume([])
    assert len(calls) == 2
    with pytest.raises(SlurmError, match="Invalid node name specified"):
        control.delete(["x"])


# --------------------------------------------------------------------------- replacement

GPU_REASON = "slurmkube: gpu 00000000:34:00.0: 1 uncorrectable ECC errors (max 0)"
OLD = NOW - datetime.timedelta(days=2)


def running(name, created=OLD, ready=True, terminating=False):
    return PodView(name, "rev-1", ready, terminating, created)


@pytest.mark.parametrize(("reason", "hardware"), [
    (GPU_REASON, True),
    ("slurmkube: 1 of 8 GPUs visible to nvidia-smi", True),
    ("slurmkube: gpu 0000:44:00: Xid 79", True),
    ("slurmkube: scratch /mnt/slurmkube/tmp: 10 MiB free (0.1%), need 1024 MiB and 5%", True),
    ("slurmkube: clock 75 s off slurmctld's (max 60 s)", True),
    ("slurmkube: long check: memory bandwidth 512 MiB/s < 1000 MiB/s", True),
    ("slurmkube: long check: all-reduce bus bandwidth 4.00 GB/s < 10.00 GB/s", True),
    ("slurmkube: long check: latency to c-cpu-1 2500 us > 1000 us", True),
    ("slurmkube: long check: 1 CPUs did not hash 256 MiB each within 0.01 s", True),
    ("slurmkube: munged does not answer on /run/munge/munge.socket.2", False),
    ("slurmkube: jail not readable (/mnt/jail/.slurmkube-jail missing or hung)", False),
    ("slurmkube: memory pressure: all tasks stalled 80.0% of the last minute (max 50%)", False),
    ("slurmkube: jail not readable (x); gpu 0000:44:00: Xid 79", True),
    ("slurmkube: scale-down since 2026-11-22T12:00:00Z", False),
    ("admin: gpu 3 is flaky", False),
])
def test_hardware_reasons_are_told_from_software_and_admins(reason, hardware):
    assert is_hardware_drain(reason) is hardware


def test_idle_hardware_drained_node_is_replaced_one_at_a_time():
    nodes = nodes_by_name([node("g-0", "IDLE", "DRAIN", reason=GPU_REASON),
                           node("g-1", "IDLE", "DRAIN", reason="slurmkube: gpu 0000:44:00: Xid 79"),
                           node("g-2", "IDLE")])
    actions = plan_replacements([running("g-0"), running("g-1"), running("g-2")], nodes, NOW)
    assert actions == [NodeAction("drain", "g-0", "slurmkube: replace since 2026-11-22T12:00:00Z"),
                       NodeAction("delete-pod", "g-0", GPU_REASON)]


def test_busy_admin_and_software_drains_are_left_alone():
    nodes = nodes_by_name([node("g-0", "MIXED", "DRAIN", reason=GPU_REASON),
                           node("g-1", "IDLE", "DRAIN", reason="admin: gpu 3 is flaky"),
                           node("g-2", "IDLE", "DRAIN", reason="slurmkube: munged does not answer on /run/munge/x"),
                           node("g-3", "IDLE", reason=GPU_REASON)])  # not drained (resumed by hand)
    assert plan_replacements([running("g-%d" % i) for i in range(4)], nodes, NOW) == []


def test_replacement_waits_for_the_new_pod_then_resumes():
    since = NOW - datetime.timedelta(minutes=2)
    replacing = node("g-0", "IDLE", "DRAIN", "NOT_RESPONDING", reason=drain_reason(PURPOSE_REPLACE, since))
    other = node("g-1", "IDLE", "DRAIN", reason=GPU_REASON)
    nodes = nodes_by_name([replacing, other])
    # The old pod is going: wait, and start no other replacement meanwhile.
    assert plan_replacements([running("g-0", terminating=True), running("g-1")], nodes, NOW) == []
    # The new pod runs but slurmd has not registered yet.
    assert plan_replacements([running("g-0", created=NOW, ready=False), running("g-1")], nodes, NOW) == []
    # Registered and ready: resume it; the next node waits for the next pass.
    registered = nodes_by_name([replacing._replace(states=frozenset({"IDLE", "DRAIN"})), other])
    assert plan_replacements([running("g-0", created=NOW), running("g-1")], registered, NOW) == [
        NodeAction("resume", "g-0")]


def test_an_old_pod_still_there_is_deleted_again():
    since = NOW - datetime.timedelta(minutes=2)
    nodes = nodes_by_name([node("g-0", "IDLE", "DRAIN", reason=drain_reason(PURPOSE_REPLACE, since))])
    assert plan_replacements([running("g-0", created=OLD)], nodes, NOW) == [NodeAction("delete-pod", "g-0")]


# ---------------------------------------------------------------------------- evictions


def worker(name, ready=True, terminating=False, leaving_host=False):
    return PodView(name, "r1", ready, terminating, NOW - datetime.timedelta(hours=1), leaving_host=leaving_host)


def test_an_idle_or_unregistered_node_may_be_evicted_a_busy_one_may_not():
    assert evictable(node("c-cpu-0", "IDLE"))
    assert evictable(node("c-cpu-0", "IDLE", "DRAIN", reason="admin: later"))
    assert evictable(None)
    for busy in ("ALLOCATED", "MIXED", "COMPLETING"):
        assert not evictable(node("c-cpu-0", busy))


def test_workers_on_a_leaving_host_are_drained_for_eviction_others_and_other_drains_are_not():
    nodes = nodes_by_name([
        node("c-cpu-0", "MIXED"),
        node("c-cpu-1", "IDLE"),
        node("c-cpu-2", "ALLOCATED", "DRAIN", reason="admin: bad fan"),
        node("c-cpu-3", "ALLOCATED", "DRAIN", reason=ours("update", 30)),
        node("c-cpu-4", "MIXED"),
    ])
    pods = [worker("c-cpu-%d" % i, leaving_host=i < 4) for i in range(5)]
    reason = "slurmkube: kubernetes eviction since 2026-11-22T12:00:00Z"
    assert plan_evictions(pods, nodes, NOW, 600) == [
        NodeAction("drain", "c-cpu-0", reason), NodeAction("drain", "c-cpu-1", reason)]
    assert parse_drain_reason(reason) == (PURPOSE_EVICTION, NOW)


def test_an_eviction_drain_requeues_only_after_the_timeout():
    nodes = nodes_by_name([
        node("c-cpu-0", "MIXED", "DRAIN", reason=ours(PURPOSE_EVICTION, 9)),
        node("c-cpu-1", "MIXED", "DRAIN", reason=ours(PURPOSE_EVICTION, 10)),
        node("c-cpu-2", "IDLE", "DRAIN", reason=ours(PURPOSE_EVICTION, 60)),
    ])
    pods = [worker("c-cpu-%d" % i, leaving_host=True) for i in range(3)]
    assert plan_evictions(pods, nodes, NOW, 600) == [
        NodeAction("requeue", "c-cpu-1", "kubernetes eviction: drain timeout of 600s passed")]


def test_an_eviction_drain_is_lifted_once_the_pod_serves_on_a_host_that_stays():
    drained = ours(PURPOSE_EVICTION, 5)
    nodes = nodes_by_name([
        node("c-cpu-0", "IDLE", "DRAIN", reason=drained),  # new pod, ready, elsewhere
        node("c-cpu-1", "IDLE", "DRAIN", "NOT_RESPONDING", reason=drained),  # new pod, slurmd starting
        node("c-cpu-2", "IDLE", "DRAIN", reason=drained),  # still on the leaving host
        node("c-cpu-3", "IDLE", "DRAIN", reason=drained),  # its pod is being stopped
    ])
    pods = [worker("c-cpu-0"), worker("c-cpu-1", ready=False), worker("c-cpu-2", leaving_host=True),
            worker("c-cpu-3", terminating=True)]
    assert plan_evictions(pods, nodes, NOW, 600) == [NodeAction("resume", "c-cpu-0")]
