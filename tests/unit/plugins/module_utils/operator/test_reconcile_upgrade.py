"""A new controller image reaches a running cluster only through its pre-flight Job: the
decisions, against an in-memory API (the k8s tier runs the real Job and slurmctld)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import NamedTuple

import pytest
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_upgrade import (
    first_stage,
    preflight_result,
    slurm_release,
    staged_images,
    upgrade_refusal,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.upgrade import (
    JOB_NAME_LABEL,
    advance,
    refusal_of,
    release_of,
    written_by,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmControl

NEW_IMAGE = "registry.example/slurmkube/controller:26.05.5-1"
NEW_WORKER = "registry.example/slurmkube/worker:26.05.5-1"


@pytest.mark.parametrize(("running", "new"), [
    ("24.11.5", "26.05.5"),  # three majors on: 24.11 counts three back
    ("25.11.8", "26.05.5"),
    ("26.05.5", "26.05.5"),
    ("26.05.5", "26.05.2"),  # a patch back within a major
    ("23.02.7", "23.11.1"),
    ("", "26.05.5"),  # slurmctld never answered: nothing recorded to lose
])
def test_slurm_allows_these_jumps(running, new):
    assert upgrade_refusal(running, new) is None


@pytest.mark.parametrize(("running", "new", "says"), [
    ("24.05.4", "26.05.5", "reads the state of the 3 major releases before it, and 24.05.4 is 4 behind"),
    ("22.05.11", "23.11.1", "reads the state of the 2 major releases before it, and 22.05.11 is 3 behind"),
    ("26.05.5", "25.11.8", "an older major release cannot read a newer one's state"),
    ("26.05.5", "", "reported no Slurm release"),
])
def test_slurm_refuses_these_jumps_saying_why(running, new, says):
    assert says in upgrade_refusal(running, new)


def test_a_release_is_read_from_what_the_commands_print():
    assert slurm_release("slurm-wlm 26.05.5") == (26, 5, 5)
    assert slurm_release("slurm 24.11.5\n") == (24, 11, 5)
    assert slurm_release("no release here") is None


def finished_job(kind: str, reason: str = "", message: str = "") -> dict:
    return {"status": {"conditions": [{"type": kind, "status": "True", "reason": reason, "message": message}]}}


def preflight_pod(message: str, created: str = "2026-11-28T10:00:00Z") -> dict:
    return {"metadata": {"creationTimestamp": created},
            "status": {"containerStatuses": [{"state": {"terminated": {"message": message}}}]}}


def test_a_running_job_is_not_finished():
    assert not preflight_result({"status": {"active": 1}}, []).finished


def test_a_passed_job_gives_the_images_release():
    result = preflight_result(finished_job("Complete"), [preflight_pod("version=26.05.5\n")])
    assert result.finished and result.passed and result.version == "26.05.5"


def test_a_failed_job_gives_slurmctlds_words_from_the_newest_pod():
    pods = [preflight_pod("version=26.05.5\nerror=old", "2026-11-28T09:00:00Z"),
            preflight_pod("version=26.05.5\nerror=fatal: Invalid SchedulerType: sched/nope")]
    result = preflight_result(finished_job("Failed", "BackoffLimitExceeded"), pods)
    assert result.finished and not result.passed
    assert result.error == "fatal: Invalid SchedulerType: sched/nope"


def test_a_job_that_failed_without_a_word_says_how_kubernetes_saw_it():
    result = preflight_result(finished_job("Failed", "DeadlineExceeded", "Job was active longer than specified"), [])
    assert result.error == "the pre-flight Job failed (DeadlineExceeded: Job was active longer than specified)"


# ------------------------------------------------------------------------- the pass, in memory


def next_pass(kube: MemoryKube, cluster: dict, **spec_images) -> tuple:
    """A pass over the cluster with its last status (and the images changed); the outcome and the
    cluster as the next pass reads it."""
    images = dict(cluster["spec"].get("images") or {}, **spec_images)
    cluster = dict(cluster, spec=dict(cluster["spec"], images=images))
    outcome = R.Reconciler(kube).reconcile(cluster)
    return outcome, dict(cluster, status=outcome.status)


def controller_image(kube: MemoryKube) -> str:
    sts = kube.objects[("StatefulSet", "research", "cpu-controller")]
    return sts["spec"]["template"]["spec"]["containers"][0]["image"]


def preflight_jobs(kube: MemoryKube) -> list:
    return [key[2] for key in kube.objects if key[0] == "Job" and C.COMPONENT_PREFLIGHT in key[2]]


def condition_of(status: dict, kind: str) -> dict:
    return next(c for c in status["conditions"] if c["type"] == kind)


def finish_preflight(kube: MemoryKube, name: str, kind: str, message: str) -> None:
    kube.objects[("Job", "research", name)]["status"] = finished_job(kind)["status"]
    pod = preflight_pod(message)
    pod.update(apiVersion="v1", kind="Pod")
    pod["metadata"].update(name=name + "-x1", namespace="research", labels={JOB_NAME_LABEL: name})
    kube.apply(pod)


class Upgrading(NamedTuple):
    kube: MemoryKube
    cluster: dict  # as the next pass reads it
    outcome: R.Outcome  # of the pass that started the pre-flight
    old_image: str


@pytest.fixture
def upgrading(world) -> Upgrading:
    """A running cluster, then its controller image changed: the pass that starts the pre-flight."""
    kube, cluster = world
    first, cluster = next_pass(kube, cluster)
    old_image = controller_image(kube)
    assert first.status["slurm"]["images"]["controller"] == old_image and first.status["slurm"]["version"] == ""
    outcome, cluster = next_pass(kube, cluster, controller=NEW_IMAGE)
    return Upgrading(kube, cluster, outcome, old_image)


def test_a_new_controller_image_starts_its_preflight_and_changes_nothing_else(upgrading):
    kube, outcome, old_image = upgrading.kube, upgrading.outcome, upgrading.old_image
    [name] = preflight_jobs(kube)
    job = kube.objects[("Job", "research", name)]
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == NEW_IMAGE
    assert {"name": C.ENV_ROLE, "value": C.ROLE_PREFLIGHT} in pod["containers"][0]["env"]
    assert pod["hostname"] == "cpu-controller-0"  # the host SlurmctldHost names
    assert "volumeMounts" in pod["containers"][0] and "munge" not in str(pod["volumes"])  # no cluster key
    config = kube.objects[("ConfigMap", "research", name)]["data"]
    assert config["slurm.conf"] == kube.objects[("ConfigMap", "research", "cpu-slurm-config")]["data"]["slurm.conf"]
    assert job["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert outcome.applied == [] and controller_image(kube) == old_image
    assert [e.reason for e in outcome.events] == ["PreFlight"]
    held = condition_of(outcome.status, "SlurmImageInUse")
    assert (held["status"], held["reason"]) == ("False", "PreFlight") and name in held["message"]
    assert outcome.status["slurm"]["images"]["controller"] == old_image
    assert outcome.status["slurm"]["preflight"] == name and "rollout" not in outcome.status["slurm"]
    assert outcome.status["phase"] != "Ready"


def test_a_preflight_still_running_holds_the_cluster_as_it_is(upgrading):
    kube, old_image = upgrading.kube, upgrading.old_image
    writes = kube.writes
    outcome = next_pass(kube, upgrading.cluster)[0]
    assert kube.writes == writes and outcome.events == [] and controller_image(kube) == old_image


def test_a_failed_preflight_refuses_the_image_once_saying_slurmctlds_words(upgrading):
    kube, old_image = upgrading.kube, upgrading.old_image
    [name] = preflight_jobs(kube)
    finish_preflight(kube, name, "Failed", "version=26.05.5\nerror=fatal: Invalid SchedulerType: sched/nope")
    refused, cluster = next_pass(kube, upgrading.cluster)
    [warning] = refused.events
    assert (warning.kind, warning.reason) == ("Warning", "UpgradeRefused")
    assert "fatal: Invalid SchedulerType: sched/nope" in warning.message and NEW_IMAGE in warning.message
    assert condition_of(refused.status, "SlurmImageInUse")["reason"] == "UpgradeRefused"
    assert refused.status["slurm"]["refusal"] == warning.message
    assert controller_image(kube) == old_image
    again = next_pass(kube, cluster)[0]
    assert again.events == [] and controller_image(kube) == old_image


def worker_image(kube: MemoryKube) -> str:
    sts = kube.objects[("StatefulSet", "research", "cpu-compute")]
    return sts["spec"]["template"]["spec"]["containers"][0]["image"]


def test_a_passed_preflight_rolls_slurmctld_first_and_holds_the_workers(upgrading):
    kube = upgrading.kube
    old_worker = worker_image(kube)
    [name] = preflight_jobs(kube)
    finish_preflight(kube, name, "Complete", "version=26.05.5")
    outcome = next_pass(kube, upgrading.cluster, worker=NEW_WORKER)[0]
    assert controller_image(kube) == NEW_IMAGE and worker_image(kube) == old_worker
    assert "StatefulSet/cpu-controller" in outcome.applied
    assert [e.reason for e in outcome.events] == ["Upgrade"]
    slurm = outcome.status["slurm"]
    assert slurm["images"]["controller"] == upgrading.old_image  # in effect: not yet serving
    assert slurm["rollout"] == {"stage": "controller", "version": "26.05.5",
                                "images": dict(slurm["images"], controller=NEW_IMAGE, worker=NEW_WORKER)}
    held = condition_of(outcome.status, "SlurmImageInUse")
    assert (held["status"], held["reason"]) == ("False", "Upgrading")
    assert preflight_jobs(kube) == [] and ("ConfigMap", "research", name) not in kube.objects


def test_a_jump_slurm_does_not_allow_is_refused_though_slurmctld_started(upgrading):
    kube, cluster, old_image = upgrading.kube, upgrading.cluster, upgrading.old_image
    [name] = preflight_jobs(kube)
    cluster = dict(cluster, status=dict(cluster["status"], slurm=dict(cluster["status"]["slurm"], version="24.05.4")))
    finish_preflight(kube, name, "Complete", "version=26.05.5")
    outcome = next_pass(kube, cluster)[0]
    assert "24.05.4 is 4 behind" in outcome.status["slurm"]["refusal"]
    assert controller_image(kube) == old_image


def test_going_back_to_the_running_image_ends_the_wait_and_removes_the_preflight(upgrading):
    kube = upgrading.kube
    outcome = next_pass(kube, upgrading.cluster, controller=upgrading.old_image)[0]
    assert preflight_jobs(kube) == []
    assert condition_of(outcome.status, "SlurmImageInUse")["status"] == "True"


def test_another_configuration_during_a_refusal_gets_a_preflight_of_its_own(upgrading):
    kube = upgrading.kube
    [first] = preflight_jobs(kube)
    finish_preflight(kube, first, "Failed", "version=26.05.5\nerror=fatal: bad")
    cluster = next_pass(kube, upgrading.cluster)[1]
    cluster["spec"]["slurm"] = {"config": {"MaxJobCount": 5000}}
    outcome = next_pass(kube, cluster)[0]
    [second] = preflight_jobs(kube)
    assert second != first and [e.reason for e in outcome.events] == ["PreFlight"]
    assert "MaxJobCount=5000" in kube.objects[("ConfigMap", "research", second)]["data"]["slurm.conf"]


def pass_with_controller_pod(image: str) -> SimpleNamespace:
    """What release_of reads of a pass: slurmctld answering 26.05.5, its pod running IMAGE."""
    kube = MemoryKube()
    kube.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cpu-controller-0", "namespace": "research"},
                "spec": {"containers": [{"name": "slurmctld", "image": image}]}})
    slurm = SlurmControl(lambda argv: (0, "slurm-wlm 26.05.5\n", "") if argv == ["scontrol", "version"]
                         else (1, "", "unexpected"))
    return SimpleNamespace(kube=kube, slurm=slurm, cluster=SimpleNamespace(name="cpu", namespace="research"))


def test_the_release_is_read_from_a_controller_pod_of_the_image_recorded():
    assert release_of(pass_with_controller_pod(NEW_IMAGE), NEW_IMAGE) == "26.05.5"


def test_a_controller_pod_of_an_earlier_image_does_not_give_the_release():
    """A cluster of an earlier operator adopts the image asked for; its old pod, about to roll,
    would report the old release."""
    assert release_of(pass_with_controller_pod("slurmkube/controller:old"), NEW_IMAGE) == ""


# ------------------------------------------------------------------ Slurm's order, stage by stage

OLD = {"slurmdbd": "dbd:1", "controller": "ctl:1", "worker": "wrk:1", "login": "log:1", "jail": "jail:1",
       "exporter": "exp:1"}
NEW = {key: image.replace(":1", ":2") for key, image in OLD.items()}


def test_each_stage_holds_what_slurms_order_puts_after_it():
    assert staged_images(OLD, NEW, "slurmdbd") == dict(OLD, slurmdbd="dbd:2")
    assert staged_images(OLD, NEW, "controller") == dict(OLD, slurmdbd="dbd:2", controller="ctl:2")
    assert staged_images(OLD, NEW, None) == NEW


def test_a_rollout_starts_with_slurmdbd_only_where_the_cluster_runs_it_and_it_changes():
    assert first_stage(True, OLD, NEW) == "slurmdbd"
    assert first_stage(False, OLD, NEW) == "controller"
    assert first_stage(True, OLD, dict(NEW, slurmdbd="dbd:1")) == "controller"


def statefulset(name: str, image: str, ready: bool = True) -> dict:
    revision = "r2" if ready else "r1"
    metadata = {"name": name, "namespace": "prod", "generation": 2}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": metadata,
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "main", "image": image}]}}},
            "status": {"observedGeneration": 2, "readyReplicas": 1, "currentRevision": revision,
                       "updateRevision": "r2"}}


def rollout_pass(*statefulsets: dict, slurm_answers: bool = True) -> SimpleNamespace:
    """What advance reads of a pass: the live StatefulSets, whether slurmctld answered."""
    kube = MemoryKube()
    for sts in statefulsets:
        kube.apply(sts)
    accounting = SimpleNamespace(enabled=True, host=None)
    cluster = SimpleNamespace(name="hpc", namespace="prod", spec=SimpleNamespace(accounting=accounting))
    return SimpleNamespace(kube=kube, cluster=cluster, events=[], slurm_nodes={} if slurm_answers else None)


def test_slurmctld_waits_while_slurmdbd_has_not_served_from_its_new_pod():
    p = rollout_pass(statefulset("hpc-slurmdbd", "dbd:2", ready=False))
    state = advance(p, dict(OLD), "24.11.5", {"stage": "slurmdbd", "images": NEW, "version": "26.05.5"})
    assert state.rollout["stage"] == "slurmdbd" and state.images == OLD and state.version == "24.11.5"
    assert state.render == dict(OLD, slurmdbd="dbd:2") and p.events == []


def test_slurmdbd_serving_from_its_new_pod_lets_slurmctld_go_next():
    p = rollout_pass(statefulset("hpc-slurmdbd", "dbd:2"), statefulset("hpc-controller", "ctl:1"))
    state = advance(p, dict(OLD), "24.11.5", {"stage": "slurmdbd", "images": NEW, "version": "26.05.5"})
    assert state.rollout["stage"] == "controller" and state.images == dict(OLD, slurmdbd="dbd:2")
    assert state.render == dict(OLD, slurmdbd="dbd:2", controller="ctl:2")
    assert [e.reason for e in p.events] == ["UpgradeStage"]


def test_slurmctld_serving_from_its_new_pod_ends_the_rollout_and_the_rest_follows():
    p = rollout_pass(statefulset("hpc-controller", "ctl:2"))
    state = advance(p, dict(OLD, slurmdbd="dbd:2"), "24.11.5",
                    {"stage": "controller", "images": NEW, "version": "26.05.5"})
    assert state.images == NEW and state.version == "26.05.5" and state.rollout is None and state.render is None
    assert [e.reason for e in p.events] == ["Upgraded"]


def test_a_new_controller_pod_that_slurm_has_not_answered_from_yet_ends_nothing():
    p = rollout_pass(statefulset("hpc-controller", "ctl:2"), slurm_answers=False)
    state = advance(p, dict(OLD, slurmdbd="dbd:2"), "24.11.5",
                    {"stage": "controller", "images": NEW, "version": "26.05.5"})
    assert state.rollout["stage"] == "controller" and state.images["controller"] == "ctl:1"


def test_turning_a_rollout_back_after_its_first_stage_is_refused():
    """slurmdbd converted the database, and the new slurmctld may have saved its state: an older
    major release could read neither."""
    recorded = {"version": "25.11.8", "rollout": {"stage": "controller", "version": "26.05.5"}}
    refusal = refusal_of("25.11.8", "25.11.8", written_by(recorded, "25.11.8"))
    assert refusal.startswith("Slurm 26.05.5 may have written the cluster's state or database already")


def test_a_rollout_still_in_its_slurmdbd_stage_may_be_turned_back():
    recorded = {"version": "25.11.8", "rollout": {"stage": "slurmdbd", "version": "26.05.5"}}
    assert refusal_of("25.11.8", "25.11.8", written_by(recorded, "25.11.8")) is None


def test_a_cluster_that_stopped_running_slurmdbd_does_not_wait_for_it():
    p = rollout_pass(statefulset("hpc-controller", "ctl:1"))
    p.cluster.spec = SimpleNamespace(accounting=SimpleNamespace(enabled=False, host=None))
    state = advance(p, dict(OLD), "24.11.5", {"stage": "slurmdbd", "images": NEW, "version": "26.05.5"})
    assert state.rollout["stage"] == "controller"
