# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Short, stable digests of text: what changed, never what it says."""

from __future__ import annotations

import hashlib
from typing import Iterable


def content_hash(parts: Iterable[str]) -> str:
    """A short, stable digest of config text: the pod-template annotation that rolls pods."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]
