"""Which controller serves, which stand by, failovers seen, and the operator's replacement of
outdated controller pods (operator/controller.py), alone and through a reconcile pass."""

from __future__ import annotations

from types import SimpleNamespace

from memory_kube import MemoryKube
from test_reconcile_health import T0, SlurmKube, make_world, reconcile_at

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R
from ansible_collections.slurmkube.core.plugins.module_utils.operator.controller import (
    controllers_of,
    failover_events,
    next_replacement,
    serving_pod,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import Controllers
from ansible_collections.slurmkube.core.plugins.module_utils.operator.reconfigure import replace_standbys

NEW, OLD = "cpu-controller-new", "cpu-controller-old"


def pod(ordinal, ready=False, running=True, revision=NEW, ready_since="2026-11-29T10:00:00Z", deleting=False):
    meta = {"name": names.controller_pod("cpu", ordinal), "namespace": "research",
            "labels": {**names.object_labels("cpu", C.COMPONENT_CONTROLLER), "controller-revision-hash": revision}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T10:05:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "status": {"phase": "Running" if running else "Pending",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                       "lastTransitionTime": ready_since}]}}


def sts(revision=NEW, generation=2, observed=2):
    return {"metadata": {"name": "cpu-controller", "generation": generation},
            "status": {"observedGeneration": observed, "updateRevision": revision}}


def test_the_ready_controller_serves_and_a_running_one_stands_by():
    c = controllers_of(sts(), [pod(0, ready=True), pod(1)], "cpu", 2)
    assert (c.serving, c.standing_by, c.down, c.outdated) == ("cpu-controller-0", ("cpu-controller-1",), (), ())
    assert c.summary() == {"ready": 2, "desired": 2, "serving": "cpu-controller-0", "standby": ["cpu-controller-1"]}


def test_a_missing_pending_or_deleted_controller_is_down():
    c = controllers_of(sts(), [pod(0, ready=True, deleting=True), pod(1, running=False)], "cpu", 3)
    assert c.serving == "" and c.standing_by == ()
    assert c.down == ("cpu-controller-0", "cpu-controller-1", "cpu-controller-2")
    assert c.summary()["ready"] == 0


def test_of_two_ready_controllers_the_one_ready_last_serves():
    """A stopped node's pod keeps its Ready condition until the node is found gone."""
    stale = pod(0, ready=True, ready_since="2026-11-29T09:00:00Z")
    took_over = pod(1, ready=True, ready_since="2026-11-29T10:00:00Z")
    assert serving_pod([stale, took_over]) == serving_pod([took_over, stale]) == "cpu-controller-1"
    assert serving_pod([pod(0), pod(1)]) == ""


def test_outdated_is_unknown_until_the_statefulset_saw_its_latest_spec():
    assert controllers_of(sts(observed=1), [pod(0, ready=True, revision=OLD)], "cpu", 1).outdated is None
    assert controllers_of(sts(), [pod(0, ready=True, revision=OLD)], "cpu", 1).outdated == ("cpu-controller-0",)


def test_standbys_are_replaced_first_and_the_serving_controller_last():
    both_old = controllers_of(sts(), [pod(0, ready=True, revision=OLD), pod(1, revision=OLD)], "cpu", 2)
    assert next_replacement(both_old) == "cpu-controller-1"
    standby_new = controllers_of(sts(), [pod(0, ready=True, revision=OLD), pod(1)], "cpu", 2)
    assert next_replacement(standby_new) == "cpu-controller-0"
    assert next_replacement(controllers_of(sts(), [pod(0, ready=True), pod(1)], "cpu", 2)) is None
    one = controllers_of(sts(), [pod(0, ready=True, revision=OLD)], "cpu", 1)
    assert next_replacement(one) == "cpu-controller-0"


def test_nothing_is_replaced_while_a_controller_is_down_or_none_serves():
    coming_up = controllers_of(sts(), [pod(0, ready=True, revision=OLD), pod(1, running=False)], "cpu", 2)
    assert next_replacement(coming_up) is None
    none_serves = controllers_of(sts(), [pod(0, revision=OLD), pod(1, revision=OLD)], "cpu", 2)
    assert next_replacement(none_serves) is None
    assert next_replacement(controllers_of(sts(observed=1), [pod(0, ready=True, revision=OLD)], "cpu", 1)) is None
    assert next_replacement(None) is None


def test_the_serving_controller_is_not_replaced_while_a_controller_beyond_the_wanted_ones_leaves():
    """2 -> 1: the StatefulSet removes ordinal 1 (a backup that answers until it stops, which the
    serving one would hand control to); ordinal 0, outdated, waits for it to go."""
    shrinking = controllers_of(sts(), [pod(0, ready=True, revision=OLD), pod(1, revision=OLD)], "cpu", 1)
    assert shrinking.leaving == ("cpu-controller-1",) and shrinking.standing_by == ()
    assert next_replacement(shrinking) is None
    gone = controllers_of(sts(), [pod(0, ready=True, revision=OLD)], "cpu", 1)
    assert gone.leaving == () and next_replacement(gone) == "cpu-controller-0"


def test_a_failover_is_a_warning_naming_both_controllers_once():
    now = Controllers(2, "cpu-controller-1", (), ("cpu-controller-0",), ())
    (event,) = failover_events({"controller": {"serving": "cpu-controller-0"}}, now)
    assert (event.kind, event.reason) == ("Warning", "ControllerFailover")
    assert event.message == "slurmctld on cpu-controller-1 serves; cpu-controller-0 served before"
    assert failover_events({"controller": {"serving": "cpu-controller-1"}}, now) == []
    assert failover_events({}, now) == []
    assert failover_events({"controller": {"serving": "cpu-controller-0"}}, now._replace(serving="")) == []


class HandOverKube(SlurmKube):
    """The health tests' controller; its stop hook sees a backup to hand control to, or not."""

    HAND_OVER = (C.CONTROLLER_STOP_PROGRAM, "--hand-over-to", str(C.SLURMCTLD_PORT))

    def __init__(self):
        super().__init__()
        self.sees_backup = True

    def exec(self, namespace, pod, container, command, timeout=60):
        if tuple(command) == self.HAND_OVER:
            self.execs.append((pod, container, tuple(command)))
            return (0, "1\n", "") if self.sees_backup else (1, "", "")
        return super().exec(namespace, pod, container, command, timeout)


def two_controllers(monkeypatch):
    """The health tests' world (a controller that answers) with a primary and a backup."""
    kube, cluster = make_world(monkeypatch, HandOverKube(), spec={"controller": {"replicas": 2}})
    del kube.objects[("Pod", "research", "cpu-controller-0")]
    controllers = kube.objects[("StatefulSet", "research", "cpu-controller")]
    controllers["metadata"]["generation"] = 2
    controllers["status"] = sts()["status"]
    return kube, cluster


def test_a_pass_replaces_an_outdated_standby_and_reports_who_serves(monkeypatch):
    kube, cluster = two_controllers(monkeypatch)
    for p in (pod(0, ready=True, revision=OLD), pod(1, revision=OLD)):
        kube.apply(p)
    outcome = reconcile_at(kube, cluster, T0)
    assert ("Pod", "research", "cpu-controller-1") not in kube.objects
    assert ("Pod", "research", "cpu-controller-0") in kube.objects
    assert [e.message for e in outcome.events if e.reason == "ControllerReplaced"] == [
        "replacing cpu-controller-1, a standby controller, for its new template"]
    assert outcome.status["controller"] == {"ready": 2, "desired": 2, "serving": "cpu-controller-0",
                                            "standby": ["cpu-controller-1"]}
    ready = next(c for c in outcome.status["conditions"] if c["type"] == "ControllerReady")
    assert (ready["status"], ready["message"]) == ("False", "slurmctld serves on cpu-controller-0; cpu-controller-1 "
                                                   "standing by; cpu-controller-0, cpu-controller-1 to be replaced "
                                                   "for the new template")
    # The replaced standby is down until its new pod runs: nothing else is replaced meanwhile.
    outcome = reconcile_at(kube, dict(cluster, status=outcome.status), T0)
    assert ("Pod", "research", "cpu-controller-0") in kube.objects
    ready = next(c for c in outcome.status["conditions"] if c["type"] == "ControllerReady")
    assert (ready["status"], ready["message"]) == ("False", "slurmctld serves on cpu-controller-0; cpu-controller-1 "
                                                   "not running; cpu-controller-0 to be replaced for the new "
                                                   "template")
    assert "cpu-controller-1 not running" in outcome.status["message"]


def test_controllers_of_the_latest_template_one_serving_the_other_standing_by_are_ready(monkeypatch):
    kube, cluster = two_controllers(monkeypatch)
    kube.apply(pod(0, ready=True))
    kube.apply(pod(1))
    ready = next(c for c in reconcile_at(kube, cluster, T0).status["conditions"] if c["type"] == "ControllerReady")
    assert (ready["status"], ready["message"]) == ("True", "slurmctld serves on cpu-controller-0; cpu-controller-1 "
                                                   "standing by")


def test_a_backup_taking_over_is_a_failover_event_and_the_status_follows(monkeypatch):
    kube, cluster = two_controllers(monkeypatch)
    kube.apply(pod(0, ready=True))
    kube.apply(pod(1))
    first = reconcile_at(kube, cluster, T0)
    assert first.status["controller"]["serving"] == "cpu-controller-0"
    assert not [e for e in first.events if e.reason == "ControllerFailover"]
    kube.apply(pod(0, running=False))
    kube.apply(pod(1, ready=True))
    second = reconcile_at(kube, dict(cluster, status=first.status), T0)
    assert [(e.kind, e.message) for e in second.events if e.reason == "ControllerFailover"] == [
        ("Warning", "slurmctld on cpu-controller-1 serves; cpu-controller-0 served before")]
    assert second.status["controller"]["serving"] == "cpu-controller-1"


def test_the_state_claim_of_an_earlier_release_is_left_as_it_was_made(world):
    """0.3 made it ReadWriteOnce through the StatefulSet's template; access modes never change."""
    kube, cluster = world
    claim = names.controller_state_claim("cpu")
    kube.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim, "namespace": "research"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    outcome = R.Reconciler(kube).reconcile(cluster)
    assert "PersistentVolumeClaim/%s" % claim not in outcome.applied
    assert kube.objects[("PersistentVolumeClaim", "research", claim)]["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_a_new_cluster_gets_a_shared_state_claim_without_an_owner(world):
    kube, cluster = world
    R.Reconciler(kube).reconcile(cluster)
    claim = kube.objects[("PersistentVolumeClaim", "research", names.controller_state_claim("cpu"))]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert "ownerReferences" not in claim["metadata"]


def test_standbys_are_replaced_to_load_a_new_key_set_and_the_serving_controller_is_not():
    kube = MemoryKube()
    for p in (pod(0, ready=True), pod(1), pod(2)):
        kube.apply(p)
    p = SimpleNamespace(kube=kube, cluster=SimpleNamespace(namespace="research"), events=[],
                        controllers=controllers_of(sts(), [pod(0, ready=True), pod(1), pod(2)], "cpu", 3))
    replace_standbys(p)
    assert [key[2] for key in kube.objects if key[0] == "Pod"] == ["cpu-controller-0"]
    assert [e.reason for e in p.events] == ["ControllerReplaced", "ControllerReplaced"]


def test_a_backup_wanted_on_a_state_claim_it_cannot_mount_is_named_in_the_status(monkeypatch):
    kube, cluster = two_controllers(monkeypatch)
    kube.objects[("PersistentVolumeClaim", "research", "state-cpu-controller-0")]["spec"]["accessModes"] = [
        "ReadWriteOnce"]
    kube.apply(pod(0, ready=True))
    ready = next(c for c in reconcile_at(kube, cluster, T0).status["conditions"] if c["type"] == "ControllerReady")
    assert ready["status"] == "False"
    assert ready["message"].endswith("; spec.controller.replicas: the state claim state-cpu-controller-0 is not "
                                     "ReadWriteMany (made by an earlier release): a backup cannot mount it")


def test_the_serving_controller_is_replaced_once_it_sees_a_backup_to_hand_control_to(monkeypatch):
    """1 -> 2: the primary's slurm.conf names the new backup only once the kubelet refreshed it."""
    kube, cluster = two_controllers(monkeypatch)
    kube.apply(pod(0, ready=True, revision=OLD))
    kube.apply(pod(1))
    kube.sees_backup = False
    outcome = reconcile_at(kube, cluster, T0)
    assert ("Pod", "research", "cpu-controller-0") in kube.objects
    assert (("cpu-controller-0", C.CONTAINER_CONTROLLER, HandOverKube.HAND_OVER)) in kube.execs
    ready = next(c for c in outcome.status["conditions"] if c["type"] == "ControllerReady")
    assert ready["message"].endswith("; cpu-controller-0 to be replaced for the new template (cpu-controller-0 once "
                                     "its slurm.conf names a backup that answers, to hand control to)")
    kube.sees_backup = True
    outcome = reconcile_at(kube, dict(cluster, status=outcome.status), T0)
    assert ("Pod", "research", "cpu-controller-0") not in kube.objects
    assert [e.message for e in outcome.events if e.reason == "ControllerReplaced"] == [
        "replacing cpu-controller-0, the serving controller, for its new template"]


def test_a_lone_controller_is_replaced_without_asking_for_a_backup(monkeypatch):
    kube, cluster = make_world(monkeypatch, HandOverKube(), spec={})
    kube.objects[("StatefulSet", "research", "cpu-controller")].update(
        {"metadata": dict(kube.objects[("StatefulSet", "research", "cpu-controller")]["metadata"], generation=2),
         "status": sts()["status"]})
    kube.apply(pod(0, ready=True, revision=OLD))
    reconcile_at(kube, cluster, T0)
    assert ("Pod", "research", "cpu-controller-0") not in kube.objects
    assert not [e for e in kube.execs if e[2] == HandOverKube.HAND_OVER]
