"""The operator's RBAC stays least-privilege and its replicas elect one leader."""

from __future__ import annotations

import pytest
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_operator import (
    RBAC,
    InstallError,
    OperatorSettings,
    ensure_operator,
    remove_operator,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.operator import (
    kopf_command,
    lease_rules,
    operator_rules,
    render_operator,
)


def test_rules_name_every_group_resource_and_verb_explicitly():
    for rule in operator_rules():
        assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"]


def test_operator_cannot_touch_nodes_rbac_or_crds():
    granted = {(g, r, v) for rule in operator_rules() for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    resources = {grant[1] for grant in granted}
    assert not resources & {"clusterroles", "clusterrolebindings", "roles"}
    # It reads which nodes are cordoned (evictions) and never changes a node.
    assert {v for g, r, v in granted if r == "nodes"} == {"get", "list"}
    assert not {v for g, r, v in granted if r == "customresourcedefinitions"} - {"get", "list", "watch"}
    assert ("", "pods/exec", "create") in granted


def test_deployment_is_unprivileged_and_knows_where_its_lease_is():
    objects = {o["kind"]: o for o in render_operator("slurmkube-system", "slurmkube/operator:abc", replicas=2)}
    deployment = objects["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    # A new pod is up (as a standby) before an old one stops and hands the Lease over.
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"]["runAsNonRoot"] is True
    assert "--standalone" in container["command"]
    env = {e["name"]: e.get("value", e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath"))
           for e in container["env"]}
    assert env == {"SLURMKUBE_OPERATOR_NAMESPACE": "metadata.namespace", "SLURMKUBE_OPERATOR_IDENTITY": "metadata.name",
                   "SLURMKUBE_WATCH_NAMESPACES": ""}


def test_bindings_name_the_operator_account_of_its_own_namespace():
    for namespace in ("ops-a", "ops-b"):
        objects = {o["kind"]: o for o in render_operator(namespace, "slurmkube/operator:abc")}
        subject = [{"kind": "ServiceAccount", "name": "slurmkube-operator", "namespace": namespace}]
        assert objects["ClusterRoleBinding"]["subjects"] == subject
        assert objects["RoleBinding"]["subjects"] == subject
        # Cluster-wide names differ per install: a second install never rebinds the first one's role.
        assert objects["ClusterRole"]["metadata"]["name"] == "slurmkube-operator-" + namespace
        assert objects["ClusterRoleBinding"]["roleRef"]["name"] == "slurmkube-operator-" + namespace
        assert "namespace" not in objects["ClusterRoleBinding"]["metadata"]
        assert objects["Role"]["metadata"]["namespace"] == namespace


def test_lease_rights_are_one_named_lease_in_the_operator_namespace():
    rules = lease_rules()
    assert {v for r in rules for v in r["verbs"]} == {"create", "get", "update"}
    # create cannot be limited by name (the name is not known before the object exists).
    assert all(r.get("resourceNames") == ["slurmkube-operator"] for r in rules if r["verbs"] != ["create"])
    assert not any(r["resources"] == ["leases"] for r in operator_rules())


def test_watch_scope_is_the_same_for_kopf_and_the_resync():
    assert "--all-namespaces" in kopf_command(())
    scoped = kopf_command(("hpc-a", "hpc-b"))
    assert "--all-namespaces" not in scoped and {"--namespace=hpc-a", "--namespace=hpc-b"} <= set(scoped)
    deployment = next(o for o in render_operator("ops", "img", watch_namespaces=("hpc-a", "hpc-b"))
                      if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "SLURMKUBE_WATCH_NAMESPACES", "value": "hpc-a,hpc-b"} in container["env"]
    assert kopf_command(("hpc-a", "hpc-b")) == container["command"]


def grants(rules):
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def test_no_rule_lists_or_watches_secrets():
    for watched in ((), ("hpc-a",)):
        for obj in render_operator("ops", "img", watch_namespaces=watched):
            for grant in grants(obj.get("rules", [])):
                assert grant[1:] not in {("secrets", "list"), ("secrets", "watch")}, (obj["metadata"], grant)


def test_watching_some_namespaces_grants_their_objects_by_role_and_only_cluster_scoped_reads_cluster_wide():
    objects = render_operator("ops", "img", watch_namespaces=("hpc-a", "hpc-b"))
    cluster_role = next(o for o in objects if o["kind"] == "ClusterRole")
    assert {grant[1] for grant in grants(cluster_role["rules"])} == {"nodes", "customresourcedefinitions"}
    assert not {grant[2] for grant in grants(cluster_role["rules"])} - {"get", "list", "watch"}
    roles = {o["metadata"]["namespace"]: o for o in objects if o["kind"] == "Role"
             and o["metadata"]["name"] == "slurmkube-operator-ops"}  # fmt: skip
    assert set(roles) == {"hpc-a", "hpc-b"}
    for namespace, role in roles.items():
        assert ("", "pods/exec", "create") in grants(role["rules"])
        assert ("", "secrets", "get") in grants(role["rules"])
        binding = next(o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == namespace)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                      "name": "slurmkube-operator-ops"}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "slurmkube-operator", "namespace": "ops"}]


def test_a_namespace_dropped_from_the_watch_list_keeps_no_grant_and_removal_leaves_none():
    kube = MemoryKube()
    ensure_operator(kube, OperatorSettings("ops", "img", watch_namespaces=("hpc-a", "hpc-b")), check_mode=False)
    assert kube.get(RBAC, "Role", "slurmkube-operator-ops", "hpc-b") is not None
    narrowed = ensure_operator(kube, OperatorSettings("ops", "img", watch_namespaces=("hpc-a",)), check_mode=False)
    assert narrowed.changed
    assert kube.get(RBAC, "Role", "slurmkube-operator-ops", "hpc-b") is None
    assert kube.get(RBAC, "RoleBinding", "slurmkube-operator-ops", "hpc-b") is None
    assert kube.get(RBAC, "Role", "slurmkube-operator-ops", "hpc-a") is not None
    assert not ensure_operator(kube, OperatorSettings("ops", "img", watch_namespaces=("hpc-a",)), False).changed
    remove_operator(kube, "ops", remove_crds=False, check_mode=False)
    assert not [o for kind in ("Role", "RoleBinding", "ClusterRole") for o in kube.list(RBAC, kind)]


def cluster_role_grants(kube):
    return grants(kube.get(RBAC, "ClusterRole", "slurmkube-operator-ops")["rules"])


def test_by_default_the_operator_is_granted_its_own_namespace_only():
    """No watch_namespaces and no cluster_scope: the operator's own namespace is the one it
    serves; nothing lets it exec, read Secrets or change workloads anywhere else."""
    kube = MemoryKube()
    ensure_operator(kube, OperatorSettings("ops", "img"), check_mode=False)
    assert {g[1] for g in cluster_role_grants(kube)} == {"nodes", "customresourcedefinitions"}
    assert [r["metadata"]["namespace"] for r in kube.list(RBAC, "Role")
            if r["metadata"]["name"] == "slurmkube-operator-ops"] == ["ops"]  # fmt: skip
    deployment = kube.get("apps/v1", "Deployment", "slurmkube-operator", "ops")
    assert "--namespace=ops" in deployment["spec"]["template"]["spec"]["containers"][0]["command"]


def test_every_namespace_only_when_asked_and_then_the_own_namespace_role_goes():
    kube = MemoryKube()
    ensure_operator(kube, OperatorSettings("ops", "img"), check_mode=False)
    assert ensure_operator(kube, OperatorSettings("ops", "img", cluster_scope=True), check_mode=False).changed
    assert {("", "pods/exec", "create"), ("", "secrets", "get")} <= cluster_role_grants(kube)
    assert not [r for r in kube.list(RBAC, "Role") if r["metadata"]["name"] == "slurmkube-operator-ops"]
    deployment = kube.get("apps/v1", "Deployment", "slurmkube-operator", "ops")
    assert "--all-namespaces" in deployment["spec"]["template"]["spec"]["containers"][0]["command"]


def test_cluster_scope_with_a_watch_list_is_refused_before_any_write():
    kube = MemoryKube()
    with pytest.raises(InstallError, match="watch_namespaces: must be empty with cluster_scope=true"):
        ensure_operator(kube, OperatorSettings("ops", "img", watch_namespaces=("hpc-a",), cluster_scope=True), False)
    assert not kube.objects


def test_metrics_are_served_on_a_named_port_behind_a_service_prometheus_discovers():
    objects = {o["kind"]: o for o in render_operator("ops", "img")}
    container = objects["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "metrics", "containerPort": 9342, "protocol": "TCP"} in container["ports"]
    service = objects["Service"]
    assert service["spec"]["selector"] == objects["Deployment"]["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"][0]["name"] == "metrics"
    for annotated in (service["metadata"], objects["Deployment"]["spec"]["template"]["metadata"]):
        assert annotated["annotations"]["prometheus.io/port"] == "9342"
