"""Shared test setup: the collection is importable by its FQCN path, the node programs by their names."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The programs that run on the nodes (images/node) are plain scripts, not collection code.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "images" / "node"))

from collection_path import ensure_importable

ensure_importable()
