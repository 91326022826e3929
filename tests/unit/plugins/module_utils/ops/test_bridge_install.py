"""What the slurm_operator module's bridge_namespaces installs: the policy that gives those
namespaces' pods the bridge's scheduler, and the operator's narrow rights there."""

from __future__ import annotations

import pytest
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_operator import (
    RBAC,
    InstallError,
    OperatorSettings,
    ensure_operator,
    remove_operator,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.bridge import ADMISSION_VERSIONS

V1, V1BETA1 = ADMISSION_VERSIONS
NAME = "slurmkube-bridge-ops"


def grants(rules):
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def role(kube, namespace):
    found = kube.get(RBAC, "Role", "slurmkube-operator-ops", namespace)
    return grants(found["rules"]) if found else None


def bridged(*namespaces, watch=("hpc",)):
    return OperatorSettings("ops", "img", watch_namespaces=watch, bridge_namespaces=namespaces)


def test_a_bridged_namespace_grants_binding_its_pods_and_nothing_of_a_clusters():
    kube = MemoryKube()
    ensure_operator(kube, bridged("ml", "hpc"), check_mode=False)
    ml = role(kube, "ml")
    assert {("", "pods/binding", "create"), ("", "pods", "delete"), ("batch", "jobs", "get"),
            ("", "events", "create")} <= ml
    assert not {g for g in ml if g[1] in ("pods/exec", "secrets", "statefulsets")}
    hpc = role(kube, "hpc")  # watched and bridged: one Role with both
    assert {("", "pods/exec", "create"), ("", "pods/binding", "create")} <= hpc


def test_the_policy_sets_the_bridges_scheduler_on_pods_of_those_namespaces_that_name_the_default_one():
    kube = MemoryKube()
    ensure_operator(kube, bridged("ml", "ai"), check_mode=False)
    policy = kube.get(V1, "MutatingAdmissionPolicy", NAME)
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ai", "ml"]}]
    assert spec["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE"]
    assert "default-scheduler" in spec["matchConditions"][0]["expression"]
    assert "'%s'" % C.BRIDGE_SCHEDULER_NAME in spec["mutations"][0]["applyConfiguration"]["expression"]
    assert kube.get(V1, "MutatingAdmissionPolicyBinding", NAME)["spec"] == {"policyName": NAME}


def test_a_beta_only_api_server_gets_the_beta_version_and_one_without_it_is_refused_before_any_write():
    beta = MemoryKube()
    beta.unserved.add((V1, "MutatingAdmissionPolicy"))
    ensure_operator(beta, bridged("ml"), check_mode=False)
    assert beta.get(V1BETA1, "MutatingAdmissionPolicy", NAME) is not None
    old = MemoryKube()
    old.unserved |= {(V1, "MutatingAdmissionPolicy"), (V1BETA1, "MutatingAdmissionPolicy")}
    with pytest.raises(InstallError, match=r"bridge_namespaces: .*MutatingAdmissionPolicy"):
        ensure_operator(old, bridged("ml"), check_mode=False)
    assert not old.objects


def test_a_bad_namespace_name_is_refused_naming_the_option():
    kube = MemoryKube()
    with pytest.raises(InstallError, match="bridge_namespaces: must be namespace names, got 'ML_team'"):
        ensure_operator(kube, bridged("ML_team"), check_mode=False)
    assert not kube.objects


def test_dropping_the_bridge_takes_its_policy_and_grants_and_a_rerun_changes_nothing():
    kube = MemoryKube()
    ensure_operator(kube, bridged("ml"), check_mode=False)
    assert not ensure_operator(kube, bridged("ml"), check_mode=False).changed
    assert ensure_operator(kube, bridged(), check_mode=False).changed
    assert role(kube, "ml") is None and role(kube, "hpc") is not None
    assert kube.get(V1, "MutatingAdmissionPolicy", NAME) is None
    assert kube.get(V1, "MutatingAdmissionPolicyBinding", NAME) is None
    ensure_operator(kube, bridged("ml"), check_mode=False)
    remove_operator(kube, "ops", remove_crds=False, check_mode=False)
    assert kube.get(V1, "MutatingAdmissionPolicy", NAME) is None and role(kube, "ml") is None


def test_an_operator_of_every_namespace_holds_the_bridges_rights_in_its_cluster_role():
    kube = MemoryKube()
    ensure_operator(kube, OperatorSettings("ops", "img", cluster_scope=True, bridge_namespaces=("ml",)), False)
    rules = kube.get(RBAC, "ClusterRole", "slurmkube-operator-ops")["rules"]
    assert ("", "pods/binding", "create") in grants(rules)
    assert role(kube, "ml") is None
