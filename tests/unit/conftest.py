"""The unit tests mirror the source tree (tests/unit/plugins/module_utils/render/ tests
plugins/module_utils/render/, ...); their shared helpers (example_clusters.py, memory_kube.py, the
fixtures) stay here, importable from every folder."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
