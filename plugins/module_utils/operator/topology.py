# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the workers run, for topology.conf from a switch label (spec.slurm.switchLabel).

Slurm 24.11's dynamic nodes cannot say their switch when they register (slurmd's Topology=
came in 25.05), so the operator reads it: each worker pod's Kubernetes node, that node's
label value. The renderer turns the mapping into switches; a pod moved to another machine,
or a relabelled machine, changes topology.conf, and the reconfigure step makes it Slurm's.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import pods_by_name
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster


def switch_placement(pods: Sequence[Mapping[str, Any]], hosts: Sequence[Mapping[str, Any]],
                     label: str) -> Dict[str, str]:
    """Each scheduled worker (its pod's name is its Slurm node's) -> the label's value on the
    machine under it; '' where the machine lacks the label or is not known. A pod not yet
    scheduled has no Slurm node yet and is left out."""
    values = {h["metadata"]["name"]: (h["metadata"].get("labels") or {}).get(label, "") for h in hosts}
    placement = {}
    for pod in pods:
        host = (pod.get("spec") or {}).get("nodeName")
        if host:
            placement[pod["metadata"]["name"]] = values.get(host, "")
    return placement


def read_switch_placement(kube: Kube, cluster: SlurmCluster) -> Dict[str, str]:
    """switch_placement for the cluster's workers as they run now; nothing is read (and {} is
    returned) when the cluster takes no topology from labels."""
    label = cluster.spec.slurm.switch_label
    if not label:
        return {}
    pods = pods_by_name(kube, cluster.namespace, names.selector_labels(cluster.name, C.COMPONENT_WORKER))
    return switch_placement(pods, kube.list("v1", "Node"), label)
