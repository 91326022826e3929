# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Argument specs shared by the modules (twins of plugins/doc_fragments/kube_auth.py)."""

from __future__ import annotations

from typing import Any, Dict

KUBE_AUTH_ARGS: Dict[str, Dict[str, Any]] = {
    "kubeconfig": {"type": "path"},
    "context": {"type": "str"},
}

WAIT_ARGS: Dict[str, Dict[str, Any]] = {
    "wait": {"type": "bool", "default": True},
    "wait_timeout": {"type": "int", "default": 600},
}


def with_common(spec: Dict[str, Dict[str, Any]], wait: bool = False) -> Dict[str, Dict[str, Any]]:
    """A module's own options plus the shared ones."""
    out = dict(spec)
    out.update(KUBE_AUTH_ARGS)
    if wait:
        out.update(WAIT_ARGS)
    return out
