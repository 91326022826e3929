# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the slurm_token module does: sign a REST API token for a user with the cluster's
signing key, read from its JWT key Secret. Nothing is written."""

from __future__ import annotations

import re
from typing import Any, Dict

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import sign_token
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import cluster_key_set, cluster_rest

# A user name as the name services give it (Slurm looks the token's user up by name): local
# accounts and directory ones (mixed case, '@' of a realm) alike; no space or control character.
USER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,255}$")


class TokenError(SlurmkubeError):
    """No token can be issued; the message names the option or object at fault."""


def check_request(user: str, lifetime: int) -> None:
    """The options that need no cluster to be judged."""
    if not USER_NAME.match(user):
        raise TokenError("user: must be a user name (letters, digits, '_', '.', '@', '-'; at most 256), "
                         "got %r" % user)
    if lifetime < 1:
        raise TokenError("lifetime: must be at least 1 second, got %d" % lifetime)


def issue_token(kube: Kube, cluster: str, namespace: str, user: str, lifetime: int, now: int) -> Dict[str, Any]:
    """The module's result: the token, when it expires, and the key that signed it."""
    check_request(user, lifetime)
    rest = cluster_rest(kube, cluster, namespace)
    if lifetime > rest.token_max_lifetime_seconds:
        raise TokenError("lifetime: at most spec.rest.tokenMaxLifetimeSeconds (%d) on SlurmCluster %s/%s, got %d"
                         % (rest.token_max_lifetime_seconds, namespace, cluster, lifetime))
    keys = cluster_key_set(kube, cluster, namespace)
    return {"token": sign_token(keys, user, now, lifetime), "expires": now + lifetime, "key_id": keys.signing}
