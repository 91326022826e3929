# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure wait predicates and status reports computed from live objects."""

from __future__ import annotations

import datetime
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmNode

PHASE_INVALID = "Invalid"
PHASE_PENDING = "Pending"
PHASE_PROVISIONING = "Provisioning"
PHASE_READY = "Ready"


def statefulset_counts(sts: Optional[Mapping[str, Any]]) -> Dict[str, int]:
    """Ready and desired pods of a StatefulSet (0/0 when it does not exist yet)."""
    if not sts:
        return {"ready": 0, "desired": 0}
    return {"ready": int((sts.get("status") or {}).get("readyReplicas") or 0),
            "desired": int(sts["spec"].get("replicas") or 0)}


def statefulset_ready(sts: Optional[Mapping[str, Any]]) -> bool:
    """Every wanted pod is Ready and the controller has seen the latest spec."""
    if not sts:
        return False
    status = sts.get("status") or {}
    counts = statefulset_counts(sts)
    current = status.get("observedGeneration") == sts["metadata"].get("generation")
    return current and counts["ready"] == counts["desired"]


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """The pod's Ready condition is True and it is not being deleted."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pod_running(pod: Mapping[str, Any]) -> bool:
    """The pod's containers have started (ready or not) and it is not being deleted."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (pod.get("status") or {}).get("phase") == "Running"


def job_complete(job: Optional[Mapping[str, Any]]) -> bool:
    """A batch Job has succeeded."""
    return bool(job) and int((job.get("status") or {}).get("succeeded") or 0) > 0


def nodes_by_state(nodes: Sequence[SlurmNode]) -> Dict[str, int]:
    """Count of Slurm nodes per base state plus drain (idle, allocated, mixed, down, drain)."""
    counts: Dict[str, int] = {}
    for node in nodes:
        base = sorted(s for s in node.states if s in ("IDLE", "ALLOCATED", "MIXED", "DOWN", "FUTURE"))
        for state in base + (["DRAIN"] if node.draining else []):
            counts[state.lower()] = counts.get(state.lower(), 0) + 1
    return counts


def condition(kind: str, ok: bool, reason: str, message: str, generation: int,
              previous: Sequence[Mapping[str, Any]], now: datetime.datetime) -> Dict[str, Any]:
    """A status condition; its transition time moves only when its status changes."""
    status = "True" if ok else "False"
    before = next((c for c in previous if c.get("type") == kind), None)
    since = before["lastTransitionTime"] if before and before.get("status") == status else \
        now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": since, "observedGeneration": generation}


def phase_of(conditions: List[Mapping[str, Any]]) -> str:
    """Ready when every condition holds, Pending until the controller runs, else Provisioning."""
    by_type = {c["type"]: c["status"] == "True" for c in conditions}
    if all(by_type.values()):
        return PHASE_READY
    if not by_type.get("ControllerReady", False):
        return PHASE_PENDING
    return PHASE_PROVISIONING


def without_empty_maps(status: Mapping[str, Any]) -> Dict[str, Any]:
    """The status to apply: server-side apply turns an empty map into null, which the CRD
    schema refuses (a map we applied before and now leave out is removed, as it should be)."""
    return {key: value for key, value in status.items() if value != {}}
