# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the slurm_cluster_info module reads: the SlurmCluster's status and slurmctld's own view.

Slurm is asked through its command-line tools with JSON output, run in the controller pod
through the exec API, as the operator does (slurm/runner.py, slurm/facts.py). Only reads;
nothing is changed.
"""

from __future__ import annotations

from typing import Any, Dict, List

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube, KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmError
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.facts import accounting_facts, slurm_facts
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.runner import controller_control


class ClusterInfoError(SlurmkubeError):
    """The cluster cannot be read; the message says which option or object is wrong."""


def gather(kube: Kube, name: str, namespace: str, include_jobs: bool) -> Dict[str, Any]:
    """Everything the module returns; Slurm's part is empty, with the reason, while slurmctld cannot answer."""
    obj = kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, name, namespace)
    if obj is None:
        raise ClusterInfoError("name: no SlurmCluster %s in namespace %s" % (name, namespace))
    out: Dict[str, Any] = {"status": obj.get("status") or {}, "spec": obj.get("spec") or {},
                           "slurm_reachable": False, "nodes": [], "nodes_by_state": {}, "partitions": [],
                           "jobs": [], "accounting": {}}
    slurm = controller_control(kube, name, namespace)
    if slurm is None:
        out["slurm_error"] = "no ready controller pod of SlurmCluster %s/%s" % (namespace, name)
        return out
    try:
        out.update(slurm_facts(slurm, include_jobs))
        if (out["spec"].get("accounting") or {}).get("enabled"):
            out["accounting"] = accounting_facts(slurm)
    except (SlurmError, KubeError, ValueError) as exc:
        out["slurm_error"] = str(exc)
        return out
    out["slurm_reachable"] = True
    return out


def listed(kube: Kube, namespace: str) -> List[Dict[str, Any]]:
    """The namespace's SlurmClusters, by name: each one's name, namespace, spec and status (no
    Slurm is asked: a listing costs one API call however many clusters there are)."""
    return [{"name": obj["metadata"]["name"], "namespace": obj["metadata"].get("namespace", namespace),
             "spec": obj.get("spec") or {}, "status": obj.get("status") or {}}
            for obj in sorted(kube.list(C.GROUP_VERSION, C.KIND_CLUSTER, namespace),
                              key=lambda obj: obj["metadata"]["name"])]
