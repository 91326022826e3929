# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the slurm_cluster module does: the SlurmCluster and its NodeSets as objects in the API."""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import apply_changed, diff_of
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import REAL_TIME, Poll, Timer, wait_until
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError, describe
from ansible_collections.slurmkube.core.plugins.module_utils.model.rules import check_references
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import NodeSet
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import Change, ClusterError, cluster_resource


def nodeset_resource(cluster: str, namespace: str, item: Mapping[str, Any]) -> Dict[str, Any]:
    """A NodeSet object from a module item {name, spec}; clusterName is filled in."""
    spec = dict(item.get("spec") or {})
    spec.setdefault("clusterName", cluster)
    return {"apiVersion": C.GROUP_VERSION, "kind": C.KIND_NODESET,
            "metadata": {"name": item["name"], "namespace": namespace}, "spec": spec}


class Request(NamedTuple):
    """What the module asks for; None leaves that part as it is in the cluster."""

    name: str
    namespace: str
    spec: Optional[Mapping[str, Any]]
    node_sets: Optional[Sequence[Mapping[str, Any]]]
    prune_node_sets: bool = False


class Plan(NamedTuple):
    """The objects to apply (node sets first: the operator reads a cluster's references as soon
    as it appears), the NodeSets to delete, and the cluster's spec as it will be."""

    objects: List[Dict[str, Any]]
    doomed: List[Dict[str, Any]]
    spec: Dict[str, Any]


def nodesets_of(kube: Kube, cluster: str, namespace: str) -> List[Dict[str, Any]]:
    """The live NodeSets of a cluster, by name."""
    return sorted((n for n in kube.list(C.GROUP_VERSION, C.KIND_NODESET, namespace)
                   if (n.get("spec") or {}).get("clusterName") == cluster), key=lambda n: n["metadata"]["name"])


def keeping_live_replicas(obj: Dict[str, Any], live: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """A NodeSet that names no replicas keeps the live count (`kubectl scale`, an autoscaler)."""
    if live is None or "replicas" in obj["spec"] or "replicas" not in (live.get("spec") or {}):
        return obj
    return dict(obj, spec=dict(obj["spec"], replicas=live["spec"]["replicas"]))


def repeated_node_set_names(node_sets: Sequence[Mapping[str, Any]]) -> List[Tuple[str, str]]:
    """(path, message) for each item that names a node set an earlier item names: the last would
    silently win over the first."""
    problems, seen = [], set()
    for i, item in enumerate(node_sets):
        if item["name"] in seen:
            problems.append(("node_sets[%d].name" % i, "is used twice: %s" % describe(item["name"])))
        seen.add(item["name"])
    return problems


def plan_present(kube: Kube, request: Request) -> Plan:
    """What to apply and delete; SpecError (field and value) when the result would be invalid."""
    repeated = repeated_node_set_names(request.node_sets or [])
    if repeated:
        raise SpecError(repeated, "invalid cluster")
    live_cluster = kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, request.name, request.namespace)
    live_sets = {n["metadata"]["name"]: n for n in nodesets_of(kube, request.name, request.namespace)}
    if request.spec is not None or live_cluster is None:
        cluster = cluster_resource(request.name, request.namespace, request.spec or {})
        objects = [cluster]
    else:
        cluster, objects = live_cluster, []
    wanted = [keeping_live_replicas(nodeset_resource(request.name, request.namespace, item),
                                    live_sets.get(item["name"])) for item in request.node_sets or []]
    listed = {n["metadata"]["name"] for n in wanted}
    doomed = [n for name, n in live_sets.items()
              if request.node_sets is not None and request.prune_node_sets and name not in listed]
    kept = [n for name, n in live_sets.items() if name not in listed and n not in doomed]
    validate(cluster, wanted, kept)
    return Plan(wanted + objects, doomed, dict(cluster.get("spec") or {}))


def validate(cluster: Mapping[str, Any], wanted: Sequence[Mapping[str, Any]], kept: Sequence[Mapping[str, Any]]
             ) -> None:
    """Fail before any write when the cluster and its node sets would be bad (SpecError names field
    and value). A live node set left as it is counts when it is valid (the operator reports one
    that is not)."""
    try:
        model = parse_cluster(cluster)
        sets = [parse_nodeset(n) for n in wanted]
        sets.extend(_valid_nodesets(kept))
        check_references(model, sets)
    except SpecError as exc:
        raise exc.within("invalid cluster") from exc


def _valid_nodesets(nodesets: Sequence[Mapping[str, Any]]) -> List[NodeSet]:
    valid = []
    for obj in nodesets:
        try:
            valid.append(parse_nodeset(obj))
        except SpecError:
            continue
    return valid


def ensure_present(kube: Kube, objects: Sequence[Mapping[str, Any]], doomed: Sequence[Mapping[str, Any]],
                   check_mode: bool) -> Change:
    """Apply what differs (a server-side dry run in check mode) and delete the doomed NodeSets
    (the operator drains their nodes first)."""
    diffs = [diff_of(a) for a in apply_changed(kube, objects, dry_run=check_mode)]
    for obj in doomed:
        meta = obj["metadata"]
        diffs.append({"before_header": "NodeSet %s/%s" % (meta["namespace"], meta["name"]),
                      "before": {"spec": obj.get("spec")}, "after": {}})
        if not check_mode:
            kube.delete(C.GROUP_VERSION, C.KIND_NODESET, meta["name"], meta["namespace"])
    return Change(bool(diffs), diffs)


def cluster_after(kube: Kube, name: str, namespace: str, plan: Plan, check_mode: bool) -> Dict[str, Any]:
    """The SlurmCluster after the task: as the API server has it, or, in check mode with a spec
    to write, as the plan would write it (nothing was)."""
    wanted = next((o for o in plan.objects if o["kind"] == C.KIND_CLUSTER), None)
    if check_mode and wanted is not None:
        return copy.deepcopy(wanted)
    return kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, name, namespace) or copy.deepcopy(wanted or {})


def ensure_absent(kube: Kube, name: str, namespace: str, check_mode: bool) -> Change:
    """Delete the SlurmCluster and its NodeSets; the jail claim is not owned and stays."""
    live = kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, name, namespace)
    nodesets = nodesets_of(kube, name, namespace)
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


def unpullable_images(obj: Mapping[str, Any]) -> Optional[str]:
    """What the operator says of images the cluster's pods cannot pull (ImagesPulled false for the
    latest spec), else None."""
    status = obj.get("status") or {}
    if status.get("observedGeneration") != obj["metadata"].get("generation"):
        return None
    found = next((c for c in status.get("conditions") or [] if c.get("type") == C.CONDITION_IMAGES_PULLED), {})
    return found.get("message") if found.get("status") == "False" else None


def wait_ready(kube: Kube, name: str, namespace: str, timeout: int, timer: Timer = REAL_TIME) -> Dict[str, Any]:
    """Poll until Ready; fail at once on Invalid or an image the pods cannot pull (no wait makes it
    appear), or with the last status on timeout."""
    def probe() -> Poll:
        obj = kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, name, namespace) or {}
        status = obj.get("status") or {}
        if status.get("phase") == C.PHASE_INVALID and status.get("observedGeneration") == obj["metadata"].get(
                "generation"):
            raise ClusterError("SlurmCluster %s/%s is invalid: %s" % (namespace, name, status.get("message")))
        unpulled = unpullable_images(obj) if obj else None
        if unpulled:
            raise ClusterError("SlurmCluster %s/%s: %s (spec.images, spec.pods.imagePullSecrets)"
                               % (namespace, name, unpulled))
        return Poll(is_ready(obj), status)

    last = wait_until(probe, timeout, timer)
    if not last.done:
        raise ClusterError("SlurmCluster %s/%s not Ready after %ds: phase %s, %s"
                           % (namespace, name, timeout, last.seen.get("phase", "unknown"),
                              last.seen.get("message", "no status yet")))
    return last.seen
