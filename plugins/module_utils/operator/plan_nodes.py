# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What to do to a node set's Slurm nodes and pods next: pure decisions, no I/O.

Scale-down drains the nodes that go, waits until they are idle (or requeues their jobs once
the drain timeout has passed), removes them from slurmctld and only then lets the
StatefulSet delete their pods, so `sinfo` never lists a node that no longer exists and no
job is killed without being requeued. Updates replace one node at a time, each drained and
idle first. Replacement (spec.healthChecks.replaceDrainedNodes) deletes the pod of an idle
node that the health checks drained for a hardware reason, one per node set at a time, and
resumes the node once its new pod is ready. Evictions: a node whose Kubernetes node is being
emptied is drained, its jobs finish or are requeued after the drain timeout, and only a node
with no job may be evicted (the disruption budget covers the others). A node whose Kubernetes
node stopped reporting is set DOWN, and its pod deleted by force after a timeout. The decisions
depend only on what Slurm and Kubernetes report: the drain reasons carry their start time, so
an operator restart picks up where it was.
"""

from __future__ import annotations

import datetime
from typing import Any, Callable, FrozenSet, List, Mapping, NamedTuple, Optional, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import (
    parse_time,
    pod_ready,
    pod_terminating,
    pod_waiting,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import NodeSetSpec
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmNode
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.drain import (
    PURPOSE_EVICTION,
    PURPOSE_REPLACE,
    PURPOSE_SCALE_DOWN,
    PURPOSE_UPDATE,
    drain_reason,
    is_hardware_drain,
    node_lost_reason,
    parse_drain_reason,
)

# A deleted NodeSet has no drainTimeoutSeconds any more: its nodes get the model's default.
RETIRE_DRAIN_TIMEOUT_SECONDS = NodeSetSpec.__dataclass_fields__["drain_timeout_seconds"].default


class NodeAction(NamedTuple):
    """One step on one node: drain, down, resume, requeue (its jobs), delete (from Slurm),
    delete-pod, force-delete-pod (its Kubernetes node is lost)."""

    kind: str
    node: str
    reason: str = ""


class ScalePlan(NamedTuple):
    """Where a node set's StatefulSet should be now, and the node steps to get closer."""

    replicas: int
    actions: List[NodeAction]
    leaving: List[str]


def _ours(node: SlurmNode, purpose: str) -> Optional[datetime.datetime]:
    parsed = parse_drain_reason(node.reason) if node.draining else None
    return parsed[1] if parsed and parsed[0] == purpose else None


def _leave_step(node: SlurmNode, now: datetime.datetime, timeout: datetime.timedelta) -> Optional[NodeAction]:
    """The next step for a node that must leave the cluster, None while waiting for its jobs."""
    if not node.draining:
        return NodeAction("drain", node.name, drain_reason(PURPOSE_SCALE_DOWN, now))
    if not node.busy:
        return NodeAction("delete", node.name)
    since = _ours(node, PURPOSE_SCALE_DOWN)
    if since is not None and now - since >= timeout:
        return NodeAction("requeue", node.name, "scale-down: drain timeout of %ds passed" % timeout.total_seconds())
    return None


def plan_scale(base: str, desired: int, current: int, nodes: Mapping[str, SlurmNode],
               now: datetime.datetime, drain_timeout_seconds: int,
               gone: Callable[[SlurmNode], bool] = lambda node: False) -> ScalePlan:
    """Steps for a node set whose pods are '<base>-<ordinal>'.

    Scaling up is immediate (new pods register themselves), and nodes we drained for an
    earlier scale-down that are wanted again are resumed. Scaling down keeps a pod until its
    node is gone from Slurm (or `gone` says so of it: an on-demand set's powered-down node); the
    StatefulSet shrinks past a node only then.
    """
    actions: List[NodeAction] = []
    for ordinal in range(min(desired, current)):
        node = nodes.get(names.pod(base, ordinal))
        if node is not None and _ours(node, PURPOSE_SCALE_DOWN) is not None:
            actions.append(NodeAction("resume", node.name))
    if desired >= current:
        return ScalePlan(desired, actions, [])
    timeout = datetime.timedelta(seconds=drain_timeout_seconds)
    leaving = [names.pod(base, ordinal) for ordinal in range(desired, current)]
    staying = {name: node for name, node in nodes.items() if not gone(node)}
    for name in leaving:
        node = staying.get(name)
        step = _leave_step(node, now, timeout) if node is not None else None
        if step is not None:
            actions.append(step)
    replicas = current
    while replicas > desired and names.pod(base, replicas - 1) not in staying:
        replicas -= 1
    return ScalePlan(replicas, actions, [n for n in leaving if n in staying])


class PodView(NamedTuple):
    """What the node planners need to know of a worker pod."""

    name: str
    revision: str
    ready: bool
    terminating: bool
    created: Optional[datetime.datetime] = None
    # Its Kubernetes node is being emptied: cordoned (kubectl drain) or marked for removal.
    leaving_host: bool = False
    # It carries constants.LABEL_EVICTABLE (no disruption budget covers it).
    evictable: bool = False
    # The Kubernetes node it is bound to, and since when that node has not reported (None: it does).
    host: str = ""
    host_lost_since: Optional[datetime.datetime] = None
    # Why it does not run, when it waits: "ErrImagePull: <message>", "Unschedulable: <message>".
    waiting: str = ""


def worker_pods(pods: Sequence[Mapping[str, Any]], leaving_hosts: FrozenSet[str] = frozenset(),
                lost_hosts: Optional[Mapping[str, datetime.datetime]] = None) -> List[PodView]:
    """Worker pods as the node planners see them; LEAVING_HOSTS and LOST_HOSTS are the Kubernetes
    nodes being emptied and those not reporting (since when)."""
    views = []
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        host = (pod.get("spec") or {}).get("nodeName") or ""
        views.append(PodView(pod["metadata"]["name"], labels.get(C.REVISION_LABEL, ""), pod_ready(pod),
                             pod_terminating(pod), parse_time(pod["metadata"].get("creationTimestamp")),
                             leaving_host=host in leaving_hosts, evictable=labels.get(C.LABEL_EVICTABLE) == "true",
                             host=host, host_lost_since=(lost_hosts or {}).get(host), waiting=pod_waiting(pod)))
    return views


def plan_update(pods: Sequence[PodView], target_revision: str, nodes: Mapping[str, SlurmNode],
                now: datetime.datetime) -> List[NodeAction]:
    """Replace outdated pods one at a time, each drained and idle first; resume replaced ones.

    The next node is drained only once the one replaced before it serves again, so a
    configuration that keeps slurmd from coming back stops the rollout at its first node.
    There is no timeout here: a configuration change never requeues a running job.
    """
    actions: List[NodeAction] = []
    returning = []
    for pod in pods:
        node = nodes.get(pod.name)
        if pod.revision == target_revision and pod_is_draining_for_update(node):
            if pod.ready and node.responding:
                actions.append(NodeAction("resume", pod.name))
            else:
                returning.append(pod.name)
    outdated = sorted((p for p in pods if p.revision != target_revision), key=lambda p: p.name)
    if not outdated or returning or any(p.terminating for p in pods):
        return actions
    in_progress = [p for p in outdated if pod_is_draining_for_update(nodes.get(p.name))]
    for pod in in_progress or outdated[:1]:
        node = nodes.get(pod.name)
        if node is None or not node.responding:
            actions.append(NodeAction("delete-pod", pod.name))
        elif not node.draining:
            actions.append(NodeAction("drain", pod.name, drain_reason(PURPOSE_UPDATE, now)))
        elif not node.busy:
            actions.append(NodeAction("delete-pod", pod.name))
    return actions


def pod_is_draining_for_update(node: Optional[SlurmNode]) -> bool:
    """A node we are already replacing."""
    return node is not None and _ours(node, PURPOSE_UPDATE) is not None


def _replacement_step(pod: PodView, node: SlurmNode, since: datetime.datetime) -> Optional[NodeAction]:
    """For a node being replaced: delete its old pod again, resume it once the new one serves, or
    wait (None)."""
    if pod.terminating:
        return None
    if pod.created is not None and pod.created < since:
        return NodeAction("delete-pod", pod.name)  # the old pod is still there: delete it again
    if pod.ready and node.responding:
        return NodeAction("resume", pod.name)
    return None


def plan_replacements(pods: Sequence[PodView], nodes: Mapping[str, SlurmNode],
                      now: datetime.datetime) -> List[NodeAction]:
    """Steps that replace a node set's hardware-drained idle nodes, one at a time.

    The node's reason is first rewritten to '<prefix> replace since <now>' (the old reason goes
    to the Event): the fast check never resumes that form, the node stays drained while its pod
    is gone, and the time tells the new pod from the old. A pod missing altogether is the
    StatefulSet's to recreate; nothing is done until it exists.
    """
    actions: List[NodeAction] = []
    busy_replacing = False
    for pod in sorted(pods, key=lambda p: p.name):
        node = nodes.get(pod.name)
        since = _ours(node, PURPOSE_REPLACE) if node is not None else None
        if node is None or since is None:
            continue
        step = _replacement_step(pod, node, since)
        if step is not None:
            actions.append(step)
        busy_replacing = True  # the next replacement starts once this node is back in service
    if busy_replacing:
        return actions
    for pod in sorted(pods, key=lambda p: p.name):
        node = nodes.get(pod.name)
        if node is None or pod.terminating or not node.draining or node.busy or not is_hardware_drain(node.reason):
            continue
        actions.append(NodeAction("drain", pod.name, drain_reason(PURPOSE_REPLACE, now)))
        actions.append(NodeAction("delete-pod", pod.name, node.reason))
        break
    return actions


def evictable(node: Optional[SlurmNode]) -> bool:
    """An eviction may take the pod now: its node runs no job (or is not a Slurm node)."""
    return node is None or not node.busy


def plan_evictions(pods: Sequence[PodView], nodes: Mapping[str, SlurmNode], now: datetime.datetime,
                   drain_timeout_seconds: int) -> List[NodeAction]:
    """Empty the nodes whose Kubernetes node is being emptied, and take them back after.

    A worker on a leaving host is drained ('<prefix> kubernetes eviction since <now>'): its jobs
    finish, or are requeued once the drain timeout has passed, and the node becomes evictable.
    An admin's or another planned drain is left as it is (the disruption budget still waits for
    the jobs). The drain is lifted once the node's pod runs and answers on a host that stays
    (the evicted pod's replacement, or the same pod when the host was uncordoned).
    """
    actions: List[NodeAction] = []
    timeout = datetime.timedelta(seconds=drain_timeout_seconds)
    for pod in sorted(pods, key=lambda p: p.name):
        node = nodes.get(pod.name)
        if node is None or pod.terminating:
            continue
        since = _ours(node, PURPOSE_EVICTION)
        if pod.leaving_host and not node.draining:
            actions.append(NodeAction("drain", pod.name, drain_reason(PURPOSE_EVICTION, now)))
        elif pod.leaving_host and since is not None and node.busy and now - since >= timeout:
            actions.append(NodeAction("requeue", pod.name, "kubernetes eviction: drain timeout of %ds passed"
                                      % drain_timeout_seconds))
        elif not pod.leaving_host and since is not None and pod.ready and node.responding:
            actions.append(NodeAction("resume", pod.name))
    return actions


def plan_lost_hosts(pods: Sequence[PodView], nodes: Mapping[str, SlurmNode], now: datetime.datetime,
                    timeout_seconds: int) -> List[NodeAction]:
    """Steps for the pods whose Kubernetes node stopped reporting (NotReady, after Kubernetes'
    own grace period).

    Their Slurm nodes go DOWN at once ('<prefix> kubernetes node <name> lost'), as Slurm itself
    would after SlurmdTimeout: it requeues their jobs, which start elsewhere. A drained node keeps
    its reason (an admin's drain survives the node's return). Once the node has been lost for
    the timeout, the pod is deleted by force: Kubernetes never removes a pod whose kubelet cannot
    confirm it stopped, and the StatefulSet makes a pod again only once the old one is gone. The
    new pod's registration returns the node to service (ReturnToService=2), as does the old one's
    when its Kubernetes node comes back first.
    """
    actions: List[NodeAction] = []
    timeout = datetime.timedelta(seconds=timeout_seconds)
    for pod in sorted(pods, key=lambda p: p.name):
        if pod.host_lost_since is None:
            continue
        node = nodes.get(pod.name)
        if node is not None and "DOWN" not in node.states:
            reason = node.reason if node.draining and node.reason else node_lost_reason(pod.host)
            actions.append(NodeAction("down", pod.name, reason))
        if timeout_seconds and now - pod.host_lost_since >= timeout:
            actions.append(NodeAction("force-delete-pod", pod.name, "kubernetes node %s lost for %ds or more"
                                      % (pod.host, timeout_seconds)))
    return actions


# slurmd registers a dynamic node within seconds of starting; a pod that has been Ready this
# long without its node in Slurm lost its registration (its node was deleted from slurmctld
# by an interrupted scale-down, or by hand) and only a new slurmd registers again.
REGISTRATION_GRACE_SECONDS = 60


def plan_reregistration(base: str, desired: int, pods: Sequence[PodView], nodes: Mapping[str, SlurmNode],
                        now: datetime.datetime) -> List[NodeAction]:
    """Delete the pods that run but are not Slurm nodes, so that their replacements register.

    Only the ordinals the node set wants count: a pod past them whose node has left Slurm is
    waiting for the StatefulSet to shrink, and a new one would register again.
    """
    grace = datetime.timedelta(seconds=REGISTRATION_GRACE_SECONDS)
    wanted = {names.pod(base, ordinal) for ordinal in range(desired)}
    return [NodeAction("delete-pod", pod.name, "running but not registered with slurmctld")
            for pod in sorted(pods, key=lambda p: p.name)
            if pod.name in wanted and pod.name not in nodes and pod.ready and not pod.terminating
            and pod.created is not None and now - pod.created >= grace]
