# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the gpu_healthcheck module does: set a cluster's spec.healthChecks, run checks now.

Configuring merges the given settings into the live SlurmCluster's spec.healthChecks (validated
by the model) and applies the spec like slurm_cluster does. Running executes each worker pod's
own fast check (``slurmkube-healthcheck --report``) through the exec API; draining failures
goes through slurmctld in the controller pod, and never rewrites an administrator's drain.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import apply_changed
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube, KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import pod_terminating, pods_by_name
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import Change, ClusterError, cluster_resource
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmError, nodes_by_name
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.drain import fast_check_may_drain, health_reason
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.runner import controller_control, node_report

HEALTH_CHECKS_KEY = "healthChecks"


class NodeResult(NamedTuple):
    """One node's check: healthy, its problems, and whether it was (or would be) drained."""

    healthy: bool
    problems: List[str]
    drained: bool = False

    def as_dict(self) -> Dict[str, Any]:
        return {"healthy": self.healthy, "problems": self.problems, "drained": self.drained}


def deep_merge(base: Mapping[str, Any], changes: Mapping[str, Any]) -> Dict[str, Any]:
    """base with changes merged in: nested mappings merge, anything else replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def live_cluster(kube: Kube, name: str, namespace: str) -> Dict[str, Any]:
    """The SlurmCluster, or ClusterError naming the option."""
    obj = kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, name, namespace)
    if obj is None:
        raise ClusterError("name: no SlurmCluster %s in namespace %s" % (name, namespace))
    return obj


def configure(kube: Kube, name: str, namespace: str, settings: Mapping[str, Any], check_mode: bool) -> Change:
    """Merge settings into spec.healthChecks; apply only when the spec changes (SpecError when invalid)."""
    live = live_cluster(kube, name, namespace)
    spec = dict(live.get("spec") or {})
    wanted = deep_merge(spec, {HEALTH_CHECKS_KEY: dict(settings)})
    desired = cluster_resource(name, namespace, wanted)
    try:
        parse_cluster(desired)
    except SpecError as exc:
        raise exc.within("checks: invalid health checks") from exc
    if wanted == spec:
        return Change(False, [])
    apply_changed(kube, [desired], dry_run=check_mode)
    header = "SlurmCluster %s/%s spec.%s" % (namespace, name, HEALTH_CHECKS_KEY)
    return Change(True, [{"before_header": header, "after_header": header,
                          "before": spec.get(HEALTH_CHECKS_KEY) or {}, "after": wanted[HEALTH_CHECKS_KEY]}])


def worker_pods(kube: Kube, name: str, namespace: str, nodes: Optional[Sequence[str]]) -> List[str]:
    """Names of the cluster's worker pods (its Slurm nodes), or of the nodes asked for."""
    workers = pods_by_name(kube, namespace, names.selector_labels(name, C.COMPONENT_WORKER))
    pods = [p["metadata"]["name"] for p in workers if not pod_terminating(p)]
    if not nodes:
        return pods
    unknown = sorted(set(nodes) - set(pods))
    if unknown:
        raise ClusterError("nodes: %s not a worker of SlurmCluster %s/%s (workers: %s)"
                           % (", ".join(unknown), namespace, name, ", ".join(pods) or "none"))
    return sorted(set(nodes))


def check_node(kube: Kube, namespace: str, pod: str) -> NodeResult:
    """Run the node's fast check in its pod and read its report."""
    try:
        code, out, err = node_report(kube, namespace, pod)
    except KubeError as exc:
        return NodeResult(False, ["cannot run the check: %s" % exc])
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    if code == 0:
        return NodeResult(True, [])
    if code == 1 and lines:
        return NodeResult(False, lines)
    return NodeResult(False, ["the check failed (exit %d): %s" % (code, (err or out).strip()[-300:])])


def run_checks(kube: Kube, name: str, namespace: str, nodes: Optional[Sequence[str]]) -> Dict[str, NodeResult]:
    """Every chosen node's check result."""
    live_cluster(kube, name, namespace)
    return {pod: check_node(kube, namespace, pod) for pod in worker_pods(kube, name, namespace, nodes)}


def drain_failed(kube: Kube, name: str, namespace: str, results: Dict[str, NodeResult],
                 check_mode: bool) -> Dict[str, NodeResult]:
    """Drain every failed node with its problems as reason ('slurmkube: ...'), through slurmctld.

    A node drained by someone else keeps that drain; one already drained with the same reason
    is not written again.
    """
    failed = [node for node, result in results.items() if not result.healthy]
    if not failed:
        return results
    live_cluster(kube, name, namespace)
    slurm = controller_control(kube, name, namespace)
    if slurm is None:
        raise ClusterError("drain: no ready controller pod of SlurmCluster %s/%s" % (namespace, name))
    try:
        known = nodes_by_name(slurm.nodes())
        out = dict(results)
        for node in failed:
            reason = health_reason(results[node].problems)
            current = known.get(node)
            if current is None or not fast_check_may_drain(current):
                continue
            if current.draining and current.reason == reason:
                continue
            if not check_mode:
                slurm.drain([node], reason)
            out[node] = results[node]._replace(drained=True)
        return out
    except (SlurmError, KubeError) as exc:
        raise ClusterError("drain: cannot reach slurmctld of SlurmCluster %s/%s: %s" % (namespace, name, exc)) from exc
