"""spec.accounting.peers: one slurmdbd for several clusters (Slurm's own design), as far as the
network goes. The cluster that runs slurmdbd admits the peers to slurmdbd's port and lets slurmdbd
reach their slurmctld (it pushes association and QOS changes); a cluster whose accounting.host
names that slurmdbd lets its pods reach the peers' slurmdbd port and admits them to slurmctld's.
Nothing else of either cluster opens, nothing with accounting off; a peer that is not one is refused
naming the field."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.render.policy import render_network_policies

SHARING_CLUSTER = {"podSelector": {"matchLabels": {C.LABEL_CLUSTER: "c2"}}}
OTHER_NAMESPACE = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-b"}}}
SLURMDBD_PODS = {"podSelector": {"matchLabels": names.selector_labels("c1", C.COMPONENT_SLURMDBD)}}


def policies(accounting: Dict[str, Any], **spec: Any) -> Dict[str, Dict[str, Any]]:
    model = parse_cluster({"metadata": {"name": "c1", "namespace": "hpc"}, "spec": dict(spec, accounting=accounting)})
    return {p["metadata"]["name"]: p for p in render_network_policies(model)}


def without(rendered: Dict[str, Dict[str, Any]], *suffixes: str) -> Dict[str, Dict[str, Any]]:
    return {name: p for name, p in rendered.items() if name not in {names.network_policy("c1", s) for s in suffixes}}


def tcp(port: int) -> List[Dict[str, Any]]:
    return [{"protocol": "TCP", "port": port}]


def test_the_slurmdbd_side_admits_the_peers_to_slurmdbd_and_lets_slurmdbd_reach_their_slurmctld_only():
    rendered = policies({"enabled": True, "port": 6900, "peers": [SHARING_CLUSTER, OTHER_NAMESPACE]})
    selected = {"matchLabels": names.selector_labels("c1", C.COMPONENT_SLURMDBD)}
    ingress = rendered[names.network_policy("c1", "slurmdbd")]["spec"]
    assert ingress == {"podSelector": selected, "policyTypes": ["Ingress"],
                       "ingress": [{"from": [SHARING_CLUSTER, OTHER_NAMESPACE], "ports": tcp(6900)}]}
    egress = rendered[names.network_policy("c1", "slurmdbd-egress")]["spec"]
    assert egress == {"podSelector": selected, "policyTypes": ["Egress"],
                      "egress": [{"to": [SHARING_CLUSTER, OTHER_NAMESPACE], "ports": tcp(C.SLURMCTLD_PORT)}]}
    # The rest as without peers: the database still answers this cluster's slurmdbd alone.
    assert without(rendered, "slurmdbd", "slurmdbd-egress") == policies({"enabled": True, "port": 6900})
    database = rendered[names.network_policy("c1", "database")]["spec"]["ingress"]
    assert [peer for rule in database for peer in rule["from"]] == [SLURMDBD_PODS]


def test_the_sharing_side_reaches_the_slurmdbd_port_and_admits_slurmdbd_to_slurmctld_only():
    accounting = {"enabled": True, "host": "c0-slurmdbd", "port": 6900}
    rendered = policies(dict(accounting, peers=[OTHER_NAMESPACE]))
    ingress = rendered[names.network_policy("c1", "slurmctld-from-slurmdbd")]["spec"]
    assert ingress == {"podSelector": {"matchLabels": names.selector_labels("c1", C.COMPONENT_CONTROLLER)},
                       "policyTypes": ["Ingress"],
                       "ingress": [{"from": [OTHER_NAMESPACE], "ports": tcp(C.SLURMCTLD_PORT)}]}
    plain = policies(accounting)
    egress, before = (p[names.network_policy("c1", "egress")]["spec"]["egress"] for p in (rendered, plain))
    assert egress == before[:2] + [{"to": [OTHER_NAMESPACE], "ports": tcp(6900)}] + before[2:]
    assert without(rendered, "slurmctld-from-slurmdbd", "egress") == without(plain, "egress")


def test_unset_with_accounting_off_or_without_network_policies_nothing_opens():
    shared = {names.network_policy("c1", s) for s in ("slurmdbd", "slurmdbd-egress", "slurmctld-from-slurmdbd")}
    assert not shared & set(policies({"enabled": True}))
    # Accounting turned off keeps its settings (accepted, to turn it on again): nothing is open.
    assert policies({"enabled": False, "peers": [SHARING_CLUSTER]}) == policies({"enabled": False})
    assert policies({"enabled": False, "host": "c0-slurmdbd", "peers": [SHARING_CLUSTER]}) == \
        policies({"enabled": False})
    assert policies({"enabled": True, "peers": [SHARING_CLUSTER]}, networkPolicy=False) == {}


@pytest.mark.parametrize("accounting,message", [
    ({"enabled": False, "peers": [{}]}, "must be a NetworkPolicy peer"),
    ({"enabled": True, "peers": [{}]}, "must be a NetworkPolicy peer"),
    ({"enabled": True, "host": "c0-slurmdbd", "peers": [{"ports": [6819]}]}, "must be a NetworkPolicy peer"),
])
def test_a_spec_that_cannot_use_them_is_refused_naming_the_field(accounting, message):
    with pytest.raises(SpecError) as refused:
        policies(accounting)
    assert "spec.accounting.peers" in str(refused.value) and message in str(refused.value)
