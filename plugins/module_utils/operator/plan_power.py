# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an on-demand node set (spec.maxReplicas) needs next: pure decisions, no I/O.

Slurm's power saving decides which of the set's CLOUD nodes run: it resumes those a pending job
was given (POWERING_UP) and suspends those idle for their SuspendTime (POWERING_DOWN, then
POWERED_DOWN). A node runs as a pod, so a pod is made for each node Slurm wants up and deleted
once Slurm powers its node down; a pod never outlives its node's power, since a slurmd that
registers a powered-down node powers it up unasked. The set's `replicas` are kept powered up
(Slurm's SuspendExcNodes keeps them; the operator resumes them when fewer run). A resume that
ends in Slurm's "ResumeTimeout reached" (the node DOWN, its job requeued by Slurm) gets a reason
saying why its pod never registered. A lower maxReplicas drains the nodes past it, powers them
down once idle, and slurm.conf stops declaring them only then.
"""

from __future__ import annotations

import copy
import datetime
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import owned_by
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_nodes import (
    NodeAction,
    PodView,
    ScalePlan,
    plan_scale,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmNode
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.drain import PURPOSE_UPDATE, parse_drain_reason

# Slurm's reason for a node that did not register within ResumeTimeout (power_save.c).
RESUME_TIMEOUT_REASON = "ResumeTimeout reached"
POWERED_OFF = frozenset(("POWERED_DOWN", "POWERING_DOWN"))
# A reason longer than this is cut: it is read in `sinfo -R`, the Event has it whole.
REASON_MAX = 200


def wants_pod(node: SlurmNode) -> bool:
    """Slurm resumed the node or runs it: neither powered down nor powering down."""
    return not node.states & POWERED_OFF


def stays_up(node: SlurmNode) -> bool:
    """Powered up, or on its way, and no suspend asked for."""
    return wants_pod(node) and "POWER_DOWN" not in node.states


def may_power_up(node: SlurmNode) -> bool:
    """Powered down and free to serve: not DOWN, drained or already asked to power up."""
    return ("POWERED_DOWN" in node.states and "POWERING_DOWN" not in node.states
            and not node.states & {"DOWN", "DRAIN", "POWER_UP"})


def resume_failed(node: SlurmNode) -> bool:
    """Slurm gave up on the node's resume: DOWN, powered down, ResumeTimeout's reason."""
    return "DOWN" in node.states and "POWERED_DOWN" in node.states and node.reason == RESUME_TIMEOUT_REASON


def resume_failed_reason(why: str) -> str:
    """The node's reason after a failed resume: what kept its pod from registering."""
    reason = "%s resume failed: %s" % (C.DRAIN_REASON_PREFIX, why)
    return reason if len(reason) <= REASON_MAX else reason[:REASON_MAX - 3] + "..."


def plan_power(base: str, count: int, replicas: int, pods: Sequence[PodView], nodes: Mapping[str, SlurmNode]
               ) -> List[NodeAction]:
    """Steps for the set's nodes '<base>-0' to '<base>-<count - 1>': make-pod, delete-pod, power-up
    (the nodes kept up), resume-failed (its reason is the why)."""
    by_name = {pod.name: pod for pod in pods}
    actions: List[NodeAction] = []
    up = 0
    for ordinal in range(count):
        name = names.pod(base, ordinal)
        node, pod = nodes.get(name), by_name.pop(name, None)
        if node is None:
            continue  # slurmctld has not read the file that declares it yet
        up += stays_up(node)
        if resume_failed(node):
            why = (pod.waiting if pod is not None else "") or "no pod registered within Slurm's ResumeTimeout"
            actions.append(NodeAction("resume-failed", name, resume_failed_reason(why)))
        if wants_pod(node) and pod is None:
            actions.append(NodeAction("make-pod", name, "Slurm resumed %s" % name))
        elif not wants_pod(node) and pod is not None and not pod.terminating:
            actions.append(NodeAction("delete-pod", name, "Slurm powered %s down" % name))
    for pod in sorted(by_name.values(), key=lambda p: p.name):
        if not pod.terminating:
            actions.append(NodeAction("delete-pod", pod.name, "not one of the set's %d nodes" % count))
    for ordinal in range(count):
        if up >= replicas:
            break
        node = nodes.get(names.pod(base, ordinal))
        if node is not None and may_power_up(node):
            actions.append(NodeAction("power-up", node.name, "keeping %d node(s) powered up" % replicas))
            up += 1
    return actions


def plan_node_count(base: str, desired: int, current: int, nodes: Mapping[str, SlurmNode],
                    now: datetime.datetime, drain_timeout_seconds: int) -> ScalePlan:
    """How many CLOUD nodes slurm.conf declares now (`current` as it does), and the steps that let
    the nodes past maxReplicas go: plan_scale's, a node counting as gone once powered down, and an
    idle drained node powered down where a dynamic one would be deleted."""
    plan = plan_scale(base, desired, current, nodes, now, drain_timeout_seconds, gone=powered_down)
    actions = []
    for action in plan.actions:
        if action.kind != "delete":
            actions.append(action)
        elif not nodes[action.node].states & (POWERED_OFF | {"POWER_DOWN"}):
            actions.append(NodeAction("power-down", action.node, "past maxReplicas (%d)" % desired))
    return plan._replace(actions=actions)


def powered_down(node: SlurmNode) -> bool:
    """Suspended, with no resume under way."""
    return "POWERED_DOWN" in node.states and "POWERING_UP" not in node.states


def plan_powered_down_updates(base: str, count: int, nodes: Mapping[str, SlurmNode]) -> List[NodeAction]:
    """Resume powered-down nodes drained for an update: they have no pod to replace, and their next
    pod is made from the new template."""
    actions = []
    for ordinal in range(count):
        node: Optional[SlurmNode] = nodes.get(names.pod(base, ordinal))
        parsed = parse_drain_reason(node.reason) if node is not None and node.draining else None
        if node is not None and parsed and parsed[0] == PURPOSE_UPDATE and powered_down(node):
            actions.append(NodeAction("resume", node.name))
    return actions


def template_revision(template: Mapping[str, Any]) -> str:
    """The revision label of the pods made from an on-demand set's PodTemplate (its renderer wrote it)."""
    return str((template["metadata"].get("annotations") or {}).get(C.ANNOTATION_REVISION, ""))


def node_pod(template: Mapping[str, Any], name: str, owner: Mapping[str, Any]) -> Dict[str, Any]:
    """The pod of an on-demand node: the template's, named as the node (its hostname too, in the
    headless Service's subdomain, as a StatefulSet's pod would be), owned by the cluster."""
    pod = copy.deepcopy(dict(template["template"]))
    meta = pod["metadata"]
    meta.update(name=name, namespace=template["metadata"]["namespace"])
    meta["labels"] = dict(meta.get("labels") or {}, **{C.REVISION_LABEL: template_revision(template)})
    pod["spec"]["hostname"] = name
    return owned_by(dict(pod, apiVersion="v1", kind="Pod"), owner)
