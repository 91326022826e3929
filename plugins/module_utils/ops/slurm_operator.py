# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the slurm_operator module does: the CRDs and the operator, installed or removed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import Applied, apply_changed, describe, diff_of
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import (
    REAL_TIME,
    Poll,
    Timer,
    deployment_settled,
    wait_until,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import (
    CONTROL_CHARACTERS,
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    is_normalized_path,
    is_object_name,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.schema import render_crds, render_spec_rules_policy
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import Change
from ansible_collections.slurmkube.core.plugins.module_utils.render.admission import (
    AdmissionRules,
    render_admission_policy,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.bridge import (
    ADMISSION_VERSIONS,
    render_bridge_admission,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.operator import (
    OPERATOR_NAME,
    granted_namespaces,
    render_operator,
)

RBAC = "rbac.authorization.k8s.io/v1"


class InstallError(SlurmkubeError):
    """The operator could not be installed or did not become available."""


@dataclass(frozen=True)
class OperatorSettings:
    """How the operator runs: the module's options."""

    namespace: str
    image: str
    pull_policy: str = "IfNotPresent"
    replicas: int = 1
    watch_namespaces: Sequence[str] = ()
    # Every namespace, asked for explicitly; unset, the operator is granted only the namespaces
    # it watches (its own when watch_namespaces is empty).
    cluster_scope: bool = False
    # None leaves an admission policy as it is; remove_admission deletes it.
    admission: Optional[AdmissionRules] = None
    remove_admission: bool = False
    # Namespaces whose pods the bridge schedules (their schedulerName set at admission).
    bridge_namespaces: Sequence[str] = ()
    # Secrets of the operator's namespace its pods pull their image with.
    image_pull_secrets: Sequence[str] = ()


def check_admission_option(option: Mapping[str, Any]) -> None:
    """InstallError naming the first bad entry of the admission_policy option."""
    for prefix in option["image_prefixes"]:
        if not prefix or CONTROL_CHARACTERS.search(prefix):
            raise InstallError("admission_policy.image_prefixes: must be non-empty text without control "
                               "characters, got %r" % prefix)
    for path in option["host_path_prefixes"]:
        if not is_normalized_path(path) or CONTROL_CHARACTERS.search(path):
            raise InstallError("admission_policy.host_path_prefixes: must be normalized absolute paths "
                               "(no empty, '.' or '..' part), got %r" % path)
    for key in ("munge_secret_names", "database_secret_names"):
        for name in option[key]:
            if not re.match(DNS1123_SUBDOMAIN, name):
                raise InstallError("admission_policy.%s: must be Secret names, got %r" % (key, name))


def admission_settings(option: Optional[Mapping[str, Any]]) -> Tuple[Optional[AdmissionRules], bool]:
    """The module's admission_policy option as (rules to apply, whether to remove the policy),
    checked before anything is written; None leaves the policy as it is."""
    if option is None:
        return None, False
    if option["state"] == "absent":
        return None, True
    check_admission_option(option)
    host_paths = tuple(path.rstrip("/") or "/" for path in option["host_path_prefixes"])
    return AdmissionRules(tuple(option["image_prefixes"]), host_paths, tuple(option["munge_secret_names"]),
                          option["privileged_config"], tuple(option["database_secret_names"])), False


def watched_namespaces(settings: OperatorSettings) -> Tuple[str, ...]:
    """The namespaces the operator is granted and watches; () is every namespace (cluster_scope).
    Least privilege by default: with neither option set, the operator's own namespace only."""
    if settings.cluster_scope:
        if settings.watch_namespaces:
            raise InstallError("watch_namespaces: must be empty with cluster_scope=true (every namespace), got %s"
                               % ", ".join(settings.watch_namespaces))
        return ()
    return tuple(settings.watch_namespaces) or (settings.namespace,)


def check_bridge_namespaces(namespaces: Sequence[str]) -> None:
    """InstallError naming the first entry of bridge_namespaces that is no namespace name."""
    for namespace in namespaces:
        if not re.match(DNS1123_LABEL, namespace) or len(namespace) > 63:
            raise InstallError("bridge_namespaces: must be namespace names, got %r" % namespace)


def bridge_admission_version(kube: Kube) -> str:
    """The MutatingAdmissionPolicy version the API server serves; InstallError when none."""
    for version in ADMISSION_VERSIONS:
        if kube.serves(version, "MutatingAdmissionPolicy"):
            return version
    raise InstallError("bridge_namespaces: the API server serves no MutatingAdmissionPolicy, which sets the "
                       "bridge's scheduler on their pods (Kubernetes 1.36 or later; on 1.34 and 1.35, enable the "
                       "MutatingAdmissionPolicy feature gate and admissionregistration.k8s.io/v1beta1)")


def operator_objects(settings: OperatorSettings, bridge_version: str = ADMISSION_VERSIONS[0]) -> List[Dict[str, Any]]:
    """Namespace, CRDs, then the operator's own objects, in apply order."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": settings.namespace}}
    watched = watched_namespaces(settings)
    policy = (render_admission_policy(settings.namespace, settings.admission, watched)
              if settings.admission is not None else [])
    bridge = (render_bridge_admission(settings.namespace, settings.bridge_namespaces, bridge_version)
              if settings.bridge_namespaces else [])
    return [ns, *render_crds(), *render_spec_rules_policy(),
            *render_operator(settings.namespace, settings.image, settings.pull_policy, settings.replicas, watched,
                             settings.bridge_namespaces, settings.image_pull_secrets),
            *policy, *bridge]


def existing(kube: Kube, objects: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [o for o in objects if kube.get(o["apiVersion"], o["kind"], o["metadata"]["name"],
                                           o["metadata"].get("namespace")) is not None]


def admission_objects(namespace: str) -> List[Dict[str, Any]]:
    """This install's admission policy and binding (binding first: the order of removal)."""
    return list(reversed(render_admission_policy(namespace, AdmissionRules())))


def bridge_admission_objects(kube: Kube, namespace: str) -> List[Dict[str, Any]]:
    """This install's bridge policy and binding, in whichever served version (binding first)."""
    return [obj for version in ADMISSION_VERSIONS if kube.serves(version, "MutatingAdmissionPolicy")
            for obj in reversed(render_bridge_admission(namespace, (), version))]


def grants_outside(kube: Kube, namespace: str, watched: Sequence[str]) -> List[Dict[str, Any]]:
    """The Roles and RoleBindings this install made in namespaces it does not grant (any longer):
    a namespace dropped from watch_namespaces or bridge_namespaces keeps no grant."""
    name = names.operator_cluster_wide(namespace)
    return [obj for kind in ("RoleBinding", "Role")
            for obj in kube.list(RBAC, kind, None, labels={C.LABEL_NAME: OPERATOR_NAME})
            if obj["metadata"]["name"] == name and obj["metadata"].get("namespace") not in watched]


def removal_diff(obj: Dict[str, Any]) -> Dict[str, Any]:
    return {"before_header": describe(obj), "before": {"exists": True}, "after": {}}


def delete_all(kube: Kube, objects: Sequence[Dict[str, Any]]) -> None:
    for obj in objects:
        kube.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))


def check_image_pull_secrets(secrets: Sequence[str]) -> None:
    """InstallError naming the first entry of image_pull_secrets that is no Secret name."""
    for name in secrets:
        if not is_object_name(name):
            raise InstallError("image_pull_secrets: must be Secret names, got %r" % name)


def ensure_operator(kube: Kube, settings: OperatorSettings, check_mode: bool) -> Change:
    """Apply what differs and drop grants in namespaces no longer watched. In check mode,
    objects of a namespace not made yet count as changes."""
    check_bridge_namespaces(settings.bridge_namespaces)
    check_image_pull_secrets(settings.image_pull_secrets)
    version = bridge_admission_version(kube) if settings.bridge_namespaces else ADMISSION_VERSIONS[0]
    objects = operator_objects(settings, version)
    if check_mode and kube.get("v1", "Namespace", settings.namespace) is None:
        return Change(True, [diff_of(Applied(o, None, o)) for o in objects])
    applied = apply_changed(kube, objects, dry_run=check_mode)
    watched = watched_namespaces(settings)
    stale = grants_outside(kube, settings.namespace,
                           granted_namespaces(watched, settings.bridge_namespaces) if watched else ())
    if settings.remove_admission:
        stale += existing(kube, admission_objects(settings.namespace))
    if not settings.bridge_namespaces:
        stale += existing(kube, bridge_admission_objects(kube, settings.namespace))
    if not check_mode:
        delete_all(kube, stale)
    return Change(bool(applied or stale), [diff_of(a) for a in applied] + [removal_diff(o) for o in stale])


def remove_operator(kube: Kube, namespace: str, remove_crds: bool, check_mode: bool) -> Change:
    """Delete the operator; its CRDs (and with them every cluster) only when asked."""
    doomed = list(reversed(render_operator(namespace, "unused")))
    # The leader Lease is the operator's own (its pods made it), gone with the Deployment.
    doomed.append({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": OPERATOR_NAME, "namespace": namespace}})
    if remove_crds:
        doomed += list(reversed(render_spec_rules_policy())) + render_crds()
    found = grants_outside(kube, namespace, ()) + existing(
        kube, admission_objects(namespace) + bridge_admission_objects(kube, namespace) + doomed)
    if not check_mode:
        delete_all(kube, found)
    return Change(bool(found), [removal_diff(o) for o in found])


def wait_operator(kube: Kube, namespace: str, replicas: int, timeout: int, timer: Timer = REAL_TIME) -> None:
    """Until the operator Deployment's pods are available and no other is left: an operator of
    the release before, still shutting down, handles the events it has, and would call a cluster
    spec of this release invalid."""
    def probe() -> Poll:
        deployment = kube.get("apps/v1", "Deployment", OPERATOR_NAME, namespace)
        pods = kube.list("v1", "Pod", namespace, {C.LABEL_NAME: OPERATOR_NAME})
        return Poll(deployment_settled(deployment, pods, replicas), (deployment or {}).get("status") or {})

    last = wait_until(probe, timeout, timer)
    if not last.done:
        raise InstallError("operator %s/%s not available after %ds: %s"
                           % (namespace, OPERATOR_NAME, timeout, last.seen.get("conditions") or "no status"))
