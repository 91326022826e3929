# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""From dicts (a custom resource, a module option) to the typed model, collecting every problem.

Each field is checked against its own metadata (fields.py); the checks across fields (rules.py)
run only on a spec whose fields are each valid.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils.model import rules
from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import (
    CONTROL_CHARACTERS,
    DNS1123_LABEL,
    SLURM_VALUE_FORBIDDEN,
    FreeForm,
    Quantity,
    SlurmValue,
    camel,
    model_hints,
    optional_inner,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError, describe, key_path
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import (
    NodeSet,
    NodeSetSpec,
    SlurmCluster,
    SlurmClusterSpec,
)
from ansible_collections.slurmkube.core.plugins.module_utils.quantity import QuantityError, parse_quantity


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", str(hint))


class _Parser:
    """Turns nested dicts into the frozen dataclasses, collecting every problem."""

    def __init__(self) -> None:
        self.problems: List[Tuple[str, str]] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append((path, message))

    def parse(self, cls: Any, data: Any, path: str) -> Any:
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            self.problem(path, "must be a mapping, got %s" % describe(data))
            return cls()
        hints = model_hints(cls)
        known = {camel(f.name): f for f in dataclasses.fields(cls)}
        for key in data:
            if key not in known:
                self.problem(
                    key_path(path, str(key)),
                    "unknown field; known fields are %s" % ", ".join(sorted(known)),
                )
        values = {}
        for key, fld in known.items():
            sub = "%s.%s" % (path, key)
            if key in data:
                values[fld.name] = self.value(hints[fld.name], data[key], sub, fld.metadata)
            elif fld.default is dataclasses.MISSING and fld.default_factory is dataclasses.MISSING:
                self.problem(sub, "is required")
                values[fld.name] = ""
        try:
            return cls(**values)
        except TypeError as exc:  # only reachable through a problem already recorded
            self.problem(path, str(exc))
            return None

    def value(self, hint: Any, data: Any, path: str, meta: Mapping[str, Any]) -> Any:
        inner = optional_inner(hint)
        if inner is not None:
            return None if data is None else self.value(inner, data, path, meta)
        origin = getattr(hint, "__origin__", None)
        if origin in (list, List):
            return self.list_value(hint.__args__[0], data, path, meta)
        if origin in (dict, Dict):
            return self.dict_value(hint.__args__[1], data, path)
        if dataclasses.is_dataclass(hint):
            return self.parse(hint, data, path)
        return self.scalar(hint, data, path, meta)

    def list_value(self, item: Any, data: Any, path: str, meta: Mapping[str, Any]) -> List[Any]:
        if not isinstance(data, (list, tuple)):
            self.problem(path, "must be a list, got %s" % describe(data))
            return []
        item_meta = meta if not dataclasses.is_dataclass(item) else {}
        values = [self.value(item, v, "%s[%d]" % (path, i), item_meta) for i, v in enumerate(data)]
        if meta.get("max_items") is not None and len(values) > meta["max_items"]:
            self.problem(path, "must have at most %d items, got %d" % (meta["max_items"], len(values)))
        self.check_unique(values, path, meta)
        return values

    def check_unique(self, values: Sequence[Any], path: str, meta: Mapping[str, Any]) -> None:
        """unique_by: no two items with one value of that field; unique: no repeated item."""
        key = meta.get("unique_by")
        if not key and not meta.get("unique"):
            return
        seen = set()
        for i, value in enumerate(values):
            identity = getattr(value, key, None) if key else value
            if identity in seen:
                where = "%s[%d]%s" % (path, i, "." + camel(key) if key else "")
                self.problem(where, "is used twice: %s" % describe(identity))
            seen.add(identity)

    def dict_value(self, item: Any, data: Any, path: str) -> Dict[str, Any]:
        if not isinstance(data, Mapping):
            self.problem(path, "must be a mapping, got %s" % describe(data))
            return {}
        return {str(k): self.value(item, v, key_path(path, str(k)), {}) for k, v in data.items()}

    def scalar(self, hint: Any, data: Any, path: str, meta: Mapping[str, Any]) -> Any:
        if hint is Quantity:
            return self.quantity(data, path)
        if hint is FreeForm:
            if not isinstance(data, Mapping):
                self.problem(path, "must be a mapping, got %s" % describe(data))
            return dict(data) if isinstance(data, Mapping) else {}
        if hint is SlurmValue:
            return self.slurm_value(data, path)
        if hint is bool:
            if not isinstance(data, bool):
                self.problem(path, "must be true or false, got %s" % describe(data))
            return bool(data)
        if hint is int:
            if isinstance(data, bool) or not isinstance(data, int):
                self.problem(path, "must be an integer, got %s" % describe(data))
                return 0
            self.check_range(data, path, meta)
            return data
        if hint is str:
            if not isinstance(data, str):
                self.problem(path, "must be a string, got %s" % describe(data))
                return ""
            self.check_text(data, path, meta)
            return data
        raise TypeError("model field of unsupported type %s at %s" % (_type_name(hint), path))

    def quantity(self, data: Any, path: str) -> Quantity:
        try:
            parse_quantity(data)
        except QuantityError:
            self.problem(path, "must be a Kubernetes quantity such as '4', '500m' or '16Gi', got %s" % describe(data))
            return Quantity("0")
        return Quantity(str(data))

    def slurm_value(self, data: Any, path: str) -> Any:
        if data is None or isinstance(data, (int, bool)):
            return data
        if isinstance(data, str):
            self.check_slurm_word(data, path)
            return data
        if isinstance(data, (list, tuple)) and all(isinstance(v, (str, int)) for v in data):
            for i, item in enumerate(data):
                self.check_slurm_word(str(item), "%s[%d]" % (path, i))
            return [str(v) for v in data]
        self.problem(path, "must be text, a number, true/false, a list or null, got %s" % describe(data))
        return None

    def check_slurm_word(self, data: str, path: str) -> None:
        if SLURM_VALUE_FORBIDDEN.search(data):
            self.problem(path, "must be one word without blanks, '#', quotes, backslashes or control characters "
                         "(Slurm's config files end a value there), got %s" % describe(data))

    def check_range(self, data: int, path: str, meta: Mapping[str, Any]) -> None:
        low, high = meta.get("minimum"), meta.get("maximum")
        if low is not None and data < low:
            self.problem(path, "must be at least %d, got %d" % (low, data))
        if high is not None and data > high:
            self.problem(path, "must be at most %d, got %d" % (high, data))

    def check_text(self, data: str, path: str, meta: Mapping[str, Any]) -> None:
        enum, pattern, max_length = meta.get("enum"), meta.get("pattern"), meta.get("max_length")
        if CONTROL_CHARACTERS.search(data):
            self.problem(path, "must not contain control characters (newline, tab, ...), got %s" % describe(data))
            return
        if enum and data not in enum:
            self.problem(path, "must be one of %s, got %s" % (", ".join(repr(e) for e in enum), describe(data)))
        if pattern and not re.match(pattern, data):
            wanted = "be " + meta["pattern_doc"] if meta.get("pattern_doc") else "match " + pattern
            self.problem(path, "must %s, got %s" % (wanted, describe(data)))
        if max_length is not None and len(data) > max_length:
            self.problem(path, "must be at most %d characters, got %s" % (max_length, describe(data)))


def _identity(resource: Mapping[str, Any], problems: List[Tuple[str, str]]) -> Tuple[str, str]:
    meta = resource.get("metadata") or {}
    name = meta.get("name")
    namespace = meta.get("namespace") or "default"
    if not isinstance(name, str) or not re.match(DNS1123_LABEL, name) or len(name) > 63:
        problems.append(("metadata.name", "must be a DNS-1123 label, got %s" % describe(name)))
        name = str(name)
    if not isinstance(namespace, str) or not re.match(DNS1123_LABEL, namespace):
        problems.append(("metadata.namespace", "must be a DNS-1123 label, got %s" % describe(namespace)))
    return name, namespace


def _parse_resource(resource: Mapping[str, Any], spec_cls: Any, rules: Any) -> Tuple[str, str, Any]:
    """(name, namespace, spec) of a valid resource; SpecError with every problem otherwise.

    Cross-field rules run only on a spec whose fields are each valid.
    """
    parser = _Parser()
    name, namespace = _identity(resource, parser.problems)
    spec = parser.parse(spec_cls, resource.get("spec"), "spec")
    if not parser.problems:
        parser.problems.extend(rules(name, spec))
    if parser.problems:
        raise SpecError(parser.problems)
    return name, namespace, spec


def parse_cluster(resource: Mapping[str, Any]) -> SlurmCluster:
    """Validate a SlurmCluster resource ({metadata, spec}) and return its model."""
    return SlurmCluster(*_parse_resource(resource, SlurmClusterSpec, rules.cluster_rules))


def parse_nodeset(resource: Mapping[str, Any]) -> NodeSet:
    """Validate a NodeSet resource ({metadata, spec}) and return its model."""
    return NodeSet(*_parse_resource(resource, NodeSetSpec, rules.nodeset_rules))
