# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one wait loop, and the pure predicates it waits on ("is this StatefulSet ready?")."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import KubeError

POLL_SECONDS = 3.0


class Timer(NamedTuple):
    """How the loop waits and tells time (tests pass a fake one), and how long it sleeps between
    looks (a module's wait_sleep)."""

    sleep: Callable[[float], None]
    clock: Callable[[], float]
    interval: float = POLL_SECONDS


REAL_TIME = Timer(time.sleep, time.monotonic)


class Poll(NamedTuple):
    """One look at what is awaited: done yet, and what was seen (for the caller's message)."""

    done: bool
    seen: Any = None


def wait_until(probe: Callable[[], Poll], timeout: float, timer: Timer = REAL_TIME) -> Poll:
    """Look with probe until it is done or timeout seconds have passed; the last look is returned.

    A probe that sees a failure no waiting can mend (an invalid spec, a failed Job) raises. An API
    error that passes (the server restarting, overloaded, out of reach) does not end a long wait:
    it is raised only when it is still there at the deadline.
    """
    deadline = timer.clock() + timeout
    while True:
        try:
            poll = probe()
        except KubeError as exc:
            if not exc.transient or timer.clock() >= deadline:
                raise
        else:
            if poll.done or timer.clock() >= deadline:
                return poll
        timer.sleep(timer.interval)


def statefulset_counts(sts: Optional[Mapping[str, Any]]) -> Dict[str, int]:
    """Ready and desired pods of a StatefulSet (0/0 when it does not exist yet)."""
    if not sts:
        return {"ready": 0, "desired": 0}
    return {"ready": int((sts.get("status") or {}).get("readyReplicas") or 0),
            "desired": int(sts["spec"].get("replicas") or 0)}


def statefulset_ready(sts: Optional[Mapping[str, Any]]) -> bool:
    """Every wanted pod is Ready, the controller has seen the latest spec, and a rolling update
    of its pods is over (until then the old pods may still be the Ready ones)."""
    if not sts:
        return False
    status = sts.get("status") or {}
    counts = statefulset_counts(sts)
    current = status.get("observedGeneration") == sts["metadata"].get("generation")
    rolled = status.get("updateRevision") == status.get("currentRevision")
    return current and rolled and counts["ready"] == counts["desired"]


def deployment_available(deployment: Optional[Mapping[str, Any]], replicas: int) -> bool:
    """The Deployment's latest spec runs on `replicas` available pods and no others."""
    if not deployment:
        return False
    status = deployment.get("status") or {}
    current = status.get("observedGeneration") == (deployment.get("metadata") or {}).get("generation")
    return (current and int(status.get("updatedReplicas") or 0) >= replicas
            and int(status.get("availableReplicas") or 0) >= replicas and not status.get("unavailableReplicas"))


def deployment_settled(deployment: Optional[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]],
                       replicas: int) -> bool:
    """deployment_available, and no other pod of it left (PODS: those its selector finds): the
    Deployment's counts leave out a pod of the template before that is still shutting down."""
    return deployment_available(deployment, replicas) and len(pods) == replicas \
        and not any((pod.get("metadata") or {}).get("deletionTimestamp") for pod in pods)


def job_outcome(job: Optional[Mapping[str, Any]]) -> Optional[str]:
    """"Complete" or "Failed" once a batch Job has finished, else None."""
    for cond in (job or {}).get("status", {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return cond["type"]
    return None


def job_complete(job: Optional[Mapping[str, Any]]) -> bool:
    """A batch Job has succeeded."""
    return bool(job) and int((job.get("status") or {}).get("succeeded") or 0) > 0
