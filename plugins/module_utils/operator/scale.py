# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pass's plan: how many pods each worker StatefulSet keeps now, and the node steps a
scale-down takes (plan_nodes.plan_scale). Made once, before the render: the renderer writes
the planned replicas, and nodes.py carries out the steps after the apply."""

from __future__ import annotations

from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import nodeset_object_name
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import Pass, Scaling
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_nodes import ScalePlan, plan_scale


def plan_scaling(p: Pass) -> None:
    """Each live worker StatefulSet's scale plan, by node set name (a node set without one yet
    is made with its spec's replicas)."""
    now = p.clock()
    for nodeset in p.nodesets:
        name = nodeset_object_name(nodeset)
        live = p.kube.get("apps/v1", "StatefulSet", name, p.cluster.namespace)
        if live is None:
            continue
        current = int(live["spec"]["replicas"])
        if p.slurm_nodes is None:
            # Slurm cannot be asked: removing a pod now could kill a job.
            plan = ScalePlan(max(current, nodeset.spec.replicas), [], [])
        else:
            plan = plan_scale(name, nodeset.spec.replicas, current, p.slurm_nodes, now,
                              nodeset.spec.drain_timeout_seconds)
        p.scaling[nodeset.name] = Scaling(live, plan)
