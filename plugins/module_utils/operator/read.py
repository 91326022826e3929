# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pass's reads: the spec and its node sets (the start of every pass), Slurm's nodes through
the controller, and where each worker's machine sits (topology from a switch label)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import SeenEqual
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube, KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.model.rules import check_references
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import NodeSet, SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import Pass
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Clock
from ansible_collections.slurmkube.core.plugins.module_utils.operator.topology import read_switch_placement
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmError, nodes_by_name
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.facts import accounting_facts
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.runner import controller_control

ANNOTATION_LAST_VALID = C.API_GROUP + "/last-valid-spec"


def read_spec(kube: Kube, clock: Clock, seen: Optional[SeenEqual], cluster_obj: Mapping[str, Any]) -> Pass:
    """A pass over the cluster as its spec and NodeSets say; SpecError when they do not fit."""
    cluster = parse_cluster(cluster_obj)
    nodesets, invalid, live = read_nodesets(kube, cluster)
    check_references(cluster, nodesets)
    return Pass(kube, clock, seen, cluster_obj, cluster, nodesets, live, invalid)


def read_nodesets(kube: Kube, cluster: SlurmCluster
                  ) -> Tuple[List[NodeSet], Dict[str, Dict[str, Any]], Dict[str, Dict[str, Any]]]:
    """The cluster's NodeSets as models, the status of the invalid ones, and the live objects.

    An invalid NodeSet keeps running as its last valid spec (kept in an annotation, written
    here when it changes), so a bad edit changes nothing but its status; one never valid is
    left out.
    """
    models: List[NodeSet] = []
    invalid: Dict[str, Dict[str, Any]] = {}
    live: Dict[str, Dict[str, Any]] = {}
    for obj in kube.list(C.GROUP_VERSION, C.KIND_NODESET, cluster.namespace):
        if (obj.get("spec") or {}).get("clusterName") != cluster.name:
            continue
        meta = obj["metadata"]
        live[meta["name"]] = obj
        last_valid = (meta.get("annotations") or {}).get(ANNOTATION_LAST_VALID)
        try:
            check_kind_kept(obj["spec"], json.loads(last_valid) if last_valid else None)
            models.append(parse_nodeset(obj))
        except SpecError as exc:
            invalid[meta["name"]] = {"phase": C.PHASE_INVALID, "message": str(exc),
                                     "observedGeneration": meta.get("generation", 0)}
            if last_valid:
                models.append(parse_nodeset(dict(obj, spec=json.loads(last_valid))))
            continue
        spec_text = json.dumps(obj["spec"], sort_keys=True)
        if spec_text != last_valid:
            kube.merge_patch(C.GROUP_VERSION, C.KIND_NODESET, meta["name"], cluster.namespace,
                             {"metadata": {"annotations": {ANNOTATION_LAST_VALID: spec_text}}})
    return models, invalid, live


def check_kind_kept(spec: Mapping[str, Any], last_valid: Optional[Mapping[str, Any]]) -> None:
    """SpecError when an edit turns a fixed node set into an on-demand one or back: its nodes would
    change from dynamic nodes to slurm.conf's CLOUD nodes of the same names under running jobs."""
    if last_valid is not None and ("maxReplicas" in spec) != ("maxReplicas" in last_valid):
        raise SpecError([("spec.maxReplicas", "is set or unset only when the node set is made (its nodes would "
                          "change kind under their jobs): make a new NodeSet, got %s"
                          % ("a new maxReplicas" if "maxReplicas" in spec else "maxReplicas removed"))])


def read_slurm(p: Pass) -> None:
    """Slurm's view of the nodes, through the controller pod; left None while it is not up."""
    control = controller_control(p.kube, p.cluster.name, p.cluster.namespace)
    if control is None:
        return
    try:
        p.slurm_nodes = nodes_by_name(control.nodes())
    except (SlurmError, KubeError):
        return
    p.slurm = control


def read_accounting(p: Pass) -> None:
    """With accounting on, whether slurmdbd answers from its database (and slurmctld's queue of
    records it has not taken), asked from the serving controller; left None while Slurm cannot
    be asked."""
    if p.slurm is None or not p.cluster.spec.accounting.enabled:
        return
    try:
        p.accounting = accounting_facts(p.slurm)
    except (SlurmError, KubeError, ValueError) as exc:
        p.accounting = {"slurmdbd_reachable": False, "slurmdbd_error": str(exc), "dbd_agent_queue_size": None}


def read_placement(p: Pass) -> None:
    """Each worker's switch (spec.slurm.switchLabel's value on its machine), for topology.conf."""
    p.placement = read_switch_placement(p.kube, p.cluster)
