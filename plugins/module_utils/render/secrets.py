# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Secrets that hold the cluster's keys (keys.py and jwt.py make them): the munge key, the
login nodes' ssh host keys, the accounting database's password, the REST API's JWT keys."""

from __future__ import annotations

import base64
from typing import Any, Mapping

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import KeySet, jwks_text, signing_text
from ansible_collections.slurmkube.core.plugins.module_utils.keys import MUNGE_KEY_MIN_BYTES, SecretError
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    accounting_db_secret_name,
    munge_secret_name,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.render import common


def render_munge_secret(cluster: SlurmCluster, key: bytes) -> common.Manifest:
    """The munge key Secret (mounted by every Slurm pod, copied into place by the entrypoint)."""
    if len(key) < MUNGE_KEY_MIN_BYTES:
        raise SecretError("a munge key needs at least %d bytes, got %d" % (MUNGE_KEY_MIN_BYTES, len(key)))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": common.metadata(cluster, munge_secret_name(cluster), C.COMPONENT_CONFIG),
        "data": {C.MUNGE_KEY_SECRET_KEY: base64.b64encode(key).decode("ascii")},
    }


def render_host_keys_secret(cluster: SlurmCluster, keys: Mapping[str, bytes]) -> common.Manifest:
    """The Secret the login pods read their host keys from, so they survive restarts."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": common.metadata(cluster, names.ssh_host_keys_secret(cluster.name), C.COMPONENT_LOGIN),
        "data": {name: base64.b64encode(value).decode("ascii") for name, value in sorted(keys.items())},
    }


def render_db_password_secret(cluster: SlurmCluster, password: str) -> common.Manifest:
    """The accounting database user's password, read by slurmdbd and the in-cluster MariaDB."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": common.metadata(cluster, accounting_db_secret_name(cluster), C.COMPONENT_DATABASE),
        "data": {C.DB_PASSWORD_SECRET_KEY: base64.b64encode(password.encode("ascii")).decode("ascii")},
    }


def render_jwt_keys_secret(cluster: SlurmCluster, keys: KeySet) -> common.Manifest:
    """The REST API's keys: the public key set (mounted into slurmctld and slurmdbd) and the
    private keys tokens are signed with (read through the API by slurm_token, never mounted)."""
    texts = {C.JWKS_SECRET_KEY: jwks_text(keys), C.JWT_SIGNING_SECRET_KEY: signing_text(keys)}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": common.metadata(cluster, names.jwt_keys_secret(cluster.name), C.COMPONENT_REST),
        "data": {key: base64.b64encode(text.encode("ascii")).decode("ascii") for key, text in texts.items()},
    }


def secret_value(secret: Mapping[str, Any], key: str) -> bytes:
    """One decoded value of a Secret as the API returns it."""
    data = secret.get("data") or {}
    if key not in data:
        raise SecretError("Secret %s has no key %r" % (secret["metadata"]["name"], key))
    return base64.b64decode(data[key])
