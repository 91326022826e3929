# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CRDs, generated from the model's dataclasses (never written by hand)."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.spec import (
    FreeForm,
    NodeSetSpec,
    Quantity,
    SlurmClusterSpec,
    SlurmValue,
    camel,
    model_hints,
    optional_inner,
)
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


def cluster_status_schema() -> Dict[str, Any]:
    """status of a SlurmCluster, written by the operator."""
    return _status_schema(
        controller=_counts_schema(),
        login=_counts_schema(),
        nodes=_counts_schema(),
        configHash={"type": "string", "description": "Digest of the Slurm configuration in effect."},
        mungeKey={"type": "string", "description": "Fingerprint (SHA-256) of the munge key every daemon runs "
                  "with; it differs from the Secret's while a new key is being rolled out."},
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
