# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""auth/jwt on slurmctld and slurmdbd (spec.rest): the config keys, and the volume of the JWT key
Secret's public half. slurmctld and slurmdbd check the REST API's tokens against it; slurmrestd
itself holds no key (render/rest.py)."""

from __future__ import annotations

from typing import Any, Dict, List

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster

JWKS_VOLUME = "jwt-keys"
JWKS_PATH = "%s/%s" % (C.JWT_KEYS_MOUNT_DIR, C.JWKS_SECRET_KEY)


def jwt_auth_settings(cluster: SlurmCluster) -> Dict[str, Any]:
    """slurm.conf's and slurmdbd.conf's auth/jwt keys with spec.rest; none without. No
    jwt_key: HS256 is off, so every token is one of ours (and `scontrol token` says why not)."""
    if not cluster.spec.rest.enabled:
        return {}
    return {"AuthAltTypes": "auth/jwt", "AuthAltParameters": ["disable_token_creation", "jwks=" + JWKS_PATH]}


def jwks_volume(cluster: SlurmCluster) -> Dict[str, Any]:
    """The key Secret's public half only; auth/jwt refuses a key file others may write."""
    return {"name": JWKS_VOLUME, "secret": {
        "secretName": names.jwt_keys_secret(cluster.name), "defaultMode": 0o444,
        "items": [{"key": C.JWKS_SECRET_KEY, "path": C.JWKS_SECRET_KEY}]}}


JWKS_MOUNT = {"name": JWKS_VOLUME, "mountPath": C.JWT_KEYS_MOUNT_DIR, "readOnly": True}


def with_jwks(cluster: SlurmCluster, mounts: List[Dict[str, Any]], volumes: List[Dict[str, Any]]) -> None:
    """Give a slurmctld or slurmdbd pod the key set when spec.rest is on."""
    if cluster.spec.rest.enabled:
        mounts.append(dict(JWKS_MOUNT))
        volumes.append(jwks_volume(cluster))
