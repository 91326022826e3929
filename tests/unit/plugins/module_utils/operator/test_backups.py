"""status.backup: the newest good and failed backup runs from the Jobs Kubernetes keeps, a
Warning Event for each new failure, and the gauges the backup alerts read."""

from __future__ import annotations

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R
from ansible_collections.slurmkube.core.plugins.module_utils.operator.backups import (
    EVENT_FAILED,
    backup_events,
    backup_status,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.telemetry import cluster_gauges

ON = {"enabled": True, "claimName": "backups", "passwordSecret": "backup-password"}


def job(name, outcome=None, when="", namespace="research", cluster="cpu"):
    conditions = [{"type": outcome, "status": "True", "lastTransitionTime": when}] if outcome else []
    return {"apiVersion": "batch/v1", "kind": "Job", "status": {"conditions": conditions}, "metadata": {
        "name": name, "namespace": namespace,
        "labels": {C.LABEL_CLUSTER: cluster, C.LABEL_COMPONENT: C.COMPONENT_BACKUP}}}


def test_the_newest_good_and_failed_runs_and_one_still_going():
    jobs = [job("b-1", "Complete", "2026-12-01T02:31:00Z"), job("b-2", "Failed", "2026-12-02T02:35:00Z"),
            job("b-3", "Complete", "2026-12-03T02:30:40Z"), job("b-4", "Failed", "2026-11-30T02:30:00Z"),
            job("b-5")]
    assert backup_status(jobs) == {"lastSuccessTime": "2026-12-03T02:30:40Z", "lastFailureTime": "2026-12-02T02:35:00Z",
                                   "lastFailedJob": "b-2", "running": "b-5"}
    assert backup_status([]) == {}


def test_a_new_failure_is_one_warning_naming_its_job_and_the_last_good_backup():
    failed = {"lastFailureTime": "2026-12-02T02:35:00Z", "lastFailedJob": "b-2",
              "lastSuccessTime": "2026-12-01T02:31:00Z"}
    (event,) = backup_events({}, failed)
    assert event.kind == "Warning" and event.reason == EVENT_FAILED
    assert "b-2" in event.message and "2026-12-01T02:31:00Z" in event.message
    assert backup_events(failed, failed) == []  # the same failure, seen again
    assert backup_events({}, {"lastSuccessTime": "2026-12-01T02:31:00Z"}) == []
    (never,) = backup_events({}, {"lastFailureTime": "2026-12-02T02:35:00Z", "lastFailedJob": "b-1"})
    assert "no backup has succeeded yet" in never.message


def test_the_gauges_are_unix_times_and_only_with_backups():
    status = {"backup": {"lastSuccessTime": "2026-12-01T00:00:00Z"}}
    gauges = {g.name: g.value for g in cluster_gauges(status, {}, {})}
    assert gauges["backup_last_success_timestamp_seconds"] == 1796083200.0
    assert gauges["backup_last_failure_timestamp_seconds"] == 0.0
    assert not [g for g in cluster_gauges({}, {}, {}) if g.name.startswith("backup_")]


def test_a_pass_reports_the_clusters_backup_jobs_and_warns_of_a_failed_one(world):
    kube, cluster = world
    cluster["spec"] = dict(cluster["spec"], backup=ON)
    kube.apply(job("cpu-backup-1", "Complete", "2026-12-01T02:31:00Z"))
    kube.apply(job("other-backup-1", "Failed", "2026-12-02T02:31:00Z", cluster="other"))  # another cluster's
    first = R.Reconciler(kube).reconcile(cluster)
    assert first.status["backup"] == {"lastSuccessTime": "2026-12-01T02:31:00Z"}
    assert not [e for e in first.events if e.reason == EVENT_FAILED]
    kube.apply(job("cpu-backup-2", "Failed", "2026-12-02T02:40:00Z"))
    second = R.Reconciler(kube).reconcile(dict(cluster, status=first.status))
    assert second.status["backup"]["lastFailedJob"] == "cpu-backup-2"
    assert [e.reason for e in second.events if e.reason == EVENT_FAILED] == [EVENT_FAILED]
    third = R.Reconciler(kube).reconcile(dict(cluster, status=second.status))
    assert not [e for e in third.events if e.reason == EVENT_FAILED]
    cluster["spec"] = dict(cluster["spec"], backup=dict(ON, enabled=False))
    assert "backup" not in R.Reconciler(kube).reconcile(cluster).status
