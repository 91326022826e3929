# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An admission policy for spec authors: what a SlurmCluster may ask of the nodes.

Whoever may write a SlurmCluster chooses the images every Slurm pod runs, host directories
bound into the jail, the Secret that holds the munge key and programs Slurm runs as root
(spec.slurm.privilegedConfig). A ValidatingAdmissionPolicy (built into Kubernetes, CEL)
keeps those to what the administrator allows, in the namespaces the operator serves. Pure:
the admin's lists become CEL literals here.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import Images

# Every image a SlurmCluster names (the model's Images, but its pull policy); the images of an
# optional part count only where the spec turns that part on.
OPTIONAL_IMAGE_FIELDS = {"slurmdbd": "accounting", "mariadb": "accounting", "exporter": "exporter", "backup": "backup",
                         "sssd": "directory"}
# Beyond its part's enabled, what else runs an optional image: the backup image restores
# (spec.backup.restore) with the backups off.
ALSO_USED_WHEN = {"backup": "backup.restore.name"}
# Parts that have no enabled switch: set is on (a directory is its LDAP servers).
ON_WHEN_SET = {"directory": "directory.ldap"}
IMAGE_FIELDS = tuple(f.name for f in dataclasses.fields(Images)
                     if f.name != "pull_policy" and f.name not in OPTIONAL_IMAGE_FIELDS)


@dataclass(frozen=True)
class AdmissionRules:
    """What spec authors may ask for; empty lists allow nothing of that kind."""

    image_prefixes: Sequence[str] = ("slurmkube/",)
    host_path_prefixes: Sequence[str] = ()
    munge_secret_names: Sequence[str] = ()
    privileged_config: bool = False
    database_secret_names: Sequence[str] = ()


def cel_list(values: Sequence[str]) -> str:
    """A CEL list of string literals (JSON's escapes are CEL's)."""
    return "[%s]" % ", ".join(json.dumps(v) for v in values)


def spec_has(path: str) -> str:
    """CEL: every step of object.spec.<path> is set."""
    steps, parts = [], ["object", "spec", *path.split(".")]
    for i in range(2, len(parts) + 1):
        steps.append("has(%s)" % ".".join(parts[:i]))
    return " && ".join(steps)


def effective_image(name: str) -> str:
    """CEL: the image the spec asks for, or the model's default when it names none."""
    return '(%s ? object.spec.images.%s : %s)' % (spec_has("images." + name), name,
                                                  json.dumps(getattr(Images(), name)))


def in_use(part: str) -> str:
    """CEL: the spec runs the optional PART's images (it is enabled or set, or ALSO_USED_WHEN says so)."""
    if part in ON_WHEN_SET:
        return "(%s)" % spec_has(ON_WHEN_SET[part])
    uses = ["(%s && object.spec.%s.enabled)" % (spec_has(part + ".enabled"), part)]
    if part in ALSO_USED_WHEN:
        uses.append("(%s)" % spec_has(ALSO_USED_WHEN[part]))
    return " || ".join(uses)


def image_validation(prefixes: Sequence[str]) -> Dict[str, str]:
    images = "[%s]" % ", ".join(effective_image(name) for name in IMAGE_FIELDS)
    optional = " + ".join(
        "(%s ? [%s] : [])" % (in_use(part), ", ".join(
            effective_image(name) for name, owner in OPTIONAL_IMAGE_FIELDS.items() if owner == part))
        for part in sorted(set(OPTIONAL_IMAGE_FIELDS.values())))
    return {
        "expression": "(%s + %s).all(i, %s.exists(p, i.startsWith(p)))" % (images, optional, cel_list(prefixes)),
        "message": "spec.images: only images starting with %s are allowed here" % (", ".join(prefixes) or "nothing"),
        "reason": "Forbidden",
    }


def host_path_validation(prefixes: Sequence[str]) -> Dict[str, str]:
    allowed = '%s.exists(p, m.hostPath == p || m.hostPath.startsWith(p + "/"))' % cel_list(prefixes)
    return {
        "expression": "!(%s) || object.spec.jail.subMounts.all(m, !has(m.hostPath) || "
                      "(!m.hostPath.contains(\"..\") && %s))" % (spec_has("jail.subMounts"), allowed),
        "message": "spec.jail.subMounts[].hostPath: only directories below %s are allowed here"
                   % (", ".join(prefixes) or "nothing (no hostPath)"),
        "reason": "Forbidden",
    }


def secret_validation(path: str, own_suffix: str, names: Sequence[str]) -> Dict[str, str]:
    """A Secret named at spec.<path> is the cluster's own '<name><own_suffix>' or one the admin
    listed: a pod of the cluster reads it (and slurmdbd sends a database password to its host)."""
    field = "object.spec." + path
    own = '%s == object.metadata.name + "%s"' % (field, own_suffix)
    return {
        "expression": "!(%s) || %s || %s.exists(n, n == %s)" % (spec_has(path), own, cel_list(names), field),
        "message": "spec.%s: only the cluster's own '<name>%s'%s may be named here"
                   % (path, own_suffix, "".join(", " + n for n in names)),
        "reason": "Forbidden",
    }


def munge_secret_validation(names: Sequence[str]) -> Dict[str, str]:
    return secret_validation("munge.secretName", "-munge-key", names)


def database_secret_validation(names: Sequence[str]) -> Dict[str, str]:
    return secret_validation("accounting.database.passwordSecret", "-accounting-db", names)


def privileged_config_validation() -> Dict[str, str]:
    return {
        "expression": "!(%s) || size(object.spec.slurm.privilegedConfig) == 0" % spec_has("slurm.privilegedConfig"),
        "message": "spec.slurm.privilegedConfig: programs run as root by Slurm are not allowed here",
        "reason": "Forbidden",
    }


def validations(rules: AdmissionRules) -> List[Dict[str, str]]:
    checks = [image_validation(rules.image_prefixes), host_path_validation(rules.host_path_prefixes),
              munge_secret_validation(rules.munge_secret_names),
              database_secret_validation(rules.database_secret_names)]
    if not rules.privileged_config:
        checks.append(privileged_config_validation())
    return checks


def render_admission_policy(operator_namespace: str, rules: AdmissionRules,
                            watch_namespaces: Sequence[str] = ()) -> List[Dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its binding: SlurmClusters created or updated in the
    watched namespaces (every namespace when none) are refused unless they keep to the rules."""
    # One policy per operator install, named like its ClusterRole.
    name = names.operator_cluster_wide(operator_namespace)
    labels = names.operator_labels()
    policy = {
        "apiVersion": C.ADMISSION_API, "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [C.API_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                "resources": [C.PLURAL_CLUSTER]}]},
            "validations": validations(rules),
        },
    }
    match: Dict[str, Any] = {}
    if watch_namespaces:
        match = {"namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(watch_namespaces)}]}}
    binding = {
        "apiVersion": C.ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": labels},
        "spec": {"policyName": name, "validationActions": ["Deny"], **({"matchResources": match} if match else {})},
    }
    return [policy, binding]
