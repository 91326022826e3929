"""Shared test setup: the collection is importable by its FQCN path."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from collection_path import ensure_importable

ensure_importable()
