# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Apply only what differs, as the API server sees it.

Each object is first applied as a server-side dry run, and what the server would store is
compared with what it stores now (its bookkeeping and the status left out). Equal: nothing is
written, so a no-op reconcile makes no writes. Different: the object is applied (as a dry run
again in check mode) and the diff holds just the fields that change. The server decides how
lists merge, what defaults and normalised quantities look like and which fields it drops
(an env value ""), so an out-of-band edit of a field we set is seen and reverted, and
nothing is re-applied forever. This is kubernetes.core's apply-and-compare.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube, Obj

# Metadata the server keeps for itself: it changes on every write, never by ours alone.
SERVER_BOOKKEEPING = ("managedFields", "resourceVersion", "generation")
# StatefulSet fields the API server refuses to change: such an object is made again. It is
# deleted with its pods orphaned (they keep running; the new StatefulSet adopts them by their
# labels and rolls them as its template says), and created once it is gone.
STATEFULSET_IMMUTABLE = ("serviceName", "podManagementPolicy", "selector")
_MISSING = object()


class Applied(NamedTuple):
    """One object applied (or, in check mode, that would be): as it was, and as it is after."""

    obj: Mapping[str, Any]
    before: Optional[Dict[str, Any]]  # None: it did not exist
    after: Dict[str, Any]


def owned_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> Dict[str, Any]:
    """The object with the SlurmCluster as its owner: deleting the cluster deletes it."""
    out = copy.deepcopy(dict(obj))
    out["metadata"]["ownerReferences"] = [{
        "apiVersion": C.GROUP_VERSION, "kind": C.KIND_CLUSTER, "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
    }]
    return out


def shown(obj: Mapping[str, Any]) -> Dict[str, Any]:
    """An object as the user sees it, sharing the object's values: no status, no server bookkeeping
    in its metadata."""
    out = {key: value for key, value in obj.items() if key != "status"}
    out["metadata"] = {key: value for key, value in (obj.get("metadata") or {}).items()
                       if key not in SERVER_BOOKKEEPING}
    return out


def comparable(obj: Mapping[str, Any]) -> Dict[str, Any]:
    """An object as the user sees it (shown), a copy of its own."""
    return copy.deepcopy(shown(obj))


class SeenEqual:
    """What a dry run found already applied: the live object as the user sees it (comparable: its
    status and the server's bookkeeping left out: shown) and what we would apply. While neither changes,
    the server's answer cannot either, so a long-lived caller (the operator, every few seconds)
    skips the dry run; any edit of the object but its status, an out-of-band one included, is
    seen. Not its resourceVersion, which every status write moves: a StatefulSet or a disruption
    budget whose pods come and go would be dry-run every pass."""

    def __init__(self) -> None:
        self._seen: Dict[Tuple[str, str, str], Tuple[str, str]] = {}

    @staticmethod
    def _key(obj: Mapping[str, Any]) -> Tuple[str, str, str]:
        meta = obj["metadata"]
        return obj["kind"], meta.get("namespace") or "", meta["name"]

    @staticmethod
    def _state(obj: Mapping[str, Any], live: Mapping[str, Any]) -> Tuple[str, str]:
        # Digests, not the objects: the memo stays small however many objects pass through it.
        return (content_hash([json.dumps(shown(live), sort_keys=True)]),
                content_hash([json.dumps(obj, sort_keys=True)]))

    def still(self, obj: Mapping[str, Any], live: Mapping[str, Any]) -> bool:
        """Nothing changed since a dry run found this object applied."""
        return self._seen.get(self._key(obj)) == self._state(obj, live)

    def remember(self, obj: Mapping[str, Any], live: Mapping[str, Any]) -> None:
        """A dry run found this object applied."""
        self._seen[self._key(obj)] = self._state(obj, live)


LiveKey = Tuple[str, str, str]


def live_key(obj: Mapping[str, Any]) -> LiveKey:
    """An object's kind, namespace and name: how listed_live finds the live one."""
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace") or "", meta["name"]


def listed_live(kube: Kube, objects: Sequence[Mapping[str, Any]], labels: Mapping[str, str]) -> Dict[LiveKey, Obj]:
    """The live objects of these objects' kinds and namespaces that carry these labels: one list
    call per kind and namespace instead of a get per object (a cluster of a hundred node sets
    renders three hundred objects of three kinds)."""
    live: Dict[LiveKey, Obj] = {}
    for api_version, kind, namespace in sorted({(o["apiVersion"], o["kind"], o["metadata"].get("namespace") or "")
                                                for o in objects}):
        for item in kube.list(api_version, kind, namespace or None, labels):
            live[(kind, namespace, item["metadata"]["name"])] = item
    return live


def apply_changed(kube: Kube, objects: Sequence[Mapping[str, Any]], dry_run: bool = False,
                  seen: Optional[SeenEqual] = None, listed: Optional[Mapping[LiveKey, Obj]] = None) -> List[Applied]:
    """Server-side apply each object the server would store differently from now; only those
    are returned (and, with dry_run, only dry runs are made). `listed`: the live objects as
    listed_live found them; one it lacks (new, or without the labels) is read on its own."""
    applied = []
    for obj in objects:
        meta = obj["metadata"]
        live = (listed or {}).get(live_key(obj)) or kube.get(obj["apiVersion"], obj["kind"], meta["name"],
                                                             meta.get("namespace"))
        if live is None:
            applied.append(Applied(obj, None, comparable(kube.apply(obj, dry_run=dry_run))))
            continue
        if live.get("metadata", {}).get("deletionTimestamp"):
            continue  # going away (being replaced, or deleted by someone): made again once gone
        if needs_replacing(obj, live):
            if not dry_run:
                kube.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"), propagation="Orphan")
            applied.append(Applied(obj, comparable(live), comparable(obj)))
            continue
        if seen is not None and seen.still(obj, live):
            continue
        predicted = comparable(kube.apply(obj, dry_run=True))
        if predicted == comparable(live):
            if seen is not None:
                seen.remember(obj, live)
            continue
        after = predicted if dry_run else comparable(kube.apply(obj))
        applied.append(Applied(obj, comparable(live), after))
    return applied


def needs_replacing(obj: Mapping[str, Any], live: Mapping[str, Any]) -> bool:
    """Whether obj changes a field the server keeps as it was made (STATEFULSET_IMMUTABLE), or
    which claims its pods get made (the names of its volumeClaimTemplates: the server fills in
    their other fields)."""
    if obj.get("kind") != "StatefulSet":
        return False
    want, have = obj.get("spec") or {}, live.get("spec") or {}
    return any(key in want and want[key] != have.get(key) for key in STATEFULSET_IMMUTABLE) \
        or claim_template_names(want) != claim_template_names(have)


def claim_template_names(spec: Mapping[str, Any]) -> List[str]:
    """The names of a StatefulSet spec's claim templates."""
    return [claim["metadata"]["name"] for claim in spec.get("volumeClaimTemplates") or []]


def changed_fields(before: Mapping[str, Any], after: Mapping[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The parts of two objects that differ: maps are followed down, anything else is shown whole."""
    old_part: Dict[str, Any] = {}
    new_part: Dict[str, Any] = {}
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key, _MISSING), after.get(key, _MISSING)
        if old == new:
            continue
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            old_part[key], new_part[key] = changed_fields(old, new)
            continue
        if old is not _MISSING:
            old_part[key] = old
        if new is not _MISSING:
            new_part[key] = new
    return old_part, new_part


def describe(obj: Mapping[str, Any]) -> str:
    """'Kind namespace/name', or 'Kind name' for a cluster-wide object."""
    meta = obj["metadata"]
    return "%s %s" % (obj["kind"], "/".join(p for p in (meta.get("namespace"), meta["name"]) if p))


def diff_of(applied: Applied) -> Dict[str, Any]:
    """Ansible's diff for one applied object: what we asked for when it is new, else only the
    fields that change."""
    header = describe(applied.obj)
    if applied.before is None:
        before: Dict[str, Any] = {}
        after = comparable(applied.obj)
    else:
        before, after = changed_fields(applied.before, applied.after)
    return {"before_header": header, "after_header": header, "before": before, "after": after}
