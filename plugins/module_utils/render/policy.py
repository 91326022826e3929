# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Disruption budgets, network policy and the pods' ServiceAccount."""

from __future__ import annotations

from typing import List, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    backup_parts,
    nodeset_object_name,
    runs_database,
    runs_slurmdbd,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.network import PRIVATE_RANGES_V4, PRIVATE_RANGES_V6
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import NodeSet, SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.render import common


def render_worker_pdb(cluster: SlurmCluster, nodeset: NodeSet) -> common.Manifest:
    """No eviction of a worker that runs jobs; idle ones go at once.

    The budget allows no disruption of the pods it covers, and it covers only the pods the
    operator has not labelled evictable (constants.LABEL_EVICTABLE: their nodes run no job).
    The Eviction API checks a pod's labels when it is asked, so `kubectl drain` or an
    autoscaler takes an idle worker at once and retries a busy one until the operator, having
    drained its Slurm node, finds it idle (or requeued its jobs after the drain timeout).
    """
    selector = names.selector_labels(cluster.name, C.COMPONENT_WORKER, nodeset.name)
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
    """Keep one login pod up during node drains."""
    return common.one_up_budget(cluster, names.login(cluster.name), C.COMPONENT_LOGIN, cluster.spec.login.replicas)


def _policy(cluster: SlurmCluster, name: str, pods: dict, direction: str, rules: List[dict]) -> common.Manifest:
    """NetworkPolicy NAME of the cluster over PODS, of one DIRECTION (Ingress or Egress) with RULES."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": common.metadata(cluster, names.network_policy(cluster.name, name), C.COMPONENT_CONFIG),
        "spec": {"podSelector": pods, "policyTypes": [direction], direction.lower(): rules},
    }


def _network_policy(cluster: SlurmCluster, name: str, pods: dict, ingress: List[dict]) -> common.Manifest:
    return _policy(cluster, name, pods, "Ingress", ingress)


def _egress_policy(cluster: SlurmCluster, name: str, pods: dict, egress: List[dict]) -> common.Manifest:
    return _policy(cluster, name, pods, "Egress", egress)


DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]


def dns_egress_rule(cluster: SlurmCluster) -> dict:
    """Port 53 of the cluster's DNS server pods only: DNS to any other address would carry a
    job's data out past every other rule."""
    dns = cluster.spec.egress.dns
    server = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": dns.namespace}},
              "podSelector": {"matchLabels": dict(dns.pod_labels)}}
    return {"to": [server], "ports": DNS_PORTS}


def egress_rules(cluster: SlurmCluster) -> List[dict]:
    """Each other, the cluster's DNS server, then what the spec allows: public addresses, the
    admin's own rules."""
    own_pods = {C.LABEL_CLUSTER: cluster.name}
    rules: List[dict] = [{"to": [{"podSelector": {"matchLabels": own_pods}}]}, dns_egress_rule(cluster)]
    if cluster.spec.egress.internet:
        rules.append({"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(PRIVATE_RANGES_V4)}},
                             {"ipBlock": {"cidr": "::/0", "except": list(PRIVATE_RANGES_V6)}}]})
    accounting = cluster.spec.accounting
    if accounting.enabled and accounting.host and accounting.peers:
        # slurmctld and the clients, wherever they run (sacct in a job too), to the shared slurmdbd.
        rules.append({"to": accounting_peers(cluster), "ports": [tcp(accounting.port)]})
    rules.extend(dict(rule) for rule in cluster.spec.egress.to)
    return rules


def accounting_peers(cluster: SlurmCluster) -> List[dict]:
    return [dict(peer) for peer in cluster.spec.accounting.peers]


def tcp(port: int) -> dict:
    return {"protocol": "TCP", "port": port}


def shared_slurmdbd_policies(cluster: SlurmCluster) -> List[common.Manifest]:
    """One slurmdbd for several clusters: the clusters' slurmctld and clients reach slurmdbd's port,
    and slurmdbd reaches their slurmctld (it pushes association and QOS changes there). Each side
    opens its own pods to spec.accounting.peers, the other side."""
    accounting = cluster.spec.accounting
    peers = accounting_peers(cluster)
    if not peers:
        return []
    if runs_slurmdbd(cluster):
        slurmdbd_pods = {"matchLabels": names.selector_labels(cluster.name, C.COMPONENT_SLURMDBD)}
        return [_network_policy(cluster, "slurmdbd", slurmdbd_pods, [{"from": peers, "ports": [tcp(accounting.port)]}]),
                _egress_policy(cluster, "slurmdbd-egress", slurmdbd_pods,
                               [{"to": peers, "ports": [tcp(C.SLURMCTLD_PORT)]}])]
    if accounting.enabled and accounting.host:
        controller_pods = {"matchLabels": names.selector_labels(cluster.name, C.COMPONENT_CONTROLLER)}
        return [_network_policy(cluster, "slurmctld-from-slurmdbd", controller_pods,
                                [{"from": peers, "ports": [tcp(C.SLURMCTLD_PORT)]}])]
    return []


def render_egress_policy(cluster: SlurmCluster) -> common.Manifest:
    """Jobs and ssh sessions run in these pods: they must not reach the API server, the
    kubelets (:10250) or cloud metadata (169.254.169.254), which are not in any rule."""
    return _egress_policy(cluster, "egress", {"matchLabels": {C.LABEL_CLUSTER: cluster.name}}, egress_rules(cluster))


def render_network_policies(cluster: SlurmCluster) -> List[common.Manifest]:
    """The cluster's pods accept traffic only from each other (Slurm, srun), plus ssh to login
    (the database: from slurmdbd, the backup's dump and a restore's load only; a shared slurmdbd
    and its clusters' slurmctld from spec.accounting.peers), and connect only to each other, DNS and
    what spec.egress allows."""
    if not cluster.spec.network_policy:
        return []
    own_pods = {C.LABEL_CLUSTER: cluster.name}
    # The accounting database answers slurmdbd only: jobs and ssh sessions never reach it. The
    # REST API answers whom spec.rest.allowFrom names (render/rest.py), the cluster's pods included.
    but_database = {"matchLabels": own_pods, "matchExpressions": [
        {"key": C.LABEL_COMPONENT, "operator": "NotIn", "values": [C.COMPONENT_DATABASE, C.COMPONENT_REST]}]}
    readers = [{"podSelector": {"matchLabels": names.selector_labels(cluster.name, C.COMPONENT_SLURMDBD)}}]
    if C.BACKUP_PART_DATABASE in backup_parts(cluster) and cluster.spec.backup.enabled:
        readers.append({"podSelector": {"matchLabels": names.selector_labels(cluster.name, C.COMPONENT_BACKUP)}})
    restore = cluster.spec.backup.restore
    if restore.name and restore.accounting_database:
        readers.append({"podSelector": {"matchLabels": names.selector_labels(cluster.name, C.COMPONENT_RESTORE)}})
    policies = [
        _network_policy(cluster, "internal", but_database, [{"from": [{"podSelector": {"matchLabels": own_pods}}]}]),
        _network_policy(cluster, "login-ssh", {"matchLabels": names.selector_labels(cluster.name, C.COMPONENT_LOGIN)},
                        [{"ports": [{"protocol": "TCP", "port": C.SSH_PORT}]}]),
    ]
    policies.extend(shared_slurmdbd_policies(cluster))
    if runs_database(cluster):
        policies.append(_network_policy(
            cluster, "database", {"matchLabels": names.selector_labels(cluster.name, C.COMPONENT_DATABASE)},
            [{"from": readers, "ports": [{"protocol": "TCP", "port": C.DATABASE_PORT}]}]))
    return policies + [render_egress_policy(cluster)]


def render_service_account(cluster: SlurmCluster) -> common.Manifest:
    """The pods' identity: no token is mounted and no Role is bound; Slurm needs no API access."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": common.metadata(cluster, names.service_account(cluster.name), C.COMPONENT_CONFIG),
        "automountServiceAccountToken": False,
    }
