# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which pods run, and which of a component are ready: the one pod lookup (and Kubernetes timestamps,
and whether the nodes under pods report)."""

from __future__ import annotations

import datetime
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube


def utc_now() -> datetime.datetime:
    """The current time in UTC (what Kubernetes timestamps are compared with)."""
    return datetime.datetime.now(datetime.timezone.utc)


def parse_time(text: Optional[str]) -> Optional[datetime.datetime]:
    """A Kubernetes timestamp ('2026-11-22T04:00:00Z'), or None."""
    if not text:
        return None
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)


def host_lost_since(node: Mapping[str, Any]) -> Optional[datetime.datetime]:
    """Since when a Kubernetes node has not reported Ready (its kubelet is gone or failing), or None."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return None if condition.get("status") == "True" else parse_time(condition.get("lastTransitionTime"))
    return None


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """The pod's Ready condition is True and it is not being deleted."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def ready_since(pod: Mapping[str, Any]) -> str:
    """When the pod last became Ready (RFC 3339, so it sorts as text); "" when never."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("lastTransitionTime") or "")
    return ""


def last_ready_pod(pods: Sequence[Mapping[str, Any]]) -> Optional[Mapping[str, Any]]:
    """Of the ready pods, the one that became Ready last; None when none is. Of two slurmctld pods
    both Ready, that is the backup which took over: a pod of a Kubernetes node that stopped
    keeps its Ready condition until the node is found gone (some 40 s)."""
    ready = sorted((ready_since(pod), pod["metadata"]["name"], i) for i, pod in enumerate(pods) if pod_ready(pod))
    return pods[ready[-1][2]] if ready else None


def pod_running(pod: Mapping[str, Any]) -> bool:
    """The pod's containers have started (ready or not) and it is not being deleted."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (pod.get("status") or {}).get("phase") == "Running"


def _waiting_containers(pod: Mapping[str, Any]) -> List[Tuple[str, str, str]]:
    """(image, reason, message) of each of the pod's containers that waits, init containers first."""
    status = pod.get("status") or {}
    out = []
    for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            out.append((container.get("image") or "", waiting["reason"], waiting.get("message") or ""))
    return out


def _reason_line(reason: str, message: str) -> str:
    """A reason and its message as one line: "ErrImagePull: <message>", the reason alone without one."""
    return ("%s: %s" % (reason, message)).rstrip(": ")


def pod_waiting(pod: Mapping[str, Any]) -> str:
    """Why the pod does not run, in its own words: a container's waiting reason and message
    (ErrImagePull, ImagePullBackOff, CrashLoopBackOff...), else its scheduling refusal; "" when
    neither is said."""
    for _image, reason, message in _waiting_containers(pod):
        if reason not in ("PodInitializing", "ContainerCreating"):
            return _reason_line(reason, message)
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return _reason_line(condition.get("reason") or "Unschedulable", condition.get("message") or "")
    return ""


# A container's waiting reasons that say its image cannot be had: the kubelet has failed to pull it
# and backs off (a single ErrImagePull may be a registry's hiccup), or will never try.
IMAGE_PULL_FAILURES = ("ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName")


def image_pull_failures(pod: Mapping[str, Any]) -> List[Tuple[str, str]]:
    """(image, "reason: message") of each of the pod's containers, init containers first, whose
    image cannot be pulled."""
    return [(image, _reason_line(reason, message)) for image, reason, message in _waiting_containers(pod)
            if reason in IMAGE_PULL_FAILURES]


def pod_terminating(pod: Mapping[str, Any]) -> bool:
    """The pod is being deleted."""
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def pods_by_name(kube: Kube, namespace: str, selector: Mapping[str, str]) -> List[Dict[str, Any]]:
    """The pods the labels select, sorted by name."""
    return sorted(kube.list("v1", "Pod", namespace, selector), key=lambda p: p["metadata"]["name"])


def ready_pods(kube: Kube, namespace: str, selector: Mapping[str, str]) -> List[Dict[str, Any]]:
    """The ready pods the labels select, sorted by name."""
    return [pod for pod in pods_by_name(kube, namespace, selector) if pod_ready(pod)]
