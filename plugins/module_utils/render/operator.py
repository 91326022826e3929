# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The operator's own objects: ServiceAccount, least-privilege ClusterRole, binding, Deployment."""

from __future__ import annotations

from typing import Any, Dict, List

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

OPERATOR_NAME = "slurmkube-operator"
OPERATOR_SCRIPT = "/opt/slurmkube/slurmkube_operator.py"
WRITE = ["get", "list", "watch", "create", "patch", "update", "delete"]
READ = ["get", "list", "watch"]


def _labels() -> Dict[str, str]:
    return {C.LABEL_NAME: OPERATOR_NAME, C.LABEL_PART_OF: C.MANAGED_BY, C.LABEL_MANAGED_BY: C.MANAGED_BY}


def _meta(name: str, namespace: str = "") -> Dict[str, Any]:
    meta: Dict[str, Any] = {"name": name, "labels": _labels()}
    if namespace:
        meta["namespace"] = namespace
    return meta


def operator_rules() -> List[Dict[str, Any]]:
    """Exactly what the reconciler and kopf call, nothing else (no nodes, no RBAC objects)."""
    return [
        {"apiGroups": [C.API_GROUP], "resources": [C.PLURAL_CLUSTER, C.PLURAL_NODESET],
         "verbs": ["get", "list", "watch", "patch", "update"]},
        {"apiGroups": [C.API_GROUP], "resources": [C.PLURAL_CLUSTER + "/status", C.PLURAL_NODESET + "/status"],
         "verbs": ["get", "patch", "update"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
        {"apiGroups": [""], "resources": ["services", "configmaps", "secrets", "serviceaccounts",
                                          "persistentvolumeclaims"], "verbs": WRITE},
        {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": WRITE},
        {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": WRITE},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": WRITE},
        {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": WRITE},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        # kopf discovers resources and namespaces to serve --all-namespaces.
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": READ},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": READ},
    ]


def render_operator(namespace: str, image: str, pull_policy: str = "IfNotPresent") -> List[Dict[str, Any]]:
    """Everything that runs the operator in its namespace, in apply order.

    One replica with the Recreate strategy: two operators never act on one cluster at once.
    """
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(OPERATOR_NAME, namespace)}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _meta(OPERATOR_NAME),
            "rules": operator_rules()}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": _meta(OPERATOR_NAME),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": OPERATOR_NAME},
        "subjects": [{"kind": "ServiceAccount", "name": OPERATOR_NAME, "namespace": namespace}],
    }
    container = {
        "name": "operator",
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": ["kopf", "run", "--all-namespaces", "--standalone", "--liveness=http://0.0.0.0:8080/healthz",
                    OPERATOR_SCRIPT],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 20},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 65532,
                            "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": True},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(OPERATOR_NAME, namespace),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {C.LABEL_NAME: OPERATOR_NAME}},
            "template": {
                "metadata": {"labels": _labels()},
                "spec": {"serviceAccountName": OPERATOR_NAME, "containers": [container],
                         "volumes": [{"name": "tmp", "emptyDir": {}}],
                         "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
            },
        },
    }
    return [account, role, binding, deployment]
