# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the module back ends share: argument specs (twins of plugins/doc_fragments/kube_auth.py), the client,
and the shape of a change."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import (
    HAS_KUBERNETES,
    KUBERNETES_IMPORT_ERROR,
    Kube,
    api_client,
)

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


def kube_for(module: Any) -> Kube:
    """The client for a module's kubeconfig/context; fails the module when the library is missing."""
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=str(KUBERNETES_IMPORT_ERROR))
    return Kube(api_client(module.params["kubeconfig"], module.params["context"]))


class Change(NamedTuple):
    """What ensuring the objects changed (or, in check mode, would change)."""

    changed: bool
    diffs: List[Dict[str, Any]]
