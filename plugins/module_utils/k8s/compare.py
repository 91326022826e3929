# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is the live object already what we would apply? (A no-op reconcile must write nothing.)"""

from __future__ import annotations

from typing import Any, List

from ansible_collections.slurmkube.core.plugins.module_utils.model.quantity import QuantityError, parse_quantity


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
