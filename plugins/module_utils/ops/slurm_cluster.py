# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the slurm_cluster module does: the SlurmCluster and its NodeSets as objects in the API."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import apply_changed, stamp
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import REAL_TIME, Poll, Timer, wait_until
from ansible_collections.slurmkube.core.plugins.module_utils.model.spec import (
    check_references,
    parse_cluster,
    parse_nodeset,
)
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import Change


class ClusterError(Exception):
    """The request cannot be carried out; the message says why."""


def cluster_resource(name: str, namespace: str, spec: Mapping[str, Any]) -> Dict[str, Any]:
    """The SlurmCluster object."""
    return {"apiVersion": C.GROUP_VERSION, "kind": C.KIND_CLUSTER,
            "metadata": {"name": name, "namespace": namespace}, "spec": dict(spec)}


def nodeset_resource(cluster: str, namespace: str, item: Mapping[str, Any]) -> Dict[str, Any]:
    """A NodeSet object from a module item {name, spec}; clusterName is filled in."""
    spec = dict(item.get("spec") or {})
    spec.setdefault("clusterName", cluster)
    return {"apiVersion": C.GROUP_VERSION, "kind": C.KIND_NODESET,
            "metadata": {"name": item["name"], "namespace": namespace}, "spec": spec}


def validate(cluster: Mapping[str, Any], nodesets: Sequence[Mapping[str, Any]]) -> None:
    """Fail before any write when the spec is bad (SpecError names field and value)."""
    model = parse_cluster(cluster)
    check_references(model, [parse_nodeset(n) for n in nodesets])


def _diff(desired: Mapping[str, Any], live: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    meta = desired["metadata"]
    return {"before_header": "%s %s/%s" % (desired["kind"], meta["namespace"], meta["name"]),
            "after_header": "%s %s/%s" % (desired["kind"], meta["namespace"], meta["name"]),
            "before": {"spec": (live or {}).get("spec")} if live else {},
            "after": {"spec": desired["spec"]}}


def ensure_present(kube: Kube, objects: Sequence[Mapping[str, Any]], stale: Sequence[Mapping[str, Any]],
                   check_mode: bool) -> Change:
    """Apply what differs (a server-side dry run in check mode) and delete stale NodeSets."""
    applied = apply_changed(kube, [stamp(obj, None) for obj in objects], dry_run=check_mode)
    diffs = [_diff(obj, live) for obj, live in applied]
    for obj in stale:
        meta = obj["metadata"]
        diffs.append({"before_header": "NodeSet %s/%s" % (meta["namespace"], meta["name"]),
                      "before": {"spec": obj.get("spec")}, "after": {}})
        if not check_mode:
            kube.delete(C.GROUP_VERSION, C.KIND_NODESET, meta["name"], meta["namespace"])
    return Change(bool(diffs), diffs)


def stale_nodesets(kube: Kube, cluster: str, namespace: str, wanted: Sequence[str]) -> List[Dict[str, Any]]:
    """Live NodeSets of the cluster that the request no longer lists."""
    return [n for n in kube.list(C.GROUP_VERSION, C.KIND_NODESET, namespace)
            if (n.get("spec") or {}).get("clusterName") == cluster and n["metadata"]["name"] not in wanted]


def ensure_absent(kube: Kube, name: str, namespace: str, check_mode: bool) -> Change:
    """Delete the SlurmCluster and its NodeSets; the jail claim is not owned and stays."""
    live = kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, name, namespace)
    nodesets = stale_nodesets(kube, name, namespace, [])
    if live is None and not nodesets:
        return Change(False, [])
    if not check_mode:
        for obj in nodesets:
            kube.delete(C.GROUP_VERSION, C.KIND_NODESET, obj["metadata"]["name"], namespace)
        if live is not None:
            kube.delete(C.GROUP_VERSION, C.KIND_CLUSTER, name, namespace, propagation="Foreground")
    before = {"spec": live.get("spec")} if live else {}
    return Change(True, [{"before_header": "SlurmCluster %s/%s" % (namespace, name), "before": before, "after": {}}])


def is_ready(obj: Optional[Mapping[str, Any]]) -> bool:
    """The operator has seen the latest spec and reports Ready."""
    if not obj:
        return False
    status = obj.get("status") or {}
    current = status.get("observedGeneration") == obj["metadata"].get("generation")
    return current and status.get("phase") == C.PHASE_READY


def wait_ready(kube: Kube, name: str, namespace: str, timeout: int, timer: Timer = REAL_TIME) -> Dict[str, Any]:
    """Poll until Ready; fail at once on Invalid, or with the last status on timeout."""
    def probe() -> Poll:
        obj = kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, name, namespace) or {}
        status = obj.get("status") or {}
        if status.get("phase") == C.PHASE_INVALID and status.get("observedGeneration") == obj["metadata"].get(
                "generation"):
            raise ClusterError("SlurmCluster %s/%s is invalid: %s" % (namespace, name, status.get("message")))
        return Poll(is_ready(obj), status)

    last = wait_until(probe, timeout, timer)
    if not last.done:
        raise ClusterError("SlurmCluster %s/%s not Ready after %ds: phase %s, %s"
                           % (namespace, name, timeout, last.seen.get("phase", "unknown"),
                              last.seen.get("message", "no status yet")))
    return last.seen
