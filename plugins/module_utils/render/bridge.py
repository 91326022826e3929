# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the bridge needs installed (the slurm_operator module's bridge_namespaces): the pods of
those namespaces given its scheduler at admission, and the operator's rights there.

A MutatingAdmissionPolicy (CEL, in the API server: no webhook to serve, certify or keep up)
sets spec.schedulerName to the bridge's on every pod created there that names the default
scheduler, so no pod of those namespaces is placed by anything but Slurm, and none is placed at
all while the operator is down (it stays Pending). The API is admissionregistration.k8s.io/v1 from
Kubernetes 1.36, v1beta1 on 1.34 and 1.35 where the API server enables it. Pure.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names

# The versions of MutatingAdmissionPolicy, newest first.
ADMISSION_VERSIONS = ("admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1beta1")


def bridge_rules() -> List[Dict[str, Any]]:
    """What the bridge calls in a namespace whose pods it schedules, nothing else."""
    return [
        # Read the pods that name its scheduler; label one with its job before binding it; end one
        # whose Slurm job ended.
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
        # A Job's parallelism, a PodGroup's minMember: how many of their pods start together; a
        # LeaderWorkerSet's startupPolicy: whether its workers wait for their leader to run.
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get"]},
        {"apiGroups": [C.POD_GROUP_API.split("/", maxsplit=1)[0]], "resources": ["podgroups"], "verbs": ["get"]},
        {"apiGroups": [C.LWS_API.split("/", maxsplit=1)[0]], "resources": ["leaderworkersets"], "verbs": ["get"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]


def render_bridge_admission(operator_namespace: str, namespaces: Sequence[str],
                            api_version: str = ADMISSION_VERSIONS[0]) -> List[Dict[str, Any]]:
    """The policy and its binding (in apply order) for the pods of NAMESPACES."""
    name = names.bridge_admission(operator_namespace)
    labels = names.operator_labels()
    policy = {
        "apiVersion": api_version, "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            # Unapplied, a pod would go to the default scheduler, outside Slurm's count.
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": {
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                   "resources": ["pods"]}],
                "namespaceSelector": {"matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(namespaces)}]},
            },
            # A pod that names another scheduler keeps it.
            "matchConditions": [{"name": "default-scheduler", "expression":
                                 "!has(object.spec.schedulerName) || object.spec.schedulerName == '' || "
                                 "object.spec.schedulerName == 'default-scheduler'"}],
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                "expression": "Object{spec: Object.spec{schedulerName: '%s'}}" % C.BRIDGE_SCHEDULER_NAME}}],
        },
    }
    binding = {
        "apiVersion": api_version, "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": labels},
        "spec": {"policyName": name},
    }
    return [policy, binding]
