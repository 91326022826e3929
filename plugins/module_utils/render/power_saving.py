# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm.conf's part for on-demand node sets (spec.maxReplicas): Slurm's power saving settings and
the sets' CLOUD node lines."""

from __future__ import annotations

import re
from typing import Any, Dict, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    node_conf,
    node_range,
    nodes_at_most,
    nodeset_object_name,
    on_demand,
    slurm_cpus,
    slurm_real_memory_mib,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import NodeSet

# Slurm's power saving, when a node set is on demand (spec.maxReplicas). Slurm decides which nodes
# to resume and suspend, and runs these programs as SlurmUser in the controller pod; the operator
# reads the nodes' power states (POWERING_UP, POWERING_DOWN) and makes or deletes their pods, so
# the programs have nothing to do. A resume waits for image pulls and a new Kubernetes node: 300 s
# (Slurm's 60 s is a machine's boot from its disk). Rates unlimited: a pod is no power surge.
POWER_SAVING = {
    "ResumeProgram": "/bin/true",
    "SuspendProgram": "/bin/true",
    "ResumeTimeout": 300,
    "ResumeRate": 0,
    "SuspendRate": 0,
}


def power_saving_settings(nodesets: Sequence[NodeSet]) -> Dict[str, Any]:
    """Power saving's settings: none without an on-demand node set. Each such set keeps `replicas`
    of its nodes powered up (SuspendExcNodes' '<nodes>:<count>'); their SuspendTime is per node."""
    ordered = sorted((ns for ns in nodesets if on_demand(ns)), key=lambda ns: ns.name)
    if not ordered:
        return {}
    settings: Dict[str, Any] = dict(POWER_SAVING)
    kept = ["%s:%d" % (node_range(nodeset_object_name(ns), nodes_at_most(ns)), ns.spec.replicas)
            for ns in ordered if ns.spec.replicas]
    if kept:
        settings["SuspendExcNodes"] = kept
    return settings


def cloud_node_words(nodeset: NodeSet) -> str:
    """What slurm.conf says of each node of an on-demand set after its name: CLOUD nodes, powered
    down until Slurm resumes them, sized as the pods' slurmd reports them (the words of `slurmd -Z
    --conf`). The set's PodTemplate keeps them too, so that a deleted set's nodes stay declared
    until they are powered down (operator/nodes.py)."""
    return "State=CLOUD CPUs=%d RealMemory=%d %s SuspendTime=%d" % (
        slurm_cpus(nodeset), slurm_real_memory_mib(nodeset), node_conf(nodeset), nodeset.spec.suspend_time_seconds)


# The words cloud_node_words writes (features and GRES as the model's rules allow them): nothing
# else may follow a NodeName= (no other key, no second line).
CLOUD_NODE_WORDS = re.compile(r"State=CLOUD CPUs=[0-9]+ RealMemory=[0-9]+ Feature=[A-Za-z0-9_.,-]+ "
                              r"MemSpecLimit=[0-9]+( Gres=[A-Za-z0-9_.:,-]+)? SuspendTime=[0-9]+")


def are_cloud_node_words(words: str) -> bool:
    """Whether these are words cloud_node_words writes (a deleted set's, read back from its template)."""
    return CLOUD_NODE_WORDS.fullmatch(words) is not None


def cloud_nodes_line(base: str, count: int, words: str) -> str:
    """The NodeName= line of the nodes '<base>-0' to '<base>-<count - 1>'."""
    return "NodeName=%s %s" % (node_range(base, count), words)
