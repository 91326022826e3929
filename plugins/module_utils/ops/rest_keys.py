# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the rest_keys module does: show the REST API's key set, or rotate it (jwt.rotated) in its
Secret, revoking the old keys at once if asked, and wait until slurmctld checks tokens with the
new set (the operator reconfigures it; status.restKeys.inEffect). No key is ever returned."""

from __future__ import annotations

import base64
from typing import Any, Dict, NamedTuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import (
    KeySet,
    jwks_text,
    key_set_digest,
    key_set_summary,
    rotated,
    signing_text,
    without_retiring,
)
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import REAL_TIME, Poll, Timer, wait_until
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import cluster_key_set, cluster_rest


class RestKeysError(SlurmkubeError):
    """The key set cannot be read or rotated now; the message names the option or object at fault."""


class Keys(NamedTuple):
    """The key set as its Secret holds it, and the digest of its public half."""

    keys: KeySet
    digest: str


def read_keys(kube: Kube, cluster: str, namespace: str) -> Keys:
    """The Secret's key set; its public half is jwks_text's, as the operator digests it too."""
    keys = cluster_key_set(kube, cluster, namespace)
    return Keys(keys, key_set_digest(jwks_text(keys)))


def in_effect(kube: Kube, cluster: str, namespace: str) -> str:
    """The digest of the key set slurmctld checks tokens with, as the operator reports it."""
    obj = kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, cluster, namespace) or {}
    return ((obj.get("status") or {}).get("restKeys") or {}).get("inEffect", "")


def check_rotation(current: Keys, effective: str) -> None:
    """A rotation needs the last one carried out: the set in effect on slurmctld, and no key
    retiring (slurmdbd loads the new next key when the retiring one leaves; until then a second
    rotation would sign with a key slurmdbd does not hold)."""
    if effective != current.digest:
        raise RestKeysError("rotate: the key set in the Secret is not in effect on slurmctld yet (the operator "
                            "reconfigures it within a pass); try again once status.restKeys.inEffect is %s"
                            % current.digest)
    if current.keys.retire:
        kid, when = sorted(key_set_summary(current.keys)["retiring"].items())[0]
        raise RestKeysError("rotate: key %s retires at %s, when the tokens it signed have expired; rotate again "
                            "after that" % (kid, when))


def rotate(kube: Kube, cluster: str, namespace: str, now: int, check_mode: bool,
           revoke: bool = False) -> Dict[str, Any]:
    """Rotate the key set in its Secret, with REVOKE dropping the old keys at once instead of
    after their tokens' lifetime (a key that leaked: not held back by the last rotation's being
    unfinished either); the result without waiting."""
    rest = cluster_rest(kube, cluster, namespace)
    current = read_keys(kube, cluster, namespace)
    if not revoke:
        check_rotation(current, in_effect(kube, cluster, namespace))
    after = rotated(current.keys, now, rest.token_max_lifetime_seconds)
    gone = sorted(after.retire) if revoke else []
    after = without_retiring(after) if revoke else after
    if not check_mode:
        texts = {C.JWKS_SECRET_KEY: jwks_text(after), C.JWT_SIGNING_SECRET_KEY: signing_text(after)}
        kube.merge_patch("v1", "Secret", names.jwt_keys_secret(cluster), namespace, {"data": {
            key: base64.b64encode(text.encode("ascii")).decode("ascii") for key, text in texts.items()}})
    return dict(key_set_summary(after), changed=True, in_effect=False, revoked=gone)


def show(kube: Kube, cluster: str, namespace: str) -> Dict[str, Any]:
    """The key set as it is, and whether slurmctld checks tokens with it."""
    cluster_rest(kube, cluster, namespace)
    current = read_keys(kube, cluster, namespace)
    return dict(key_set_summary(current.keys), changed=False,
                in_effect=in_effect(kube, cluster, namespace) == current.digest)


def wait_in_effect(kube: Kube, cluster: str, namespace: str, timeout: int, timer: Timer = REAL_TIME) -> bool:
    """Wait until slurmctld checks tokens with the Secret's key set."""
    def probe() -> Poll:
        digest = read_keys(kube, cluster, namespace).digest
        return Poll(in_effect(kube, cluster, namespace) == digest, digest)

    last = wait_until(probe, timeout, timer)
    if not last.done:
        raise RestKeysError("SlurmCluster %s/%s does not check tokens with key set %s after %ds (status.restKeys)"
                            % (namespace, cluster, last.seen, timeout))
    return True
