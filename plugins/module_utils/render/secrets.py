# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's generated secrets: the munge key and the login nodes' ssh host keys."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import tempfile
from typing import Any, Dict, Mapping

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.spec import SlurmCluster, munge_secret_name
from ansible_collections.slurmkube.core.plugins.module_utils.render import common
from ansible_collections.slurmkube.core.plugins.module_utils.render.login import HOST_KEY_TYPES, host_keys_secret_name

# munged's own minimum; its default key is 1024 bytes (mungekey(8)).
MUNGE_KEY_MIN_BYTES = 32
MUNGE_KEY_BYTES = 1024


class SecretError(Exception):
    """A secret cannot be made or is unusable."""


def new_munge_key() -> bytes:
    """A fresh random munge key."""
    return os.urandom(MUNGE_KEY_BYTES)


def key_fingerprint(key: bytes) -> str:
    """What may be shown of a key: a SHA-256 digest, never the key."""
    return "sha256:" + hashlib.sha256(key).hexdigest()


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


def new_ssh_host_keys() -> Dict[str, bytes]:
    """Host key files by name (private and .pub), made by ssh-keygen."""
    keys: Dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in HOST_KEY_TYPES:
            path = os.path.join(tmp, "ssh_host_%s_key" % kind)
            try:
                subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "", "-f", path],
                               check=True, capture_output=True)
            except OSError as exc:
                raise SecretError("ssh-keygen could not make a %s host key: %s" % (kind, exc)) from exc
            except subprocess.CalledProcessError as exc:
                raise SecretError("ssh-keygen could not make a %s host key: %s" % (
                    kind, exc.stderr.decode("utf-8", "replace").strip() or exc)) from exc
            for name in (path, path + ".pub"):
                with open(name, "rb") as handle:
                    keys[os.path.basename(name)] = handle.read()
    return keys


def render_host_keys_secret(cluster: SlurmCluster, keys: Mapping[str, bytes]) -> common.Manifest:
    """The Secret the login pods read their host keys from, so they survive restarts."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": common.metadata(cluster, host_keys_secret_name(cluster), C.COMPONENT_LOGIN),
        "data": {name: base64.b64encode(value).decode("ascii") for name, value in sorted(keys.items())},
    }


def secret_value(secret: Mapping[str, Any], key: str) -> bytes:
    """One decoded value of a Secret as the API returns it."""
    data = secret.get("data") or {}
    if key not in data:
        raise SecretError("Secret %s has no key %r" % (secret["metadata"]["name"], key))
    return base64.b64decode(data[key])
