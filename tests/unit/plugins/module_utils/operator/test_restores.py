"""A restore (spec.backup.restore) through reconcile passes on the in-memory API: once per name,
slurmctld held at no pods while the controller state is restored, the Job made only once the
controller pods are gone, the end (done, failed, Job deleted) in status.restore and an Event,
and a restore asked for during an upgrade waiting for it."""

from __future__ import annotations

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R
from ansible_collections.slurmkube.core.plugins.module_utils.operator.restores import held_components

REPOSITORY = {"claimName": "backups", "passwordSecret": "backup-password"}


def asking(cluster, **restore):
    return dict(cluster, spec=dict(cluster["spec"], backup=dict(REPOSITORY, restore=restore)))


def controller_replicas(kube, cluster):
    name = names.controller(cluster["metadata"]["name"])
    return kube.objects[("StatefulSet", cluster["metadata"]["namespace"], name)]["spec"]["replicas"]


def controller_pod(kube, cluster):
    name, namespace = cluster["metadata"]["name"], cluster["metadata"]["namespace"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "%s-0" % names.controller(name), "namespace": namespace,
        "labels": names.selector_labels(name, C.COMPONENT_CONTROLLER)}, "spec": {}}
    kube.apply(pod)
    return pod


def restore_jobs(kube):
    return {key[2]: obj for key, obj in kube.objects.items() if key[0] == "Job"
            and obj["metadata"]["labels"].get(C.LABEL_COMPONENT) == C.COMPONENT_RESTORE}


def finish(kube, job, outcome):
    job["status"] = {"conditions": [{"type": outcome, "status": "True", "lastTransitionTime": "2026-12-02T03:00:00Z"}]}
    kube.apply(job)


def passes(kube, cluster, count=1):
    outcome = None
    for _pass in range(count):
        outcome = R.Reconciler(kube).reconcile(cluster)
        cluster = dict(cluster, status=outcome.status)
    return outcome, cluster


def reasons(outcome):
    return [e.reason for e in outcome.events if e.reason.startswith("Restore")]


def test_the_controller_state_is_restored_with_slurmctld_held_down_then_slurmctld_comes_back(world):
    kube, cluster = world
    first, cluster = passes(kube, cluster)
    assert controller_replicas(kube, cluster) == 1 and "restore" not in first.status
    pod = controller_pod(kube, cluster)
    asked = asking(cluster, name="r1", controllerState=True)
    stopping, cluster = passes(kube, asked)
    assert stopping.status["restore"]["phase"] == "Stopping", stopping.status["restore"]
    assert pod["metadata"]["name"] in stopping.status["restore"]["message"]
    assert controller_replicas(kube, cluster) == 0 and not restore_jobs(kube)
    assert reasons(stopping) == ["RestoreStarted"]
    started = next(e for e in stopping.events if e.reason == "RestoreStarted")
    assert "controller stopped until it ends" in started.message
    # Held while its pod is still there: no Job yet, and no second Event.
    again, cluster = passes(kube, cluster)
    assert again.status["restore"]["phase"] == "Stopping" and not restore_jobs(kube) and reasons(again) == []
    ready = next(c for c in again.status["conditions"] if c["type"] == "ControllerReady")
    assert "held down while restore r1 runs" in ready["message"], ready
    kube.delete("v1", "Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
    restoring, cluster = passes(kube, cluster)
    (job,) = restore_jobs(kube).values()
    assert restoring.status["restore"]["phase"] == "Restoring" and restoring.status["restore"]["job"] == \
        job["metadata"]["name"] == names.restore("cpu", "r1")
    assert job["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env[C.ENV_RESTORE_PARTS] == C.BACKUP_PART_CONTROLLER_STATE and env[C.ENV_ROLE] == C.ROLE_RESTORE
    assert controller_replicas(kube, cluster) == 0 and reasons(restoring) == ["RestoreJob"]
    # The spec changed meanwhile: the restore goes on as asked.
    cluster = dict(cluster, spec=dict(cluster["spec"], backup=REPOSITORY))
    still, cluster = passes(kube, cluster)
    assert still.status["restore"]["phase"] == "Restoring" and controller_replicas(kube, cluster) == 0
    finish(kube, job, "Complete")
    done, cluster = passes(kube, cluster)
    assert done.status["restore"]["phase"] == "Succeeded" and done.status["restore"]["completionTime"]
    assert controller_replicas(kube, cluster) == 1 and reasons(done) == ["RestoreDone"]
    assert "controller start again" in next(e.message for e in done.events if e.reason == "RestoreDone")
    # Done: the same name asked again is not run again.
    later = passes(kube, asking(cluster, name="r1", controllerState=True), 2)[0]
    assert later.status["restore"]["phase"] == "Succeeded" and reasons(later) == []


def test_a_jail_restore_holds_nothing_and_its_job_starts_at_once(world):
    kube, cluster = world
    cluster = passes(kube, cluster)[1]
    controller_pod(kube, cluster)
    started, cluster = passes(kube, asking(cluster, name="home", jail=True, jailPaths=["/home/alice"], exact=True))
    assert started.status["restore"]["phase"] == "Restoring" and controller_replicas(kube, cluster) == 1
    assert reasons(started) == ["RestoreStarted", "RestoreJob"]
    (job,) = restore_jobs(kube).values()
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env[C.ENV_RESTORE_JAIL_PATHS] == "/home/alice" and env[C.ENV_RESTORE_EXACT] == "true"
    assert started.status["restore"]["jailPaths"] == ["/home/alice"] and started.status["restore"]["exact"] is True


def test_a_failed_or_deleted_job_fails_the_restore_with_a_warning_and_slurmctld_comes_back(world):
    kube, cluster = world
    cluster = passes(kube, cluster)[1]
    cluster = passes(kube, asking(cluster, name="r1", controllerState=True))[1]
    (job,) = restore_jobs(kube).values()
    finish(kube, job, "Failed")
    failed, cluster = passes(kube, cluster)
    assert failed.status["restore"]["phase"] == "Failed" and controller_replicas(kube, cluster) == 1
    warning = next(e for e in failed.events if e.reason == "RestoreFailed")
    assert warning.kind == "Warning" and "kubectl logs job/%s" % job["metadata"]["name"] in warning.message
    # A new name: the last restore's Job goes, the new one is made.
    cluster = passes(kube, asking(cluster, name="r2", controllerState=True))[1]
    assert list(restore_jobs(kube)) == [names.restore("cpu", "r2")]
    kube.delete("batch/v1", "Job", names.restore("cpu", "r2"), cluster["metadata"]["namespace"])
    gone, cluster = passes(kube, cluster)
    assert gone.status["restore"]["phase"] == "Failed" and "was deleted" in gone.status["restore"]["message"]
    assert controller_replicas(kube, cluster) == 1


def test_a_restore_asked_for_during_an_upgrade_waits_for_it_holding_nothing(world):
    kube, cluster = world
    cluster = passes(kube, cluster)[1]
    rolling = dict(cluster["status"], slurm=dict(cluster["status"].get("slurm") or {}, preflight="cpu-preflight-1"))
    waiting = R.Reconciler(kube).reconcile(dict(asking(cluster, name="r1", controllerState=True), status=rolling))
    assert waiting.status["restore"]["phase"] == "Pending", waiting.status["restore"]
    assert "upgrade" in waiting.status["restore"]["message"] and not restore_jobs(kube)
    assert controller_replicas(kube, cluster) == 1


def test_what_each_part_holds_down():
    assert held_components([C.BACKUP_PART_JAIL]) == frozenset()
    assert held_components([C.BACKUP_PART_CONTROLLER_STATE, C.BACKUP_PART_DATABASE]) == {
        C.COMPONENT_CONTROLLER, C.COMPONENT_SLURMDBD}
