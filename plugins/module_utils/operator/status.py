# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the operator reports: the SlurmCluster's conditions and the phase they add up to, and Events."""

from __future__ import annotations

import datetime
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

# What time it is (UTC); tests pass a fixed one.
Clock = Callable[[], datetime.datetime]


class Event(NamedTuple):
    """A Kubernetes Event the caller should emit on the SlurmCluster."""

    kind: str  # Normal | Warning
    reason: str
    message: str


def condition(kind: str, ok: bool, reason: str, message: str, generation: int,
              previous: Sequence[Mapping[str, Any]], now: datetime.datetime) -> Dict[str, Any]:
    """A status condition; its transition time moves only when its status changes."""
    status = "True" if ok else "False"
    before = next((c for c in previous if c.get("type") == kind), None)
    since = before["lastTransitionTime"] if before and before.get("status") == status else \
        now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": since, "observedGeneration": generation}


def ready_condition(conditions: Sequence[Mapping[str, Any]], generation: int,
                    previous: Sequence[Mapping[str, Any]], now: datetime.datetime) -> Dict[str, Any]:
    """'Ready' (what `kubectl wait --for=condition=Ready` reads): every other condition holds;
    otherwise its reason is the first that does not, and the message says what is missing."""
    failing = [c for c in conditions if c["status"] != "True"]
    if not failing:
        return condition("Ready", True, "AllReady", "controller, jail, login nodes and workers are ready",
                         generation, previous, now)
    return condition("Ready", False, failing[0]["type"], "; ".join(c["message"] for c in failing),
                     generation, previous, now)


def phase_of(conditions: List[Mapping[str, Any]]) -> str:
    """Ready when every condition holds, Pending until the controller runs, else Provisioning."""
    by_type = {c["type"]: c["status"] == "True" for c in conditions}
    if all(by_type.values()):
        return C.PHASE_READY
    if not by_type.get("ControllerReady", False):
        return C.PHASE_PENDING
    return C.PHASE_PROVISIONING


def without_empty_maps(status: Mapping[str, Any]) -> Dict[str, Any]:
    """The status to apply: server-side apply turns an empty map into null, which the CRD
    schema refuses (a map we applied before and now leave out is removed, as it should be). At
    every depth: status.restKeys.retiring empties once the last retiring key left, and the API
    server then refused every status write of the cluster (its backups' included)."""
    out: Dict[str, Any] = {}
    for key, value in status.items():
        if isinstance(value, Mapping):
            value = without_empty_maps(value)
            if not value:
                continue
        out[key] = value
    return out


def status_unchanged(status: Any, live: Any) -> bool:
    """Every field of the status we would write already has that value in the live status
    (fields only the live one has, such as kopf's, do not count)."""
    if isinstance(status, Mapping):
        return isinstance(live, Mapping) and all(status_unchanged(v, live.get(k)) for k, v in status.items())
    return status == live
