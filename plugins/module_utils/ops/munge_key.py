# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the munge_key module does: one Secret holding a cluster's munge key, never shown."""

from __future__ import annotations

import base64
from typing import Any, Dict, Mapping, NamedTuple, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import REAL_TIME, Poll, Timer, wait_until
from ansible_collections.slurmkube.core.plugins.module_utils.keys import (
    MUNGE_KEY_MIN_BYTES,
    key_fingerprint,
    new_munge_key,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.secrets import secret_value

# mungekey(8) makes keys of 32 to 1024 bytes.
MUNGE_KEY_MAX_BYTES = 1024


class MungeKeyError(SlurmkubeError):
    """The key cannot be used or the Secret cannot be changed as asked."""


class MungeKeyResult(NamedTuple):
    """Outcome of ensuring the key: never the key itself."""

    changed: bool
    fingerprint: str
    secret: str
    replaced: bool = False


def check_key(key: bytes) -> bytes:
    """The key, if munged would accept its length."""
    if not MUNGE_KEY_MIN_BYTES <= len(key) <= MUNGE_KEY_MAX_BYTES:
        raise MungeKeyError("a munge key must have %d to %d bytes, got %d"
                            % (MUNGE_KEY_MIN_BYTES, MUNGE_KEY_MAX_BYTES, len(key)))
    return key


def secret_object(name: str, namespace: str, key: bytes, cluster: Optional[str]) -> Dict[str, Any]:
    """The Secret; labelled with its cluster so the operator's pods find it."""
    labels = {C.LABEL_PART_OF: C.MANAGED_BY, C.LABEL_MANAGED_BY: C.MANAGED_BY}
    if cluster:
        labels[C.LABEL_CLUSTER] = cluster
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "data": {C.MUNGE_KEY_SECRET_KEY: base64.b64encode(key).decode("ascii")}}


def ensure_key(kube: Kube, name: str, namespace: str, given: Optional[bytes], rotate: bool,
               cluster: Optional[str], check_mode: bool) -> MungeKeyResult:
    """Create the key when absent; replace it only when rotate is set."""
    live = kube.get("v1", "Secret", name, namespace)
    current = secret_value(live, C.MUNGE_KEY_SECRET_KEY) if live else None
    if current is not None and (given is None or given == current) and not rotate:
        return MungeKeyResult(False, key_fingerprint(current), name)
    if current is not None and not rotate:
        raise MungeKeyError("Secret %s/%s holds a different munge key (%s); set rotate=true to replace it"
                            % (namespace, name, key_fingerprint(current)))
    key = check_key(given) if given is not None else new_munge_key()
    if current is not None and key == current:
        return MungeKeyResult(False, key_fingerprint(current), name)
    kube.apply(secret_object(name, namespace, key, cluster), dry_run=check_mode)
    return MungeKeyResult(True, key_fingerprint(key), name, replaced=current is not None)


def wait_rolled_out(kube: Kube, cluster: str, namespace: str, fingerprint: str, timeout: int,
                    timer: Timer = REAL_TIME) -> bool:
    """Wait until the operator reports every daemon of CLUSTER running the key FINGERPRINT.

    False when there is no such SlurmCluster (no daemon runs any key yet).
    """
    def probe() -> Poll:
        obj = kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, cluster, namespace)
        status = (obj or {}).get("status") or {}
        return Poll(obj is None or status.get("mungeKey") == fingerprint, obj)

    last = wait_until(probe, timeout, timer)
    if last.seen is None:
        return False
    if not last.done:
        conditions = (last.seen.get("status") or {}).get("conditions") or []
        rollout = next((c for c in conditions if c.get("type") == "MungeKeyInUse"), {})
        raise MungeKeyError("SlurmCluster %s/%s does not run munge key %s after %ds: %s"
                            % (namespace, cluster, fingerprint, timeout,
                               rollout.get("message", "the operator has not reported on it")))
    return True


def remove_key(kube: Kube, name: str, namespace: str, check_mode: bool) -> MungeKeyResult:
    """Delete the Secret (the cluster's daemons can no longer start without it)."""
    live = kube.get("v1", "Secret", name, namespace)
    if live is None:
        return MungeKeyResult(False, "", name)
    if not check_mode:
        kube.delete("v1", "Secret", name, namespace)
    return MungeKeyResult(True, key_fingerprint(secret_value(live, C.MUNGE_KEY_SECRET_KEY)), name)


def key_from_params(content: Optional[str], src: Optional[str]) -> Optional[bytes]:
    """The key the user gave: file bytes, or base64 content; None to generate one."""
    if src:
        try:
            with open(src, "rb") as handle:
                return handle.read()
        except OSError as exc:
            raise MungeKeyError("src: cannot read the key from %s: %s" % (src, exc.strerror or exc)) from exc
    if content:
        try:
            return base64.b64decode(content, validate=True)
        except ValueError as exc:
            raise MungeKeyError("content must be the key in base64: %s" % exc) from exc
    return None


def secret_name_for(params: Mapping[str, Any]) -> str:
    """The Secret name: given, or the one a SlurmCluster uses by default."""
    if params.get("secret_name"):
        return params["secret_name"]
    if not params.get("cluster"):
        raise MungeKeyError("one of cluster or secret_name is required")
    return names.munge_key_secret(params["cluster"])
