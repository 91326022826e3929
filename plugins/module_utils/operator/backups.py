# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the cluster's backups went (spec.backup): status.backup from the backup Jobs Kubernetes
keeps (the CronJob's history, and runs started by hand from it), and a Warning Event when a run
fails. The gauges and alerts on a backup's age and failure are read from that status."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Event

EVENT_FAILED = "BackupFailed"


def finished(job: Mapping[str, Any]) -> Optional[Tuple[str, str]]:
    """("Complete" or "Failed", when) of a finished Job, else None."""
    for found in (job.get("status") or {}).get("conditions") or []:
        if found.get("type") in ("Complete", "Failed") and found.get("status") == "True":
            return found["type"], found.get("lastTransitionTime") or ""
    return None


def backup_status(jobs: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """The newest successful run's end; the newest failed run's end and Job; a run still going.
    (Kubernetes writes every time as RFC 3339 UTC: text order is time order.)"""
    succeeded: List[str] = []
    failed: List[Tuple[str, str]] = []
    running: List[str] = []
    for job in jobs:
        name, end = job["metadata"]["name"], finished(job)
        if end is None:
            running.append(name)
        elif end[0] == "Complete":
            succeeded.append(end[1])
        else:
            failed.append((end[1], name))
    status: Dict[str, Any] = {}
    if succeeded:
        status["lastSuccessTime"] = max(succeeded)
    if failed:
        status["lastFailureTime"], status["lastFailedJob"] = max(failed)
    if running:
        status["running"] = max(running)
    return status


def backup_events(previous: Mapping[str, Any], now: Mapping[str, Any]) -> List[Event]:
    """A Warning when a run failed since the last pass (its logs say why)."""
    if not now.get("lastFailureTime") or now.get("lastFailureTime") == previous.get("lastFailureTime"):
        return []
    return [Event("Warning", EVENT_FAILED, "backup Job %s failed at %s (kubectl logs job/%s); %s" % (
        now["lastFailedJob"], now["lastFailureTime"], now["lastFailedJob"],
        "the last good backup ended at %s" % now["lastSuccessTime"] if now.get("lastSuccessTime")
        else "no backup has succeeded yet"))]
