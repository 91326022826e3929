"""The operator's RBAC stays least-privilege and its Deployment never runs two at once."""

from __future__ import annotations

from ansible_collections.slurmkube.core.plugins.module_utils.render.operator import operator_rules, render_operator


def test_rules_name_every_group_resource_and_verb_explicitly():
    for rule in operator_rules():
        assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"]


def test_operator_cannot_touch_nodes_rbac_or_crds():
    granted = {(g, r, v) for rule in operator_rules() for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    resources = {grant[1] for grant in granted}
    assert not resources & {"nodes", "clusterroles", "clusterrolebindings", "roles"}
    assert not {v for g, r, v in granted if r == "customresourcedefinitions"} - {"get", "list", "watch"}
    assert ("", "pods/exec", "create") in granted


def test_deployment_is_single_and_unprivileged():
    objects = {o["kind"]: o for o in render_operator("slurmkube-system", "slurmkube/operator:abc")}
    deployment = objects["Deployment"]
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"]["runAsNonRoot"] is True
    assert "--standalone" in container["command"]
    binding = objects["ClusterRoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "slurmkube-operator",
                                    "namespace": "slurmkube-system"}]
