# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the slurm_cluster_info module reads: the SlurmCluster's status and slurmctld's own view.

Slurm is asked through its command-line tools with JSON output, run in the controller pod
through the exec API, as the operator does (slurm.py). Only reads; nothing is changed.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube, KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.operator.reconcile import CONTROLLER_CONTAINER
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import nodes_by_state, pod_ready
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmError, parse_nodes

Runner = Callable[[Sequence[str]], Tuple[int, str, str]]

NODES_COMMAND = ("scontrol", "show", "nodes", "--json")
PARTITIONS_COMMAND = ("scontrol", "show", "partitions", "--json")
# Slurm's partition JSON has no Default flag; the one-line text form has it.
PARTITION_LINES_COMMAND = ("scontrol", "--oneliner", "show", "partitions")
JOBS_COMMAND = ("squeue", "--json")


class ClusterInfoError(Exception):
    """The cluster cannot be read; the message says which option or object is wrong."""


def number(value: Any) -> Optional[int]:
    """A Slurm JSON number: plain, or {set, infinite, number}; None when unset or infinite."""
    if isinstance(value, Mapping):
        if not value.get("set") or value.get("infinite"):
            return None
        return int(value.get("number") or 0)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def node_facts(text: str) -> List[Dict[str, Any]]:
    """Nodes from `scontrol show nodes --json`, sorted by name."""
    nodes = json.loads(text).get("nodes") or []
    return sorted(({
        "name": node["name"],
        "state": list(node.get("state") or []),
        "reason": node.get("reason") or "",
        "cpus": number(node.get("cpus")),
        "alloc_cpus": number(node.get("alloc_cpus")),
        "real_memory_mb": number(node.get("real_memory")),
        "partitions": list(node.get("partitions") or []),
        "features": list(node.get("active_features") or node.get("features") or []),
    } for node in nodes), key=lambda n: n["name"])


def default_partitions(text: str) -> Set[str]:
    """Names of the partitions whose one-line form says Default=YES."""
    names = set()
    for line in text.splitlines():
        words = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if words.get("Default") == "YES" and "PartitionName" in words:
            names.add(words["PartitionName"])
    return names


def partition_facts(text: str, defaults: Set[str]) -> List[Dict[str, Any]]:
    """Partitions from `scontrol show partitions --json`, in slurm.conf order."""
    out = []
    for part in json.loads(text).get("partitions") or []:
        nodes = part.get("nodes") or {}
        out.append({
            "name": part["name"],
            "state": list((part.get("partition") or {}).get("state") or []),
            "default": part["name"] in defaults,
            "nodes": nodes.get("configured") or "",
            "total_nodes": number(nodes.get("total")),
            "total_cpus": number((part.get("cpus") or {}).get("total")),
            "node_sets": [s for s in (part.get("node_sets") or "").split(",") if s],
            "max_time_minutes": number((part.get("maximums") or {}).get("time")),
        })
    return out


def job_facts(text: str) -> List[Dict[str, Any]]:
    """Jobs from `squeue --json`, by id."""
    jobs = json.loads(text).get("jobs") or []
    return sorted(({
        "job_id": int(job["job_id"]),
        "name": job.get("name") or "",
        "user": job.get("user_name") or "",
        "state": list(job.get("job_state") or []),
        "state_reason": job.get("state_reason") or "",
        "partition": job.get("partition") or "",
        "nodes": job.get("nodes") or "",
        "node_count": number(job.get("node_count")),
    } for job in jobs), key=lambda j: j["job_id"])


def call(run: Runner, argv: Sequence[str]) -> str:
    """A Slurm command's output; SlurmError with its error output when it fails."""
    code, out, err = run(list(argv))
    if code != 0:
        raise SlurmError("%s failed (exit %d): %s" % (" ".join(argv), code, (err or out).strip()))
    return out


def slurm_facts(run: Runner, include_jobs: bool) -> Dict[str, Any]:
    """Nodes, partitions, jobs and node counts by state, as slurmctld reports them."""
    nodes_text = call(run, NODES_COMMAND)
    defaults = default_partitions(call(run, PARTITION_LINES_COMMAND))
    facts: Dict[str, Any] = {
        "nodes": node_facts(nodes_text),
        "nodes_by_state": nodes_by_state(parse_nodes(nodes_text)),
        "partitions": partition_facts(call(run, PARTITIONS_COMMAND), defaults),
        "jobs": job_facts(call(run, JOBS_COMMAND)) if include_jobs else [],
    }
    return facts


def controller_pod(kube: Kube, name: str, namespace: str) -> Optional[str]:
    """A ready controller pod of the cluster, or None."""
    pods = kube.list("v1", "Pod", namespace, {C.LABEL_CLUSTER: name, C.LABEL_COMPONENT: C.COMPONENT_CONTROLLER})
    ready = sorted(p["metadata"]["name"] for p in pods if pod_ready(p))
    return ready[0] if ready else None


def gather(kube: Kube, name: str, namespace: str, include_jobs: bool) -> Dict[str, Any]:
    """Everything the module returns; Slurm's part is empty, with the reason, while slurmctld cannot answer."""
    obj = kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, name, namespace)
    if obj is None:
        raise ClusterInfoError("name: no SlurmCluster %s in namespace %s" % (name, namespace))
    out: Dict[str, Any] = {"status": obj.get("status") or {}, "spec": obj.get("spec") or {},
                           "slurm_reachable": False, "nodes": [], "nodes_by_state": {}, "partitions": [],
                           "jobs": []}
    pod = controller_pod(kube, name, namespace)
    if pod is None:
        out["slurm_error"] = "no ready controller pod of SlurmCluster %s/%s" % (namespace, name)
        return out
    try:
        out.update(slurm_facts(lambda argv: kube.exec(namespace, pod, CONTROLLER_CONTAINER, argv), include_jobs))
    except (SlurmError, KubeError, ValueError) as exc:
        out["slurm_error"] = str(exc)
        return out
    out["slurm_reachable"] = True
    return out
