# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes resource quantities ("500m", "4", "16Gi"), parsed exactly with Fraction."""

from __future__ import annotations

import re
from fractions import Fraction

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError

_SUFFIXES = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}

# The regular expression Kubernetes documents for quantities, without exponent forms.
QUANTITY_PATTERN = r"^([+]?[0-9]+(\.[0-9]*)?|\.[0-9]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"
_QUANTITY_RE = re.compile(QUANTITY_PATTERN)


class QuantityError(SlurmkubeError):
    """The text is not a Kubernetes quantity."""


def parse_quantity(value: object) -> Fraction:
    """Return the exact value of a quantity given as text or a number."""
    if isinstance(value, bool):
        raise QuantityError("not a quantity: %r" % (value,))
    if isinstance(value, int):
        if value < 0:
            raise QuantityError("not a quantity: %r" % (value,))
        return Fraction(value)
    if not isinstance(value, str):
        raise QuantityError("not a quantity: %r" % (value,))
    match = _QUANTITY_RE.match(value.strip())
    if not match:
        raise QuantityError("not a quantity: %r" % (value,))
    return Fraction(match.group(1)) * _SUFFIXES[match.group(3) or ""]


def quantity_to_mebibytes(value: object) -> int:
    """Whole MiB (rounded down): the unit of Slurm's RealMemory."""
    return int(parse_quantity(value) / (2**20))
