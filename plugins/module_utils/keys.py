# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's keys: a munge key and ssh host keys made fresh, and what may be shown of them."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from typing import Dict, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError

# munged's own minimum; its default key is 1024 bytes (mungekey(8)).
MUNGE_KEY_MIN_BYTES = 32
MUNGE_KEY_BYTES = 1024


class SecretError(SlurmkubeError):
    """A secret cannot be made or is unusable."""


def new_munge_key() -> bytes:
    """A fresh random munge key."""
    return os.urandom(MUNGE_KEY_BYTES)


def new_db_password() -> str:
    """A fresh database password: 192 random bits as hex, which every config format and SQL
    string carries as it is."""
    return os.urandom(24).hex()


def key_fingerprint(key: bytes) -> str:
    """What may be shown of a key: a SHA-256 digest, never the key."""
    return "sha256:" + hashlib.sha256(key).hexdigest()


def new_ssh_host_keys(key_types: Sequence[str]) -> Dict[str, bytes]:
    """Host key files by name (private and .pub), made by ssh-keygen."""
    keys: Dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in key_types:
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
