# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The quick look between passes at a cluster with on-demand node sets: a pod for each node Slurm
just resumed, none for a node it powered down. A job waits for its nodes' pods, so this runs every
few seconds (the operator's power loop) rather than at the pass's pace; everything else about these
nodes (the nodes kept up, failed resumes, updates, a smaller maxReplicas) stays with the pass.

It makes pods only from the sets' templates as the last pass rendered them (pass_state.NodeTemplates,
with their node counts and revisions), never from the live PodTemplates: a cluster without an
on-demand set costs nothing a cycle, one with them one Slurm call and one pod list.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import (
    pods_by_name,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import NodeTemplates
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_nodes import NodeAction, worker_pods
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_power import node_pod, plan_power
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import nodes_by_name
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.runner import controller_control

# What the quick look does; the other steps of plan_power wait for the pass.
QUICK_STEPS = frozenset(("make-pod", "delete-pod"))


class PowerReport(NamedTuple):
    """What one power cycle did: the pod steps, in order."""

    actions: List[NodeAction]


def power_cycle(kube: Kube, cluster_obj: Mapping[str, Any], kept: NodeTemplates) -> Optional[PowerReport]:
    """Make and delete the pods Slurm's power states call for; None for a cluster with no on-demand
    node set (as its passes rendered it), or whose controller cannot be asked."""
    meta = cluster_obj["metadata"]
    namespace, cluster = meta["namespace"], meta["name"]
    templates = [template for _base, template in sorted(kept.of(namespace, cluster).items())]
    if not templates:
        return None
    control = controller_control(kube, cluster, namespace)
    if control is None:
        return None
    nodes = nodes_by_name(control.nodes())
    pods = pods_by_name(kube, namespace, names.selector_labels(cluster, C.COMPONENT_WORKER))
    done: List[NodeAction] = []
    for template in templates:
        for action in quick_steps(template, pods, nodes):
            if action.kind == "make-pod":
                kube.create(node_pod(template, action.node, cluster_obj))
            else:
                kube.delete("v1", "Pod", action.node, namespace)
            kube.post_event(cluster_obj, "Normal", event_reason(action.kind),
                            "%s %s: %s" % (action.kind, action.node, action.reason), C.OPERATOR_NAME)
            done.append(action)
    return PowerReport(done)


def event_reason(kind: str) -> str:
    """The Event reason of a pod step, as the pass names it (NodeMakePod, NodeDeletePod)."""
    return "Node" + kind.title().replace("-", "")


def quick_steps(template: Mapping[str, Any], pods: List[Dict[str, Any]], nodes: Mapping[str, Any]) -> List[NodeAction]:
    """The pod steps of one on-demand set, from its PodTemplate and the cluster's worker pods."""
    meta = template["metadata"]
    nodeset = (meta.get("labels") or {}).get(C.LABEL_NODESET)
    count = str((meta.get("annotations") or {}).get(C.ANNOTATION_NODES, ""))
    if not count.isdigit():
        return []
    views = worker_pods([pod for pod in pods if (pod["metadata"].get("labels") or {}).get(C.LABEL_NODESET) == nodeset])
    steps = plan_power(meta["name"], int(count), 0, views, nodes)
    # A failed resume's pod stays for the pass: its status is what the node's reason will say.
    failed = {a.node for a in steps if a.kind == "resume-failed"}
    return [a for a in steps if a.kind in QUICK_STEPS and a.node not in failed]
