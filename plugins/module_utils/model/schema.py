# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CRDs, generated from the model's dataclasses (never written by hand)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import (
    MANAGED_SLURM_KEYS,
    PRIVILEGED_SLURM_KEYS,
    SLURM_KEY,
    SLURM_VALUE_FORBIDDEN,
    FreeForm,
    Quantity,
    SlurmValue,
    camel,
    model_hints,
    optional_inner,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import NodeSetSpec, SlurmClusterSpec
from ansible_collections.slurmkube.core.plugins.module_utils.quantity import QUANTITY_PATTERN


def type_schema(hint: Any) -> Dict[str, Any]:
    """The OpenAPI v3 (structural) schema of one model type."""
    inner = optional_inner(hint)
    if inner is not None:
        return dict(type_schema(inner), nullable=True)
    origin = getattr(hint, "__origin__", None)
    if origin is list:
        return {"type": "array", "items": type_schema(hint.__args__[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": type_schema(hint.__args__[1])}
    if dataclasses.is_dataclass(hint):
        return object_schema(hint)
    if hint is Quantity:
        # The only anyOf a structural schema allows: bare types, constraints beside them.
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    if hint is FreeForm:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if hint is SlurmValue:
        return {"x-kubernetes-preserve-unknown-fields": True, "nullable": True}
    simple = {str: "string", int: "integer", bool: "boolean"}
    if hint in simple:
        return {"type": simple[hint]}
    raise TypeError("no schema for model type %r" % (hint,))


def _constraints(meta: Dict[str, Any]) -> Dict[str, Any]:
    keys = {"minimum": "minimum", "maximum": "maximum", "pattern": "pattern", "max_length": "maxLength"}
    out = {schema_key: meta[key] for key, schema_key in keys.items() if meta.get(key) is not None}
    if meta.get("enum"):
        out["enum"] = list(meta["enum"])
    return out


def _list_rules(meta: Dict[str, Any]) -> Dict[str, Any]:
    """max_items, unique_by and unique as the API server checks them (CEL, bounded by maxItems)."""
    out: Dict[str, Any] = {}
    if meta.get("max_items") is not None:
        out["maxItems"] = meta["max_items"]
    key = meta.get("unique_by")
    if key:
        out["x-kubernetes-validations"] = [{
            "rule": "self.all(a, self.exists_one(b, b.%s == a.%s))" % (camel(key), camel(key)),
            "message": "two items have one %s: each must be used once" % camel(key)}]
    elif meta.get("unique"):
        out["x-kubernetes-validations"] = [{"rule": "self.all(a, self.exists_one(b, b == a))",
                                            "message": "an item is listed twice: each must be listed once"}]
    return out


def _default(fld: dataclasses.Field) -> Any:
    """Scalar defaults go into the schema so `kubectl get -o yaml` shows them."""
    value = fld.default
    if value is dataclasses.MISSING or value is None or isinstance(value, (dict, list)):
        return dataclasses.MISSING
    return value


def object_schema(cls: Any) -> Dict[str, Any]:
    """Schema of a model dataclass: properties with docs, constraints and defaults."""
    hints = model_hints(cls)
    properties: Dict[str, Any] = {}
    required: List[str] = []
    for fld in dataclasses.fields(cls):
        prop = type_schema(hints[fld.name])
        if "items" in prop and not dataclasses.is_dataclass(hints[fld.name].__args__[0]):
            prop["items"].update(_constraints(dict(fld.metadata)))
        elif "anyOf" not in prop:
            prop.update(_constraints(dict(fld.metadata)))
        prop.update(_list_rules(dict(fld.metadata)))
        prop["description"] = fld.metadata["doc"]
        default = _default(fld)
        if default is not dataclasses.MISSING:
            prop["default"] = default
        if fld.default is dataclasses.MISSING and fld.default_factory is dataclasses.MISSING:
            required.append(camel(fld.name))
        properties[camel(fld.name)] = prop
    schema: Dict[str, Any] = {"type": "object", "description": (cls.__doc__ or "").strip(), "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _condition_schema() -> Dict[str, Any]:
    text = {"type": "string"}
    return {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": text,
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": text,
            "message": text,
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "observedGeneration": {"type": "integer"},
        },
    }


def _counts_schema() -> Dict[str, Any]:
    return {"type": "object", "properties": {"ready": {"type": "integer"}, "desired": {"type": "integer"}}}


def _status_schema(**extra: Dict[str, Any]) -> Dict[str, Any]:
    """A status with the fields every kind has (phase, message, generation, conditions, node states)."""
    properties = {
        "phase": {"type": "string"},
        "message": {"type": "string"},
        "observedGeneration": {"type": "integer"},
        "conditions": {"type": "array", "items": _condition_schema()},
        "nodesByState": {"type": "object", "additionalProperties": {"type": "integer"}},
    }
    properties.update(extra)
    return {"type": "object", "properties": properties}


# status.controlPlane's parts (operator/report.py names each one the spec asks for).
CONTROL_PLANE_PARTS = ("controller", "accounting", "rest", "login")


def cluster_status_schema() -> Dict[str, Any]:
    """status of a SlurmCluster, written by the operator."""
    return _status_schema(
        controller={"type": "object", "description": "Controllers up (serving or standing by) of those wanted, "
                    "the pod that serves and those standing by.",
                    "properties": {"ready": {"type": "integer"}, "desired": {"type": "integer"},
                                   "serving": {"type": "string"},
                                   "standby": {"type": "array", "items": {"type": "string"}}}},
        controlPlane={"type": "object", "description": "Each part of the control plane the spec asks for "
                      "(controller, accounting, rest, login), up or not: whether users get what they need of "
                      "it now; its condition says why not, and an Event when it changes.",
                      "properties": {part: {"type": "boolean"} for part in CONTROL_PLANE_PARTS}},
        login=_counts_schema(),
        nodes=_counts_schema(),
        configHash={"type": "string", "description": "Digest of the Slurm configuration in effect."},
        mungeKey={"type": "string", "description": "Fingerprint (SHA-256) of the munge key every daemon runs "
                  "with; it differs from the Secret's while a new key is being rolled out."},
        slurm={"type": "object", "description": "The Slurm images in effect and the release slurmctld runs; during "
               "an upgrade in Slurm's order, its stage (a backup first, with spec.backup), target images and "
               "release; while a new controller image waits on its pre-flight Job or was refused, the Job and "
               "the refusal; a worker image "
               "that failed on the first worker to run it (the canary), while the spec names it; for a cluster an "
               "earlier slurmkube release made, that release's images still running, whose pods keep the "
               "templates it made them with until a new image replaces theirs.",
               "properties": {
                   "images": {"type": "object", "additionalProperties": {"type": "string"}},
                   "version": {"type": "string"},
                   "rollout": {"type": "object", "properties": {
                       "stage": {"type": "string", "enum": ["snapshot", "slurmdbd", "controller", "canary"]},
                       "images": {"type": "object", "additionalProperties": {"type": "string"}},
                       "version": {"type": "string"},
                       "snapshot": {"type": "string", "description": "With spec.backup: the backup Job run "
                                    "before the upgrade."},
                       "snapshotFailed": {"type": "boolean"}}},
                   "preflight": {"type": "string"}, "refusal": {"type": "string"},
                   "canaryFailure": {"type": "object", "properties": {
                       "images": {"type": "object", "additionalProperties": {"type": "string"}},
                       "message": {"type": "string"}}},
                   "earlierRelease": {"type": "object", "additionalProperties": {"type": "string"}}}},
        restKeys={"type": "object", "description": "The REST API's keys by id: the one that signs tokens, the "
                  "next (published, signing after the next rotation), those retiring with when they leave; "
                  "the digest of the key set slurmctld checks tokens with.",
                  "properties": {"signing": {"type": "string"}, "next": {"type": "string"},
                                 "retiring": {"type": "object", "additionalProperties": {"type": "string"}},
                                 "inEffect": {"type": "string"}}},
        backup={"type": "object", "description": "With spec.backup: when the newest backup run that succeeded "
                "ended, when the newest that failed ended and its Job (its logs say why), a run still going.",
                "properties": {"lastSuccessTime": {"type": "string", "format": "date-time"},
                               "lastFailureTime": {"type": "string", "format": "date-time"},
                               "lastFailedJob": {"type": "string"}, "running": {"type": "string"}}},
        restore={"type": "object", "description": "The last restore (spec.backup.restore): its name, what it "
                 "restores and from which snapshot, where it is (Pending while an upgrade rolls out, Stopping "
                 "while what writes the parts stops, Restoring while its Job runs, then Succeeded or Failed), "
                 "its Job (its logs say what it did), when it started and ended.",
                 "properties": {"name": {"type": "string"}, "phase": {"type": "string"},
                                "parts": {"type": "array", "items": {"type": "string"}},
                                "snapshot": {"type": "string"},
                                "jailPaths": {"type": "array", "items": {"type": "string"}},
                                "exact": {"type": "boolean"}, "job": {"type": "string"},
                                "message": {"type": "string"},
                                "startTime": {"type": "string", "format": "date-time"},
                                "completionTime": {"type": "string", "format": "date-time"}}},
        jobsNotRequeued={"type": "array", "description": "Jobs sent with --no-requeue that hold a leaving node past "
                         "its drain timeout: they run on, and the node leaves when they end.",
                         "items": {"type": "object", "properties": {"jobId": {"type": "integer"},
                                                                    "node": {"type": "string"}}}},
    )


def nodeset_status_schema() -> Dict[str, Any]:
    """status of a NodeSet; replicas and selector serve the scale subresource."""
    return _status_schema(
        replicas={"type": "integer"},
        readyReplicas={"type": "integer"},
        selector={"type": "string"},
    )


def _column(name: str, path: str, kind: str = "string") -> Dict[str, str]:
    return {"name": name, "type": kind, "jsonPath": path}


def _crd(kind: str, plural: str, short: List[str], spec: Dict[str, Any], status: Dict[str, Any],
         columns: List[Dict[str, str]], subresources: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "%s.%s" % (plural, C.API_GROUP),
            "labels": {C.LABEL_PART_OF: C.MANAGED_BY, C.LABEL_MANAGED_BY: C.MANAGED_BY},
        },
        "spec": {
            "group": C.API_GROUP,
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": kind + "List", "plural": plural,
                      "singular": kind.lower(), "shortNames": short, "categories": ["slurmkube"]},
            "versions": [{
                "name": C.API_VERSION,
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": spec,
                        "status": status,
                    },
                }},
                "subresources": subresources,
                "additionalPrinterColumns": columns,
            }],
        },
    }


def render_crds() -> List[Dict[str, Any]]:
    """The SlurmCluster and NodeSet CustomResourceDefinitions."""
    age = _column("Age", ".metadata.creationTimestamp", "date")
    cluster = _crd(
        C.KIND_CLUSTER, C.PLURAL_CLUSTER, ["slurm"],
        object_schema(SlurmClusterSpec), cluster_status_schema(),
        [_column("Phase", ".status.phase"),
         _column("Ready", ".status.nodes.ready", "integer"),
         _column("Desired", ".status.nodes.desired", "integer"), age],
        {"status": {}},
    )
    nodeset = _crd(
        C.KIND_NODESET, C.PLURAL_NODESET, ["sns"],
        object_schema(NodeSetSpec), nodeset_status_schema(),
        [_column("Cluster", ".spec.clusterName"),
         _column("Phase", ".status.phase"),
         _column("Ready", ".status.readyReplicas", "integer"),
         _column("Desired", ".spec.replicas", "integer"), age],
        {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                 "statusReplicasPath": ".status.replicas",
                                 "labelSelectorPath": ".status.selector"}},
    )
    return [cluster, nodeset]


# --------------------------------------------------------------------------- spec rules policy
# What the CRD schema cannot say: the keys and values of the Slurm settings maps (their values
# are text, numbers, booleans, lists or null, which a structural schema leaves untyped and CEL
# in the CRD then cannot read). The API server checks them with a ValidatingAdmissionPolicy that
# lives beside the CRDs, its CEL made from the model's own rules.


def _cel_regex(pattern: str) -> str:
    """A Python regular expression as a CEL raw string for matches() (RE2 reads it alike)."""
    if "'" in pattern:
        raise ValueError("pattern %r cannot be a CEL raw string" % pattern)
    return "r'%s'" % pattern


def _cel_names(names: Any) -> str:
    return "[%s]" % ", ".join('"%s"' % n for n in sorted(names))


def _slurm_maps(cls: Any, var: str, path: str, depth: int = 0) -> List[Tuple[str, str, Callable[[str], str]]]:
    """Every Dict[str, SlurmValue] below cls, reached from the CEL variable var: (its path for
    messages, its CEL reference, a wrapper that makes a check of it hold where a step is unset
    and run for each item of the lists of objects on the way)."""
    found: List[Tuple[str, str, Callable[[str], str]]] = []
    hints = model_hints(cls)
    for fld in dataclasses.fields(cls):
        hint = optional_inner(hints[fld.name]) or hints[fld.name]
        ref, sub = "%s.%s" % (var, camel(fld.name)), "%s.%s" % (path, camel(fld.name))
        origin, args = getattr(hint, "__origin__", None), getattr(hint, "__args__", ())
        unset = "!has(%s) || " % ref
        if origin is dict and args[1] is SlurmValue:
            found.append((sub, ref, lambda check, unset=unset: unset + check))
        elif dataclasses.is_dataclass(hint):
            found += [(p, r, lambda check, wrap=wrap, unset=unset: unset + wrap(check))
                      for p, r, wrap in _slurm_maps(hint, ref, sub, depth)]
        elif origin is list and dataclasses.is_dataclass(args[0]):
            item = "i%d" % depth
            found += [(p, r, lambda check, wrap=wrap, unset=unset, ref=ref, item=item:
                       "%s%s.all(%s, %s)" % (unset, ref, item, wrap(check)))
                      for p, r, wrap in _slurm_maps(args[0], item, sub + "[*]", depth + 1)]
    return found


def spec_rule_validations() -> List[Dict[str, str]]:
    """The policy's validations: Slurm option names as keys, one-word values, and in
    spec.slurm.config no setting slurmkube makes or that runs programs as root."""
    word = _cel_regex(SLURM_VALUE_FORBIDDEN.pattern)
    name = _cel_regex(SLURM_KEY)
    checks = []
    for path, ref, wrap in _slurm_maps(SlurmClusterSpec, "object.spec", "spec"):
        checks.append((wrap("%s.all(k, k.matches(%s))" % (ref, name)),
                       "%s: keys must be Slurm option names (a letter, then letters and digits)" % path))
        one_word = "{m}.all(k, !(type({m}[k]) == string && {m}[k].matches({w})) && !(type({m}[k]) == list && " \
                   "{m}[k].exists(v, type(v) == string && v.matches({w}))))"
        checks.append((wrap(one_word.format(m=ref, w=word)),
                       "%s: values must be one word without blanks, '#', quotes, backslashes or control "
                       "characters (Slurm's config files end a value there)" % path))
    config = "object.spec.slurm.config"
    guard = "!has(object.spec.slurm) || !has(%s) || " % config
    checks.append((guard + "!%s.exists(k, k.lowerAscii() in %s)" % (config, _cel_names(MANAGED_SLURM_KEYS)),
                   "spec.slurm.config: sets a key slurmkube sets itself (SlurmctldHost, PlugStackConfig, ...)"))
    checks.append((guard + "!%s.exists(k, k.lowerAscii() in %s)" % (config, _cel_names(PRIVILEGED_SLURM_KEYS)),
                   "spec.slurm.config: a key that runs programs or writes files as root belongs in "
                   "spec.slurm.privilegedConfig"))
    return [{"expression": expression, "message": message} for expression, message in checks]


def render_spec_rules_policy() -> List[Dict[str, Any]]:
    """The policy and its binding, for SlurmClusters in every namespace (like the CRDs)."""
    labels = names.collection_labels()
    policy = {
        "apiVersion": C.ADMISSION_API, "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": names.SPEC_RULES_POLICY, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            # Written as the API server stores it, defaults and all: matchConstraints is one atomic
            # field, and `kubectl apply --server-side -f crds/` after the module (or the other way
            # round) would otherwise conflict over a value that only looks different.
            "matchConstraints": {
                "matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
                "resourceRules": [{"apiGroups": [C.API_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                                   "resources": [C.PLURAL_CLUSTER], "scope": "*"}]},
            "validations": spec_rule_validations(),
        },
    }
    binding = {
        "apiVersion": C.ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": names.SPEC_RULES_POLICY, "labels": labels},
        "spec": {"policyName": names.SPEC_RULES_POLICY, "validationActions": ["Deny"]},
    }
    return [policy, binding]
