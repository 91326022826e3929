# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pass's plan: how many pods each worker StatefulSet keeps now, how many CLOUD nodes slurm.conf
declares for each on-demand node set (a deleted one's too, until its nodes are powered down), and
the node steps a scale-down takes (plan_nodes.plan_scale, plan_power.plan_node_count). Made once,
before the render: the renderer writes the planned counts, and nodes.py carries out the steps after
the apply."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import nodeset_object_name, on_demand
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import NodeSet
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import Pass, Scaling
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_nodes import (
    RETIRE_DRAIN_TIMEOUT_SECONDS,
    ScalePlan,
    plan_scale,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_power import plan_node_count


def plan_scaling(p: Pass) -> None:
    """Each live worker StatefulSet's or PodTemplate's scale plan, by node set name (a node set
    without one yet is made with its spec's count)."""
    now = p.clock()
    workers = live_workers(p)
    for nodeset in p.nodesets:
        kind = "PodTemplate" if on_demand(nodeset) else "StatefulSet"
        live = workers.get((kind, nodeset_object_name(nodeset)))
        if live is None:
            continue
        desired, current = planned_counts(p, nodeset, live)
        if p.slurm_nodes is None:
            # Slurm cannot be asked: removing a node now could kill a job.
            plan = ScalePlan(max(current, desired), [], [])
        else:
            planner = plan_node_count if on_demand(nodeset) else plan_scale
            plan = planner(nodeset_object_name(nodeset), desired, current, p.slurm_nodes, now,
                           nodeset.spec.drain_timeout_seconds)
        p.scaling[nodeset.name] = Scaling(live, plan)
    plan_retiring(p, [obj for (kind, _name), obj in sorted(workers.items()) if kind == "PodTemplate"])


def plan_retiring(p: Pass, templates: List[Dict[str, Any]]) -> None:
    """Each deleted on-demand set's plan: its nodes drained, powered down once idle (their jobs
    requeued after the default drain timeout), declared in slurm.conf until then."""
    known = {n.name for n in p.nodesets} | set(p.invalid_nodesets)
    for template in templates:
        meta = template["metadata"]
        if (meta.get("labels") or {}).get(C.LABEL_NODESET) in known:
            continue
        current = declared_count(p, template) or 0
        if p.slurm_nodes is None:
            plan = ScalePlan(current, [], [])
        else:
            plan = plan_node_count(meta["name"], 0, current, p.slurm_nodes, p.clock(), RETIRE_DRAIN_TIMEOUT_SECONDS)
        p.retiring[meta["name"]] = Scaling(template, plan)


def live_workers(p: Pass) -> Dict[Tuple[str, str], Dict[str, Any]]:
    """The live worker StatefulSets and on-demand sets' PodTemplates, by kind and name: two list
    calls however many node sets there are."""
    selector = names.selector_labels(p.cluster.name, C.COMPONENT_WORKER)
    found = {}
    for api_version, kind in (("apps/v1", "StatefulSet"), ("v1", "PodTemplate")):
        for item in p.kube.list(api_version, kind, p.cluster.namespace, selector):
            found[(kind, item["metadata"]["name"])] = item
    return found


def planned_counts(p: Pass, nodeset: NodeSet, live: Dict[str, Any]) -> Tuple[int, int]:
    """(wanted, as live): a StatefulSet's replicas, or the CLOUD nodes an on-demand set declares."""
    if on_demand(nodeset):
        wanted = int(nodeset.spec.max_replicas or 0)
        declared = declared_count(p, live)
        return wanted, wanted if declared is None else declared
    return nodeset.spec.replicas, int(live["spec"]["replicas"])


def declared_count(p: Pass, live: Mapping[str, Any]) -> Optional[int]:
    """How many CLOUD nodes slurm.conf declares for an on-demand set: as the operator last rendered
    its template, or (after a restart) as the live PodTemplate says, at most maxNodeCount (anyone who
    edits the namespace can write it); None when neither says."""
    base = live["metadata"]["name"]
    template = p.templates.template(p.cluster.namespace, p.cluster.name, base) or live
    declared = str((template["metadata"].get("annotations") or {}).get(C.ANNOTATION_NODES, ""))
    return min(int(declared), p.cluster.spec.slurm.max_node_count) if declared.isdigit() else None
