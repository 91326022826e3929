# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is the live object already what we would apply? (A no-op reconcile must write nothing.)"""

from __future__ import annotations

from typing import Any

from ansible_collections.slurmkube.core.plugins.module_utils.quantity import QuantityError, parse_quantity


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


def is_subset(desired: Any, actual: Any) -> bool:
    """True when every field we set has that value in the live object.

    Fields the server adds (defaults, status, metadata it owns) are ignored; lists must have
    the same length and match item by item, as server-side apply would replace them.
    """
    if isinstance(desired, dict):
        if not isinstance(actual, dict):
            return False
        return all(is_subset(v, actual.get(k)) for k, v in desired.items())
    if isinstance(desired, list):
        if not isinstance(actual, list) or len(desired) != len(actual):
            return False
        return all(is_subset(d, a) for d, a in zip(desired, actual))
    return _same_scalar(desired, actual)
