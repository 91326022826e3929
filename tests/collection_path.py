"""Make `ansible_collections.slurmkube.core` importable from this checkout.

Ansible imports collection code by its FQCN path, so the checkout is linked into a
collections tree outside the repository (never inside: ansible-test and galaxy build
would walk into the link).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def collections_root() -> Path:
    """The directory that holds ansible_collections/slurmkube/core → this checkout."""
    cache = Path(os.environ.get("SLURMKUBE_CACHE", "/var/cache/slurmkube"))
    return cache / "collections" / ("checkout-" + hashlib.sha256(str(REPO).encode()).hexdigest()[:12])


def ensure_importable() -> Path:
    """Link the checkout into the collections tree and put that tree on sys.path."""
    try:
        import ansible_collections.slurmkube.core  # noqa: F401

        return Path(sys.modules["ansible_collections.slurmkube.core"].__path__[0])
    except ImportError:
        pass
    root = collections_root()
    link = root / "ansible_collections" / "slurmkube" / "core"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink() or link.resolve() != REPO:
        # Made beside and renamed over: tests/run's two pytest processes start at once, and a
        # second symlink_to found the first's link and failed the whole process.
        made = link.with_name("%s.%d" % (link.name, os.getpid()))
        made.unlink(missing_ok=True)
        made.symlink_to(REPO)
        os.replace(made, link)
    sys.path.insert(0, str(root))
    return link
