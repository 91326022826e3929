# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Disruption budgets, network policy and the pods' ServiceAccount."""

from __future__ import annotations

from typing import List, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.labels import selector_labels
from ansible_collections.slurmkube.core.plugins.module_utils.model.spec import (
    NodeSet,
    SlurmCluster,
    nodeset_object_name,
    object_name,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render import common


def render_worker_pdb(cluster: SlurmCluster, nodeset: NodeSet) -> common.Manifest:
    """No eviction of a worker that runs jobs; idle ones go at once.

    The budget allows no disruption of the pods it covers, and it covers only the pods the
    operator has not labelled evictable (constants.LABEL_EVICTABLE: their nodes run no job).
    The Eviction API checks a pod's labels when it is asked, so `kubectl drain` or an
    autoscaler takes an idle worker at once and retries a busy one until the operator, having
    drained its Slurm node, finds it idle (or requeued its jobs after the drain timeout).
    """
    selector = selector_labels(cluster.name, C.COMPONENT_WORKER, nodeset.name)
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": common.metadata(cluster, nodeset_object_name(nodeset), C.COMPONENT_WORKER, nodeset.name),
        "spec": {
            "maxUnavailable": 0,
            "selector": {"matchLabels": selector,
                         "matchExpressions": [{"key": C.LABEL_EVICTABLE, "operator": "DoesNotExist"}]},
        },
    }


def render_login_pdb(cluster: SlurmCluster) -> Optional[common.Manifest]:
    """Keep one login pod up during node drains; None with fewer than two (a budget would block drains)."""
    if cluster.spec.login.replicas < 2:
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": common.metadata(cluster, object_name(cluster, C.COMPONENT_LOGIN), C.COMPONENT_LOGIN),
        "spec": {
            "minAvailable": 1,
            "selector": {"matchLabels": selector_labels(cluster.name, C.COMPONENT_LOGIN)},
        },
    }


def _network_policy(cluster: SlurmCluster, name: str, pods: dict, ingress: List[dict]) -> common.Manifest:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": common.metadata(cluster, object_name(cluster, name), C.COMPONENT_CONFIG),
        "spec": {"podSelector": {"matchLabels": pods}, "policyTypes": ["Ingress"], "ingress": ingress},
    }


def render_network_policies(cluster: SlurmCluster) -> List[common.Manifest]:
    """The cluster's pods accept traffic only from each other (Slurm, srun), plus ssh to login."""
    if not cluster.spec.network_policy:
        return []
    own_pods = {C.LABEL_CLUSTER: cluster.name}
    return [
        _network_policy(cluster, "internal", own_pods, [{"from": [{"podSelector": {"matchLabels": own_pods}}]}]),
        _network_policy(cluster, "login-ssh", selector_labels(cluster.name, C.COMPONENT_LOGIN),
                        [{"ports": [{"protocol": "TCP", "port": C.SSH_PORT}]}]),
    ]


def render_service_account(cluster: SlurmCluster) -> common.Manifest:
    """The pods' identity: no token is mounted and no Role is bound; Slurm needs no API access."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": common.metadata(cluster, common.service_account_name(cluster), C.COMPONENT_CONFIG),
        "automountServiceAccountToken": False,
    }
