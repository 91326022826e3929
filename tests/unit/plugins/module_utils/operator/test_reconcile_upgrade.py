"""A new controller image reaches a running cluster only through its pre-flight Job: the
decisions, against an in-memory API (the k8s tier runs the real Job and slurmctld)."""

from __future__ import annotations

import datetime
from types import SimpleNamespace
from typing import NamedTuple

import pytest
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R
from ansible_collections.slurmkube.core.plugins.module_utils.operator.controller import replace_outdated_controller
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import Controllers
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_upgrade import (
    canary_verdict,
    first_stage,
    held_live,
    kept_earlier,
    preflight_result,
    slurm_release,
    staged_images,
    upgrade_refusal,
    with_live_workloads,
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
NEW_LOGIN = "registry.example/slurmkube/login:26.05.5-1"
NOW = datetime.datetime(2026, 11, 28, 10, 5, tzinfo=datetime.timezone.utc)


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


# ------------------------------------------------------------------ a backup first, with spec.backup

BACKUP_ON = {"enabled": True, "claimName": "backups", "passwordSecret": "backup-password"}


def upgrade_backups(kube: MemoryKube) -> list:
    return [key[2] for key in kube.objects if key[0] == "Job" and "-backup-upgrade-" in key[2]]


def end_job(kube: MemoryKube, name: str, kind: str) -> None:
    kube.objects[("Job", "research", name)]["status"] = finished_job(kind)["status"]


@pytest.fixture
def backing_up(world) -> Upgrading:
    """A running cluster with backups whose new controller image passed its pre-flight: the pass
    that starts the backup before the upgrade."""
    kube, cluster = world
    cluster["spec"] = dict(cluster["spec"], backup=BACKUP_ON)
    cluster = next_pass(kube, cluster)[1]
    old_image = controller_image(kube)
    cluster = next_pass(kube, cluster, controller=NEW_IMAGE)[1]
    [name] = preflight_jobs(kube)
    finish_preflight(kube, name, "Complete", "version=26.05.5")
    outcome, cluster = next_pass(kube, cluster)
    return Upgrading(kube, cluster, outcome, old_image)


def test_with_backups_a_passed_preflight_runs_a_backup_before_anything_is_upgraded(backing_up):
    kube, outcome = backing_up.kube, backing_up.outcome
    [name] = upgrade_backups(kube)
    job = kube.objects[("Job", "research", name)]
    cronjob = kube.objects[("CronJob", "research", "cpu-backup")]
    assert job["spec"] == cronjob["spec"]["jobTemplate"]["spec"]  # the scheduled run's pod, now
    assert job["metadata"]["labels"] == dict(job["metadata"]["labels"], **names.selector_labels("cpu", "backup"))
    assert job["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert controller_image(kube) == backing_up.old_image
    assert [e.reason for e in outcome.events] == ["Upgrade", "UpgradeSnapshot"]
    assert name in outcome.events[1].message and "26.05.5" in outcome.events[1].message
    rollout = outcome.status["slurm"]["rollout"]
    assert (rollout["stage"], rollout["snapshot"], rollout["version"]) == ("snapshot", name, "26.05.5")
    held = condition_of(outcome.status, "SlurmImageInUse")
    assert held["reason"] == "Upgrading" and "a backup (Job %s) first" % name in held["message"]
    assert outcome.status["backup"]["running"] == name  # status.backup counts it as a run


def test_a_backup_still_running_holds_every_slurm_image(backing_up):
    kube = backing_up.kube
    outcome = next_pass(kube, backing_up.cluster)[0]
    assert outcome.events == [] and controller_image(kube) == backing_up.old_image
    assert outcome.status["slurm"]["rollout"]["stage"] == "snapshot"


def test_a_completed_backup_lets_the_rollout_go_on_in_slurms_order(backing_up):
    kube = backing_up.kube
    [name] = upgrade_backups(kube)
    end_job(kube, name, "Complete")
    outcome = next_pass(kube, backing_up.cluster)[0]
    assert controller_image(kube) == NEW_IMAGE  # no slurmdbd in this cluster: slurmctld next
    [stage] = outcome.events
    assert stage.reason == "UpgradeStage" and "backup before the upgrade is done (Job %s); slurmctld next" % name \
        in stage.message
    assert outcome.status["slurm"]["rollout"]["stage"] == "controller"
    assert "snapshot" in outcome.status["slurm"]["rollout"]  # which Job it was, for whoever reads it later


def test_a_failed_backup_holds_the_upgrade_with_one_warning_and_runs_again_once_its_job_is_deleted(backing_up):
    kube = backing_up.kube
    [name] = upgrade_backups(kube)
    end_job(kube, name, "Failed")
    failed, cluster = next_pass(kube, backing_up.cluster)
    warning = next(e for e in failed.events if e.reason == "UpgradeSnapshotFailed")
    assert warning.kind == "Warning" and "kubectl logs job/%s" % name in warning.message
    assert controller_image(kube) == backing_up.old_image
    again, cluster = next_pass(kube, cluster)
    assert not [e for e in again.events if e.reason == "UpgradeSnapshotFailed"]
    kube.delete("batch/v1", "Job", name, "research")
    rerun = next_pass(kube, cluster)[0]
    assert upgrade_backups(kube) == [name] and [e.reason for e in rerun.events] == ["UpgradeSnapshot"]
    assert "snapshotFailed" not in rerun.status["slurm"]["rollout"]


def test_backups_turned_off_during_the_backup_let_the_upgrade_go_on_without_it(backing_up):
    kube, cluster = backing_up.kube, backing_up.cluster
    cluster = dict(cluster, spec=dict(cluster["spec"], backup=dict(BACKUP_ON, enabled=False)))
    outcome = next_pass(kube, cluster)[0]
    assert controller_image(kube) == NEW_IMAGE
    assert any(e.reason == "UpgradeStage" and "spec.backup was turned off" in e.message for e in outcome.events)


def test_without_backups_a_passed_preflight_goes_straight_to_slurms_order(upgrading):
    kube = upgrading.kube
    [name] = preflight_jobs(kube)
    finish_preflight(kube, name, "Complete", "version=26.05.5")
    next_pass(kube, upgrading.cluster)
    assert upgrade_backups(kube) == [] and controller_image(kube) == NEW_IMAGE


def test_the_backup_job_of_a_long_cluster_name_fits_a_job_name():
    name = names.upgrade_backup("c" * 40, "0123abcd")
    assert len(name) <= 63 and name.startswith("c" * 30)
    assert names.upgrade_backup("demo", "0123abcd") == "demo-backup-upgrade-0123abcd"


def pass_with_controller_pod(image: str) -> SimpleNamespace:
    """What release_of reads of a pass: slurmctld answering 26.05.5, its pod running IMAGE."""
    kube = MemoryKube()
    kube.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cpu-controller-0", "namespace": "research"},
                "spec": {"containers": [{"name": "slurmctld", "image": image}]}})
    slurm = SlurmControl(lambda argv: (0, "slurm-wlm 26.05.5\n", "") if argv == ["scontrol", "version"]
                         else (1, "", "unexpected"))
    return SimpleNamespace(kube=kube, slurm=slurm, cluster=SimpleNamespace(name="cpu", namespace="research"),
                           controllers=Controllers(1, "cpu-controller-0", (), (), ()))


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
    """What advance reads of a pass: the live StatefulSets, whether slurmctld answered, the
    controller pods (one serving, of the StatefulSet's latest template when it is "ready")."""
    kube = MemoryKube()
    controllers = None
    for sts in statefulsets:
        kube.apply(sts)
        if sts["metadata"]["name"] == "hpc-controller":
            rolled = sts["status"]["currentRevision"] == sts["status"]["updateRevision"]
            controllers = Controllers(1, "hpc-controller-0", (), (), () if rolled else ("hpc-controller-0",))
    accounting = SimpleNamespace(enabled=True, host=None)
    cluster = SimpleNamespace(name="hpc", namespace="prod", spec=SimpleNamespace(accounting=accounting))
    return SimpleNamespace(kube=kube, cluster=cluster, events=[], slurm_nodes={} if slurm_answers else None,
                           controllers=controllers,
                           clock=lambda: NOW, nodesets=[SimpleNamespace(spec=SimpleNamespace(replicas=1))])


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


def test_slurmctld_serving_from_its_new_pod_ends_the_rollout_where_the_worker_image_stays():
    p = rollout_pass(statefulset("hpc-controller", "ctl:2"))
    target = dict(NEW, worker="wrk:1")
    state = advance(p, dict(OLD, slurmdbd="dbd:2"), "24.11.5",
                    {"stage": "controller", "images": target, "version": "26.05.5"})
    assert state.images == target and state.version == "26.05.5" and state.rollout is None and state.render is None
    assert [e.reason for e in p.events] == ["Upgraded"]


def test_slurmctld_serving_from_its_new_pod_hands_a_new_worker_image_to_one_worker_first():
    p = rollout_pass(statefulset("hpc-controller", "ctl:2"))
    p.kube.apply(worker_pod("hpc-cpu-0", "wrk:1", ready=True, cluster="hpc", namespace="prod"))
    state = advance(p, dict(OLD, slurmdbd="dbd:2"), "24.11.5",
                    {"stage": "controller", "images": NEW, "version": "26.05.5"})
    assert state.rollout["stage"] == "canary" and state.version == "26.05.5"
    assert state.images == dict(OLD, slurmdbd="dbd:2", controller="ctl:2")
    assert state.render == dict(NEW, login="log:1", jail="jail:1", exporter="exp:1")
    assert [e.reason for e in p.events] == ["UpgradeStage"] and "one worker tries wrk:2" in p.events[0].message


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


# ------------------------------------------------------------------------ the canary worker


def worker_pod(name: str, image: str, ready: bool = False, waiting: str = "", init_waiting: str = "",
               created: str = "2026-11-28T10:00:00Z", terminating: bool = False, placed: bool = True,
               cluster: str = "cpu", namespace: str = "research") -> dict:
    """A worker pod of CLUSTER as the API lists it: its init container and slurmd made from IMAGE."""
    metadata = {"name": name, "namespace": namespace, "creationTimestamp": created,
                "labels": names.selector_labels(cluster, C.COMPONENT_WORKER, "compute")}
    if terminating:
        metadata["deletionTimestamp"] = "2026-11-28T10:04:00Z"
    init_state = {"waiting": {"reason": init_waiting}} if init_waiting else {"terminated": {"exitCode": 0}}
    state = {"waiting": {"reason": waiting, "message": "no such image"}} if waiting else {"running": {}}
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"},
                             {"type": "PodScheduled", "status": "True" if placed else "False",
                              "lastTransitionTime": created}],
              "initContainerStatuses": [{"name": "init", "state": init_state}],
              "containerStatuses": [{"name": "slurmd", "state": state}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "status": status,
            "spec": {"initContainers": [{"name": "init", "image": image}],
                     "containers": [{"name": "slurmd", "image": image}]}}


def test_a_worker_of_the_new_image_that_serves_passes_the_canary():
    pods = [worker_pod("w-0", "wrk:1", ready=True), worker_pod("w-1", "wrk:2", ready=True)]
    assert canary_verdict(pods, "wrk:2", NOW) == (True, "")


def test_a_canary_still_starting_or_waiting_for_room_or_going_away_or_not_made_yet_gives_no_verdict():
    pods = [worker_pod("w-0", "wrk:1", ready=True), worker_pod("w-1", "wrk:2", created="2026-11-28T10:04:00Z"),
            worker_pod("w-2", "wrk:2", ready=True, terminating=True),
            worker_pod("w-3", "wrk:2", created="2026-11-28T09:00:00Z", placed=False)]
    assert canary_verdict(pods, "wrk:2", NOW) == (False, "")
    assert canary_verdict(pods[:1], "wrk:2", NOW) == (False, "")


@pytest.mark.parametrize(("pod", "says"), [
    (worker_pod("w-1", "wrk:2", waiting="ErrImagePull"), "pod w-1: slurmd: ErrImagePull (no such image)"),
    (worker_pod("w-1", "wrk:2", init_waiting="CrashLoopBackOff"), "pod w-1: init: CrashLoopBackOff"),
    (worker_pod("w-1", "wrk:2", created="2026-11-28T09:54:59Z"),
     "pod w-1: not Ready 10 minutes after it was placed on a node"),
])
def test_a_canary_stuck_fails_saying_which_pod_and_why(pod, says):
    passed, failure = canary_verdict([worker_pod("w-0", "wrk:1", ready=True), pod], "wrk:2", NOW)
    assert not passed and failure == says


def login_image(kube: MemoryKube) -> str:
    sts = kube.objects[("StatefulSet", "research", "cpu-login")]
    return sts["spec"]["template"]["spec"]["containers"][0]["image"]


class Canary(NamedTuple):
    kube: MemoryKube
    cluster: dict  # as the next pass reads it
    outcome: R.Outcome  # of the pass that started the canary
    old_worker: str
    old_login: str


@pytest.fixture
def canary(world) -> Canary:
    """A running cluster, then its worker and login images changed (the controller's not)."""
    kube, cluster = world
    cluster = next_pass(kube, cluster)[1]
    old_worker, old_login = worker_image(kube), login_image(kube)
    outcome, cluster = next_pass(kube, cluster, worker=NEW_WORKER, login=NEW_LOGIN)
    return Canary(kube, cluster, outcome, old_worker, old_login)


def test_a_new_worker_image_is_tried_on_one_worker_with_login_jail_and_exporter_held(canary):
    kube, outcome = canary.kube, canary.outcome
    assert worker_image(kube) == NEW_WORKER and login_image(kube) == canary.old_login
    assert [e.reason for e in outcome.events] == ["Canary"] and NEW_WORKER in outcome.events[0].message
    slurm = outcome.status["slurm"]
    assert slurm["rollout"]["stage"] == "canary" and slurm["images"]["worker"] == canary.old_worker
    held = condition_of(outcome.status, "SlurmImageInUse")
    assert (held["status"], held["reason"]) == ("False", "Upgrading") and NEW_WORKER in held["message"]


def test_a_canary_that_serves_lets_the_other_workers_login_jail_and_exporter_follow(canary):
    kube = canary.kube
    kube.apply(worker_pod("cpu-compute-0", NEW_WORKER, ready=True))
    outcome = next_pass(kube, canary.cluster)[0]
    assert [e.reason for e in outcome.events] == ["CanaryPassed"]
    assert worker_image(kube) == NEW_WORKER and login_image(kube) == NEW_LOGIN
    assert outcome.status["slurm"]["images"]["worker"] == NEW_WORKER and "rollout" not in outcome.status["slurm"]
    assert condition_of(outcome.status, "SlurmImageInUse")["status"] == "True"


def test_a_stuck_canary_turns_the_workers_back_once_until_the_spec_names_another_image(canary):
    kube = canary.kube
    kube.apply(worker_pod("cpu-compute-0", NEW_WORKER, waiting="ErrImagePull"))
    failed, cluster = next_pass(kube, canary.cluster)
    [warning] = failed.events
    assert (warning.kind, warning.reason) == ("Warning", "CanaryFailed")
    assert "pod cpu-compute-0: slurmd: ErrImagePull" in warning.message and canary.old_worker in warning.message
    assert worker_image(kube) == canary.old_worker and login_image(kube) == canary.old_login
    assert failed.status["slurm"]["canaryFailure"] == {"images": dict(failed.status["slurm"]["images"],
                                                                      worker=NEW_WORKER, login=NEW_LOGIN),
                                                       "message": warning.message}  # fmt: skip
    refused = condition_of(failed.status, "SlurmImageInUse")
    assert (refused["status"], refused["reason"]) == ("False", "CanaryFailed")
    # The spec still names the image: held, no second Warning.
    again, cluster = next_pass(kube, cluster)
    assert again.events == [] and worker_image(kube) == canary.old_worker
    assert again.status["slurm"]["canaryFailure"]["message"] == warning.message
    # Another image is tried afresh.
    other = NEW_WORKER.replace("-1", "-2")
    retried = next_pass(kube, cluster, worker=other)[0]
    assert [e.reason for e in retried.events] == ["Canary"] and worker_image(kube) == other
    assert "canaryFailure" not in retried.status["slurm"]


def test_going_back_to_the_worker_image_in_effect_ends_the_canary(canary):
    outcome = next_pass(canary.kube, canary.cluster, worker=canary.old_worker, login=canary.old_login)[0]
    assert outcome.events == [] and "rollout" not in outcome.status["slurm"]
    assert worker_image(canary.kube) == canary.old_worker


def test_a_pass_held_by_a_preflight_keeps_the_rest_keys_in_effect_as_they_were(world):
    """The pass ends before the reconfigure step: what slurmctld checks tokens with is unchanged."""
    kube, cluster = world
    cluster = dict(cluster, spec=dict(cluster["spec"], rest={"enabled": True}))
    first, cluster = next_pass(kube, cluster)
    cluster = dict(cluster, status=dict(first.status, restKeys=dict(first.status["restKeys"], inEffect="sha256:seen")))
    held = next_pass(kube, cluster, controller=NEW_IMAGE)[0]
    assert held.status["slurm"]["preflight"] and held.status["restKeys"]["inEffect"] == "sha256:seen"


# ------------------------------------------------------------------ a cluster an earlier release made

EARLIER = "made-by-an-earlier-release"


def earlier_templates(kube: MemoryKube) -> dict:
    """The workloads whose pod templates carry EARLIER's mark (an earlier release's templates), by name."""
    return {key[2]: obj["spec"]["template"]["spec"]["containers"][0]["image"] for key, obj in kube.objects.items()
            if key[0] in ("StatefulSet", "Deployment", "Job")
            and EARLIER in (obj["spec"]["template"]["metadata"].get("annotations") or {})}


@pytest.fixture
def earlier_release(world) -> Upgrading:
    """A cluster an earlier release made: every object there, the workloads' pod templates that
    release's (marked), and a status written by an operator that recorded no Slurm images."""
    kube, cluster = world
    cluster = next_pass(kube, cluster)[1]
    for key, obj in kube.objects.items():
        if key[0] in ("StatefulSet", "Deployment") or (key[0] == "Job" and "jail-populate" in key[2]):
            template = obj["spec"]["template"]
            template["metadata"]["annotations"] = dict(template["metadata"].get("annotations") or {}, **{EARLIER: "1"})
    # 0.3.0's controllers: their Service and their state claim made from a claim template, both
    # fields the server keeps as made (a change makes the StatefulSet again).
    controller = kube.objects[("StatefulSet", "research", "cpu-controller")]["spec"]
    controller.update(serviceName="cpu-controller", volumeClaimTemplates=[{"metadata": {"name": "state"}}])
    kube.objects[("ConfigMap", "research", "cpu-slurm-config")]["data"]["slurm.conf"] = EARLIER
    cluster["status"] = {key: value for key, value in cluster["status"].items() if key != "slurm"}
    return Upgrading(kube, cluster, None, controller_image(kube))


def test_a_cluster_an_earlier_release_made_keeps_its_pod_templates_and_says_why(earlier_release):
    kube, cluster = earlier_release.kube, earlier_release.cluster
    made = earlier_templates(kube)
    assert {"cpu-controller", "cpu-compute", "cpu-login"} <= set(made)
    assert any("jail-populate" in name for name in made)
    outcome, cluster = next_pass(kube, cluster)
    assert earlier_templates(kube) == made
    [said] = [e for e in outcome.events if e.reason == "EarlierRelease"]
    assert said.kind == "Normal" and "Slurm's order" in said.message
    slurm = outcome.status["slurm"]
    assert slurm["earlierRelease"] == {key: made_image for key, made_image in slurm["images"].items()
                                       if key in ("controller", "worker", "login", "jail")}
    again = next_pass(kube, cluster)[0]
    assert [e for e in again.events if e.reason == "EarlierRelease"] == []
    assert earlier_templates(kube) == made and again.status["slurm"]["earlierRelease"] == slurm["earlierRelease"]
    # Not made again meanwhile: made again now, it would take this release's template.
    assert kube.objects[("StatefulSet", "research", "cpu-controller")]["spec"]["serviceName"] == "cpu-controller"
    # Its slurmctld keeps that release's files (this release's name hosts its pods have no DNS name under).
    assert kube.objects[("ConfigMap", "research", "cpu-slurm-config")]["data"]["slurm.conf"] == EARLIER


def test_an_earlier_releases_workers_still_follow_the_scale_plan(earlier_release):
    kube, cluster = earlier_release.kube, earlier_release.cluster
    cluster = next_pass(kube, cluster)[1]
    nodeset = next(obj for key, obj in kube.objects.items() if key[0] == "NodeSet")
    nodeset["spec"]["replicas"] += 1
    next_pass(kube, cluster)
    sts = kube.objects[("StatefulSet", "research", "cpu-compute")]
    assert sts["spec"]["replicas"] == nodeset["spec"]["replicas"] and "cpu-compute" in earlier_templates(kube)


def test_an_earlier_releases_images_go_in_slurms_order_each_with_this_releases_template(earlier_release):
    kube, cluster = earlier_release.kube, earlier_release.cluster
    cluster = next_pass(kube, cluster)[1]
    made = earlier_templates(kube)
    held = next_pass(kube, cluster, controller=NEW_IMAGE, worker=NEW_WORKER)
    assert earlier_templates(kube) == made and held[0].status["slurm"]["earlierRelease"]["controller"]
    [name] = preflight_jobs(kube)
    finish_preflight(kube, name, "Complete", "version=26.05.5")
    outcome, cluster = next_pass(kube, held[1])
    if ("StatefulSet", "research", "cpu-controller") not in kube.objects:  # made again: its claim template goes
        outcome = next_pass(kube, cluster)[0]
    controller = kube.objects[("StatefulSet", "research", "cpu-controller")]["spec"]
    assert (controller["serviceName"], controller.get("volumeClaimTemplates")) == ("cpu-controller-hosts", None)
    assert kube.objects[("ConfigMap", "research", "cpu-slurm-config")]["data"]["slurm.conf"] != EARLIER
    assert controller_image(kube) == NEW_IMAGE and "cpu-controller" not in earlier_templates(kube)
    assert {n: i for n, i in earlier_templates(kube).items() if n != "cpu-controller"} == \
        {n: i for n, i in made.items() if n != "cpu-controller"}  # the workers wait for their stage
    assert "controller" not in outcome.status["slurm"]["earlierRelease"]
    assert outcome.status["slurm"]["earlierRelease"]["worker"] == made["cpu-compute"]


def test_what_keeps_its_live_spec_an_earlier_releases_images_and_the_database_while_it_is_backed_up():
    assert held_live({"controller": "ctl:1"}, {"controller": "ctl:1"}, None) == {"controller"}
    assert held_live({}, {}, {"stage": "snapshot"}) == {"mariadb"}
    assert held_live({"worker": "wrk:1"}, {"worker": "wrk:1"}, {"stage": "slurmdbd"}) == {"worker"}
    # Its new image rendered, the controller takes this release's template.
    assert held_live({"controller": "ctl:1"}, {"controller": "ctl:2"}, None) == set()


def test_an_earlier_releases_controller_image_is_kept_while_a_controller_pod_runs_it():
    earlier = {"controller": "ctl:1", "worker": "wrk:1"}
    new = {"controller": "ctl:2", "worker": "wrk:2"}
    assert kept_earlier(earlier, new, ("ctl:1",)) == {"controller": "ctl:1"}
    assert kept_earlier(earlier, new, ("ctl:2",)) == {}
    assert kept_earlier(earlier, dict(new, worker="wrk:1"), ()) == {"worker": "wrk:1"}


def replacing_pass(earlier: dict) -> SimpleNamespace:
    """What replace_outdated_controller reads of a pass: one controller pod, serving and outdated,
    running ctl:1, and the rendered Slurm configuration, whose live one is the earlier release's."""
    kube = MemoryKube()
    kube.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cpu-controller-0", "namespace": "research"},
                "spec": {"containers": [{"name": C.CONTAINER_CONTROLLER, "image": "ctl:1"}]}})
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": names.slurm_config("cpu"),
                                                                    "namespace": "research"}}
    kube.apply(dict(config, data={"slurm.conf": EARLIER}))
    rendered = dict(config, data={"slurm.conf": "this release's"})
    return SimpleNamespace(kube=kube, cluster=SimpleNamespace(name="cpu", namespace="research"),
                           cluster_obj={"metadata": {"name": "cpu", "uid": "u1"}}, seen=None, applied=[], events=[],
                           rendered=SimpleNamespace(objects=[rendered]), slurm_state=SimpleNamespace(earlier=earlier),
                           controllers=Controllers(1, "cpu-controller-0", (), (), ("cpu-controller-0",),
                                                   images=("ctl:1",)))


def slurm_conf_at_each_delete(kube: MemoryKube) -> list:
    """The pods KUBE deletes from now on, each with the slurm.conf live as it was deleted."""
    deletes, delete = [], kube.delete

    def recording(api_version, kind, name, namespace=None, **options):
        live = kube.get("v1", "ConfigMap", names.slurm_config("cpu"), namespace)
        deletes.append((name, live["data"]["slurm.conf"]))
        return delete(api_version, kind, name, namespace, **options)

    kube.delete = recording
    return deletes


def test_an_earlier_releases_slurmctld_pod_goes_once_this_releases_configuration_is_written():
    """Held while it ran (its pods have no DNS name under this release's hosts), the configuration
    is written just before its pod is deleted: the new pod reads this release's files as it starts."""
    p = replacing_pass({"controller": "ctl:1"})
    deletes = slurm_conf_at_each_delete(p.kube)
    replace_outdated_controller(p)
    assert deletes == [("cpu-controller-0", "this release's")]
    assert p.applied == ["ConfigMap/%s" % names.slurm_config("cpu")]


def test_a_controller_of_this_release_is_replaced_with_the_configuration_left_to_the_reconfigure():
    p = replacing_pass({})
    deletes = slurm_conf_at_each_delete(p.kube)
    replace_outdated_controller(p)
    assert deletes == [("cpu-controller-0", EARLIER)] and p.applied == []


def test_a_held_workload_keeps_its_live_spec_but_the_replicas_and_one_not_live_is_not_made():
    database = {"apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": "cpu-mariadb", "labels": {C.LABEL_COMPONENT: C.COMPONENT_DATABASE}},
                "spec": {"replicas": 1, "serviceName": "cpu-mariadb",
                         "template": {"spec": {"containers": [{"image": "mariadb:2"}]}}}}
    live = dict(database, spec=dict(database["spec"], replicas=0, serviceName="old",
                                    template={"spec": {"containers": [{"image": "mariadb:1"}]}}))
    [kept] = with_live_workloads("cpu", [database], {("StatefulSet", "cpu-mariadb"): live}, frozenset({"mariadb"}))
    assert kept["spec"] == dict(live["spec"], replicas=1) and kept["metadata"] == database["metadata"]
    assert with_live_workloads("cpu", [database], {}, frozenset({"mariadb"})) == []
    assert with_live_workloads("cpu", [database], {}, frozenset({"controller"})) == [database]
