# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The operator's own objects: ServiceAccount, least-privilege roles and bindings, Deployment.

What the operator does to a cluster's objects is granted by a Role in each watched namespace;
its ClusterRole keeps only what is cluster-scoped. Only an operator that serves every namespace
(the slurm_operator module's cluster_scope, asked for explicitly) gets the namespaced rules in
its ClusterRole, and with them exec, Secrets and workloads in every namespace.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.render.bridge import bridge_rules
from ansible_collections.slurmkube.core.plugins.module_utils.render.common import scrape_annotations

OPERATOR_NAME = C.OPERATOR_NAME
OPERATOR_SCRIPT = "/opt/slurmkube/slurmkube_operator.py"
WRITE = ["get", "list", "watch", "create", "patch", "update", "delete"]
READ = ["get", "list", "watch"]


def _meta(name: str, namespace: str = "") -> Dict[str, Any]:
    meta: Dict[str, Any] = {"name": name, "labels": names.operator_labels()}
    if namespace:
        meta["namespace"] = namespace
    return meta


def namespaced_rules() -> List[Dict[str, Any]]:
    """What the reconciler and kopf call in the namespaces of the clusters, nothing else."""
    return [
        # kopf watches the clusters and node sets, keeps its finalizer and progress annotations.
        {"apiGroups": [C.API_GROUP], "resources": [C.PLURAL_CLUSTER, C.PLURAL_NODESET],
         "verbs": ["get", "list", "watch", "patch", "update"]},
        # Phase, conditions, the munge key in use, node states.
        {"apiGroups": [C.API_GROUP], "resources": [C.PLURAL_CLUSTER + "/status", C.PLURAL_NODESET + "/status"],
         "verbs": ["get", "patch", "update"]},
        # Read: readiness, lost nodes; delete: a failed node's pod replaced; patch: the evictable
        # label on workers (render/policy.py) and the annotation that makes a kubelet refresh volumes;
        # create: the pod of a node Slurm resumed (an on-demand node set's).
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create", "delete", "patch"]},
        # scontrol and sacctmgr in the controller pod (drain, delete nodes, reconfigure) and the
        # munge key switch in every pod with a munged.
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
        # Secrets by name only (the munge key, the host keys, the database password): never
        # listed or watched.
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "patch", "update", "delete"]},
        # The objects a cluster is made of (render/*).
        {"apiGroups": [""], "resources": ["services", "configmaps", "serviceaccounts", "persistentvolumeclaims",
                                          "podtemplates"],
         "verbs": WRITE},
        {"apiGroups": ["apps"], "resources": ["statefulsets", "deployments"], "verbs": WRITE},
        {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": WRITE},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": WRITE},
        {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": WRITE},
        # An Event for every action the operator takes.
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]


def cluster_scoped_rules(every_namespace: bool) -> List[Dict[str, Any]]:
    """What only a ClusterRole can grant: nodes (which are being emptied: cordoned, tainted for
    removal; read only), the CRDs kopf discovers, and the namespaces it lists when it serves
    every namespace."""
    rules = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": READ},
    ]
    if every_namespace:
        rules.append({"apiGroups": [""], "resources": ["namespaces"], "verbs": READ})
    return rules


def operator_rules(watch_namespaces: Sequence[str] = (), bridge: bool = False) -> List[Dict[str, Any]]:
    """The ClusterRole's rules: everything when the operator serves every namespace (no
    watch_namespaces: only an explicit cluster scope gets here), the bridge's too when it has
    one; only what is cluster-scoped when it serves some (Roles in those namespaces hold the rest)."""
    every_namespace = not watch_namespaces
    namespaced = (namespaced_rules() + (bridge_rules() if bridge else [])) if every_namespace else []
    return namespaced + cluster_scoped_rules(every_namespace)


def lease_rules() -> List[Dict[str, Any]]:
    """The leader Lease, in the operator's own namespace only (a Role, not a ClusterRole)."""
    return [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [OPERATOR_NAME],
         "verbs": ["get", "update"]},
    ]


def kopf_command(watch_namespaces: Sequence[str]) -> List[str]:
    """kopf over every namespace, or only the ones named."""
    scope = ["--namespace=%s" % ns for ns in watch_namespaces] or ["--all-namespaces"]
    # --standalone: leadership is ours (a Lease), not kopf's peering.
    return ["kopf", "run", *scope, "--standalone", "--liveness=http://0.0.0.0:8080/healthz", OPERATOR_SCRIPT]


def _binding(role: Dict[str, Any], namespace: str) -> Dict[str, Any]:
    """Binds the operator's ServiceAccount to a Role (in its namespace) or a ClusterRole."""
    meta = role["metadata"]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": role["kind"] + "Binding",
        "metadata": _meta(meta["name"], meta.get("namespace", "")),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"], "name": meta["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": OPERATOR_NAME, "namespace": namespace}],
    }


def _downward(name: str, field: str) -> Dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field}}}


def granted_namespaces(watch_namespaces: Sequence[str], bridge_namespaces: Sequence[str]) -> List[str]:
    """The namespaces with a Role of the operator: those it watches and those whose pods its bridge
    schedules."""
    return sorted(set(watch_namespaces) | set(bridge_namespaces))


def namespace_rules(namespace: str, watch_namespaces: Sequence[str],
                    bridge_namespaces: Sequence[str]) -> List[Dict[str, Any]]:
    """The rules of the operator's Role in one namespace (one Role, whatever it is granted for)."""
    return ((namespaced_rules() if namespace in watch_namespaces else [])
            + (bridge_rules() if namespace in bridge_namespaces else []))


def render_operator(namespace: str, image: str, pull_policy: str = "IfNotPresent", replicas: int = 1,
                    watch_namespaces: Sequence[str] = (), bridge_namespaces: Sequence[str] = (),
                    image_pull_secrets: Sequence[str] = ()) -> List[Dict[str, Any]]:
    """Everything that runs the operator in its namespace, in apply order.

    Replicas elect a leader through a Lease and only the leader acts, so a rolling update
    (new pod up as a standby, old pod hands the Lease over when it stops) never runs two
    operators on one cluster.
    """
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(OPERATOR_NAME, namespace)}
    grants = names.operator_cluster_wide(namespace)
    cluster_role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": _meta(grants), "rules": operator_rules(watch_namespaces, bool(bridge_namespaces))}
    # With no watch_namespaces (every namespace), the ClusterRole holds the bridge's rules too.
    watched_roles = [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                      "metadata": _meta(grants, granted),
                      "rules": namespace_rules(granted, watch_namespaces, bridge_namespaces)}
                     for granted in (granted_namespaces(watch_namespaces, bridge_namespaces)
                                     if watch_namespaces else [])]
    lease_role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                  "metadata": _meta(OPERATOR_NAME, namespace), "rules": lease_rules()}
    container = {
        "name": "operator",
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": kopf_command(watch_namespaces),
        "env": [_downward(C.ENV_OPERATOR_NAMESPACE, "metadata.namespace"),
                _downward(C.ENV_OPERATOR_IDENTITY, "metadata.name"),
                {"name": C.ENV_WATCH_NAMESPACES, "value": ",".join(watch_namespaces)}],
        "ports": [{"name": "metrics", "containerPort": C.OPERATOR_METRICS_PORT, "protocol": "TCP"}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 20},
        # kopf answers only once its startup handlers ran: a pod that crashes at start is never
        # counted available, so waiting for the Deployment means waiting for working operators.
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5},
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 65532,
                            "runAsGroup": 65532,
                            "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": True},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(OPERATOR_NAME, namespace),
        "spec": {
            "replicas": replicas,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "selector": {"matchLabels": {C.LABEL_NAME: OPERATOR_NAME}},
            "template": {
                "metadata": {"labels": dict(names.operator_labels(), **{C.LABEL_COMPONENT: C.COMPONENT_OPERATOR}),
                             "annotations": scrape_annotations(C.OPERATOR_METRICS_PORT)},
                "spec": {"serviceAccountName": OPERATOR_NAME, "containers": [container],
                         "volumes": [{"name": "tmp", "emptyDir": {}}],
                         "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                         # A registry that asks a login: Secrets of the operator's namespace.
                         **({"imagePullSecrets": [{"name": name} for name in image_pull_secrets]}
                            if image_pull_secrets else {})},
            },
        },
    }
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": {
            "name": OPERATOR_NAME, "namespace": namespace, "annotations": scrape_annotations(C.OPERATOR_METRICS_PORT),
            # The component, as on the pods: a ServiceMonitor selects the exporters' and this Service by it.
            "labels": dict(names.operator_labels(), **{C.LABEL_COMPONENT: C.COMPONENT_OPERATOR})},
        # Headless: Prometheus scrapes every replica (the leader and the standbys), not one at random.
        "spec": {"clusterIP": "None", "selector": {C.LABEL_NAME: OPERATOR_NAME},
                 "ports": [{"name": "metrics", "port": C.OPERATOR_METRICS_PORT, "targetPort": "metrics",
                            "protocol": "TCP"}]},
    }
    grants = [obj for role in watched_roles for obj in (role, _binding(role, namespace))]
    return [account, cluster_role, _binding(cluster_role, namespace), *grants, lease_role,
            _binding(lease_role, namespace), deployment, service]
