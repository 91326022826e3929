# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Apply only what differs: is the live object already what we would apply? (A no-op reconcile writes nothing.)"""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube
from ansible_collections.slurmkube.core.plugins.module_utils.quantity import QuantityError, parse_quantity

ANNOTATION_APPLIED = C.API_GROUP + "/applied-hash"


def _same_scalar(desired: Any, actual: Any) -> bool:
    if desired == actual:
        return True
    # The API server normalises quantities ("1000m" is stored as "1", 2048Mi as "2Gi").
    if isinstance(desired, (str, int)) and isinstance(actual, (str, int)) and not isinstance(desired, bool):
        try:
            return parse_quantity(desired) == parse_quantity(actual)
        except QuantityError:
            return False
    return False


def _is_keyed_list(items: List[Any]) -> bool:
    """Containers, env, volumes, ports...: lists whose items are maps with a name."""
    return bool(items) and all(isinstance(item, dict) and "name" in item for item in items)


def is_subset(desired: Any, actual: Any) -> bool:
    """True when every field we set has that value in the live object.

    Fields the server adds (defaults, status, metadata it owns) are ignored. Lists of named
    items are merged by server-side apply (another manager's items stay beside ours), so each
    of ours must be there by name; other lists are replaced whole and must match item by item.
    """
    if isinstance(desired, dict):
        if not isinstance(actual, dict):
            return False
        return all(is_subset(v, actual.get(k)) for k, v in desired.items())
    if isinstance(desired, list):
        if not isinstance(actual, list):
            return False
        if _is_keyed_list(desired) and all(isinstance(a, dict) for a in actual):
            live = {a.get("name"): a for a in actual}
            return all(is_subset(d, live.get(d["name"])) for d in desired)
        return len(desired) == len(actual) and all(is_subset(d, a) for d, a in zip(desired, actual))
    return _same_scalar(desired, actual)


def applied_hash(obj: Mapping[str, Any]) -> str:
    """Digest of what we apply: a changed digest means a field may have been removed."""
    return content_hash([json.dumps(obj, sort_keys=True)])


def stamp(obj: Mapping[str, Any], owner: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The object with its applied-hash annotation and, when given, the cluster as owner."""
    out = copy.deepcopy(dict(obj))
    meta = out["metadata"]
    if owner is not None:
        meta["ownerReferences"] = [{
            "apiVersion": C.GROUP_VERSION, "kind": C.KIND_CLUSTER, "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
        }]
    meta.setdefault("annotations", {})[ANNOTATION_APPLIED] = applied_hash(out)
    return out


def needs_apply(desired: Mapping[str, Any], live: Optional[Mapping[str, Any]]) -> bool:
    """Apply when the object is missing, our last apply differs, or someone changed our fields."""
    if live is None:
        return True
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    if annotations.get(ANNOTATION_APPLIED) != desired["metadata"]["annotations"][ANNOTATION_APPLIED]:
        return True
    return not is_subset(desired, live)


def apply_changed(kube: Kube, stamped: Sequence[Mapping[str, Any]], dry_run: bool = False
                  ) -> List[Tuple[Mapping[str, Any], Optional[Dict[str, Any]]]]:
    """Server-side apply each stamped object that differs from its live self.

    Returns (object, live object before) for each one applied (a dry run in check mode).
    """
    applied = []
    for obj in stamped:
        meta = obj["metadata"]
        live = kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        if needs_apply(obj, live):
            kube.apply(obj, dry_run=dry_run)
            applied.append((obj, live))
    return applied
