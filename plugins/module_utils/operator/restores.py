# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pass's step that runs a restore from the backups (spec.backup.restore), once per name.

A new name starts it (status.restore records what it restores, so the spec may change meanwhile):
    Stopping   what writes the parts is held at no pods: slurmctld (every controller) for the
               controller state, slurmdbd for the database; the jail alone holds nothing
    Restoring  once none of their pods is left, the restore Job (render/backup.py) writes the
               parts back; they stay held until it ends
    Succeeded  the Job completed: the daemons come back as the spec has them, and read what
    Failed     was restored (or the Job failed, or was deleted: its logs say why)
A restore asked for while an upgrade rolls out waits (Pending) until the rollout is over: the
state and database must be the release's that reads them. Events say when a restore starts, when
its Job is made and how it ended."""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, List, Mapping, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import apply_changed, owned_by
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import Restore
from ansible_collections.slurmkube.core.plugins.module_utils.operator.backups import finished
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import Pass
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Event
from ansible_collections.slurmkube.core.plugins.module_utils.render.backup import render_restore_job, restore_parts

PHASE_PENDING = "Pending"
PHASE_STOPPING = "Stopping"
PHASE_RESTORING = "Restoring"
PHASE_SUCCEEDED = "Succeeded"
PHASE_FAILED = "Failed"
UNDER_WAY = (PHASE_PENDING, PHASE_STOPPING, PHASE_RESTORING)
# The component whose pods write each part, held down while it is restored.
WRITER = {C.BACKUP_PART_CONTROLLER_STATE: C.COMPONENT_CONTROLLER, C.BACKUP_PART_DATABASE: C.COMPONENT_SLURMDBD}


def check_restore(p: Pass) -> None:
    """p.restore (status.restore) and p.held: a new restore started, one under way moved on."""
    recorded = dict(p.previous_status.get("restore") or {})
    request = p.cluster.spec.backup.restore
    if recorded.get("phase") not in UNDER_WAY:
        if not request.name or request.name == recorded.get("name"):
            p.restore = recorded or None
            return
        recorded = started(p, request, recorded)
    if recorded["phase"] == PHASE_PENDING:
        if upgrade_under_way(p.previous_status):
            p.restore = recorded
            return
        recorded = without_message(dict(recorded, phase=PHASE_STOPPING))
    p.restore = advance(p, recorded)
    if p.restore["phase"] in UNDER_WAY:
        p.held = held_components(p.restore["parts"])


def started(p: Pass, request: Restore, last: Mapping[str, Any]) -> Dict[str, Any]:
    """The record of a new restore (the last one's Job removed: one restore's Job is kept, the
    last, for its logs)."""
    if last.get("job"):
        p.kube.delete("batch/v1", "Job", last["job"], p.cluster.namespace, propagation="Background")
    parts = restore_parts(request)
    record = {"name": request.name, "parts": parts, "snapshot": request.snapshot, "startTime": now_text(p)}
    if request.jail:
        record.update(jailPaths=list(request.jail_paths), exact=request.exact)
    held = sorted(held_components(parts))
    waits = upgrade_under_way(p.previous_status)
    stopped = "; %s stopped until it ends" % " and ".join(held) if held else ""
    later = "; it waits for the upgrade under way" if waits else ""
    p.events.append(Event("Normal", "RestoreStarted", "restore %s: %s from snapshot %s%s%s" % (
        request.name, ", ".join(parts), request.snapshot, stopped, later)))
    if waits:
        return dict(record, phase=PHASE_PENDING, message="waits for the upgrade under way (status.slurm.rollout)")
    return dict(record, phase=PHASE_STOPPING)


def advance(p: Pass, record: Dict[str, Any]) -> Dict[str, Any]:
    """The restore moved on as far as the live pods and Job allow."""
    namespace = p.cluster.namespace
    if record["phase"] == PHASE_STOPPING:
        left = still_running(p, held_components(record["parts"]))
        if left:
            return dict(record, message="waits for %s to stop" % ", ".join(left))
        job = owned_by(render_restore_job(p.cluster, recorded_request(record)), p.cluster_obj)
        apply_changed(p.kube, [job])
        p.events.append(Event("Normal", "RestoreJob", "Job %s restores %s" % (job["metadata"]["name"],
                                                                              ", ".join(record["parts"]))))
        return without_message(dict(record, phase=PHASE_RESTORING, job=job["metadata"]["name"]))
    job = p.kube.get("batch/v1", "Job", record["job"], namespace)
    if job is None:
        return ended(p, record, False, "its Job %s was deleted before it ended" % record["job"])
    end = finished(job)
    if end is None:
        return record
    if end[0] == "Complete":
        return ended(p, record, True, "restored %s" % ", ".join(record["parts"]))
    return ended(p, record, False, "Job %s failed (kubectl logs job/%s)" % (record["job"], record["job"]))


def ended(p: Pass, record: Dict[str, Any], succeeded: bool, message: str) -> Dict[str, Any]:
    """The restore's last record, and an Event saying how it ended; what it held comes back."""
    held = sorted(held_components(record["parts"]))
    back = "; %s start again" % " and ".join(held) if held else ""
    if succeeded:
        p.events.append(Event("Normal", "RestoreDone", "restore %s: %s%s" % (record["name"], message, back)))
    else:
        p.events.append(Event("Warning", "RestoreFailed", "restore %s: %s%s" % (record["name"], message, back)))
    return dict(record, phase=PHASE_SUCCEEDED if succeeded else PHASE_FAILED, message=message,
                completionTime=now_text(p))


def recorded_request(record: Mapping[str, Any]) -> Restore:
    """The restore as its record has it (not the spec's, which may have changed since)."""
    parts = record["parts"]
    return Restore(name=record["name"], snapshot=record["snapshot"], jail=C.BACKUP_PART_JAIL in parts,
                   jail_paths=list(record.get("jailPaths") or ["/"]), exact=bool(record.get("exact")),
                   controller_state=C.BACKUP_PART_CONTROLLER_STATE in parts,
                   accounting_database=C.BACKUP_PART_DATABASE in parts)


def held_components(parts: Sequence[str]) -> FrozenSet[str]:
    """The components held at no pods while PARTS are restored."""
    return frozenset(WRITER[part] for part in parts if part in WRITER)


def still_running(p: Pass, components: FrozenSet[str]) -> List[str]:
    """The pods of COMPONENTS that are still there (terminating ones too: they may still write)."""
    left: List[str] = []
    for component in sorted(components):
        pods = p.kube.list("v1", "Pod", p.cluster.namespace, names.selector_labels(p.cluster.name, component))
        left += sorted(pod["metadata"]["name"] for pod in pods)
    return left


def upgrade_under_way(status: Mapping[str, Any]) -> bool:
    """A Slurm image rolling out in Slurm's order, or tried by its pre-flight."""
    slurm = status.get("slurm") or {}
    return bool(slurm.get("rollout") or slurm.get("preflight"))


def now_text(p: Pass) -> str:
    return p.clock().strftime("%Y-%m-%dT%H:%M:%SZ")


def without_message(record: Dict[str, Any]) -> Dict[str, Any]:
    """The record once what its message said (what it waited for) is over."""
    record.pop("message", None)
    return record
