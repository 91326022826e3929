"""slurm_token: a token signed with the cluster's signing key for a user, within the cluster's
longest lifetime; refused, naming the option, for a cluster without the REST API."""

from __future__ import annotations

import base64
import json

import pytest
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import new_key_set
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import ClusterError
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_token import issue_token
from ansible_collections.slurmkube.core.plugins.module_utils.render.secrets import render_jwt_keys_secret

NOW = 1_800_000_000


def world(rest=None, secret=True):
    kube = MemoryKube()
    resource = {"apiVersion": C.GROUP_VERSION, "kind": C.KIND_CLUSTER,
                "metadata": {"name": "demo", "namespace": "hpc"}, "spec": {"rest": rest or {"enabled": True}}}
    kube.apply(resource)
    keys = new_key_set()
    if secret:
        kube.apply(render_jwt_keys_secret(parse_cluster(resource), keys))
    kube.writes = 0
    return kube, keys


def claims(token):
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def test_a_token_for_the_user_signed_by_the_signing_key_and_nothing_written():
    kube, keys = world()
    result = issue_token(kube, "demo", "hpc", "alice", 3600, NOW)
    assert claims(result["token"]) == {"sun": "alice", "iat": NOW, "exp": NOW + 3600}
    assert result["expires"] == NOW + 3600 and result["key_id"] == keys.signing
    assert kube.writes == 0


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"user": "Alice Smith"}, "user: must be a user name"),
    ({"user": "alice;rm"}, "user: must be a user name"),
    ({"lifetime": 0}, "lifetime: must be at least 1 second"),
    ({"lifetime": 86401}, r"lifetime: at most spec.rest.tokenMaxLifetimeSeconds \(86400\)"),
    ({"cluster": "other"}, "cluster: no SlurmCluster other in namespace hpc"),
])
def test_bad_options_are_refused_naming_the_option(kwargs, message):
    kube, _keys = world()
    args = dict({"cluster": "demo", "user": "alice", "lifetime": 60}, **kwargs)
    with pytest.raises(SlurmkubeError, match=message):
        issue_token(kube, args["cluster"], "hpc", args["user"], args["lifetime"], NOW)


def test_a_cluster_without_the_rest_api_or_its_keys_gets_no_token():
    kube, _keys = world(rest={"enabled": False}, secret=False)
    with pytest.raises(SlurmkubeError, match=r"spec.rest.enabled is false"):
        issue_token(kube, "demo", "hpc", "alice", 60, NOW)
    kube, _keys = world(secret=False)
    with pytest.raises(ClusterError, match=r"Secret hpc/demo-jwt-keys does not exist yet"):
        issue_token(kube, "demo", "hpc", "alice", 60, NOW)
