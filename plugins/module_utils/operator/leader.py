# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Leader election over a coordination.k8s.io Lease, so that several operator replicas never act at once.

Expiry is judged on the candidate's own monotonic clock from when it first saw the current
version of the Lease (as client-go does), never by comparing the holder's timestamps with ours: clocks of
two nodes may disagree, the passage of time on one node cannot.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import ConflictError, Kube

LEASE_API = "coordination.k8s.io/v1"


@dataclass(frozen=True)
class LeaseRecord:
    """What a Lease says about its holder."""

    holder: str
    renew_time: str
    duration_seconds: int
    transitions: int
    acquire_time: str


def read_record(lease: Optional[Mapping[str, Any]]) -> Optional[LeaseRecord]:
    """The Lease's record, or None when there is no Lease."""
    if lease is None:
        return None
    spec = lease.get("spec") or {}
    return LeaseRecord(holder=spec.get("holderIdentity") or "", renew_time=spec.get("renewTime") or "",
                       duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
                       transitions=int(spec.get("leaseTransitions") or 0), acquire_time=spec.get("acquireTime") or "")


def micro_time(moment: datetime) -> str:
    """A Lease's MicroTime (RFC 3339 with microseconds, UTC)."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def may_take(record: Optional[LeaseRecord], identity: str, unchanged_for: float) -> bool:
    """We may write ourselves in: no holder, ourselves, or a record nobody renewed for a whole lease."""
    if record is None or not record.holder or record.holder == identity:
        return True
    return unchanged_for > record.duration_seconds


def claimed_spec(record: Optional[LeaseRecord], identity: str, duration_seconds: int, now: str) -> Dict[str, Any]:
    """The Lease spec that makes us the holder (a renewal when we hold it already)."""
    ours = record is not None and record.holder == identity
    return {
        "holderIdentity": identity,
        "leaseDurationSeconds": duration_seconds,
        "acquireTime": record.acquire_time if ours and record is not None else now,
        "renewTime": now,
        "leaseTransitions": (record.transitions if record else 0) + (0 if ours or record is None else 1),
    }


class LeaderElector:
    """One candidate. Call attempt() every few seconds; act only while is_leader() is true.

    Leadership ends on our own clock `renew_deadline` seconds after the last renewal that the
    API server accepted, before any rival may take the Lease (`duration` after it last saw it
    change), so two leaders never overlap while the clocks run at the same rate.
    """

    def __init__(self, kube: Kube, namespace: str, name: str, identity: str, duration: int = 15,
                 renew_deadline: int = 10, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> None:
        if not 0 < renew_deadline < duration:
            raise ValueError("renew_deadline must be shorter than the lease duration")
        self.kube, self.namespace, self.name, self.identity = kube, namespace, name, identity
        self.duration, self.renew_deadline = duration, renew_deadline
        self.clock, self.wall = clock, wall
        self.leader_until = float("-inf")
        self.observed: Tuple[Optional[str], float] = (None, clock())

    def is_leader(self) -> bool:
        """True until renew_deadline after our last accepted renewal."""
        return self.clock() < self.leader_until

    def attempt(self) -> bool:
        """Acquire or renew once; whether we lead now. Losing a race is not an error."""
        started = self.clock()
        lease = self.kube.get(LEASE_API, "Lease", self.name, self.namespace)
        record = read_record(lease)
        # Every write changes the resourceVersion, even one that repeats the same times.
        version = lease["metadata"].get("resourceVersion") if lease else None
        if version != self.observed[0]:
            self.observed = (version, started)
        if not may_take(record, self.identity, started - self.observed[1]):
            return self.is_leader()
        spec = claimed_spec(record, self.identity, self.duration, micro_time(self.wall()))
        try:
            if lease is None:
                self.kube.create(self._lease(spec, None))
            else:
                self.kube.replace(self._lease(spec, lease["metadata"]["resourceVersion"]))
        except ConflictError:
            return self.is_leader()
        self.leader_until = started + self.renew_deadline
        return True

    def release(self) -> None:
        """Hand the Lease back at shutdown so that a standby takes over at once."""
        if not self.is_leader():
            return
        lease = self.kube.get(LEASE_API, "Lease", self.name, self.namespace)
        record = read_record(lease)
        if lease is None or record is None or record.holder != self.identity:
            return
        self.leader_until = float("-inf")  # stop acting before anyone else may start
        spec = dict(claimed_spec(record, self.identity, 1, micro_time(self.wall())), holderIdentity=None)
        with contextlib.suppress(ConflictError):  # someone took it already: nothing to hand back
            self.kube.replace(self._lease(spec, lease["metadata"]["resourceVersion"]))

    def _lease(self, spec: Mapping[str, Any], resource_version: Optional[str]) -> Dict[str, Any]:
        meta: Dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if resource_version:
            meta["resourceVersion"] = resource_version
        return {"apiVersion": LEASE_API, "kind": "Lease", "metadata": meta, "spec": dict(spec)}
