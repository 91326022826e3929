"""rest_keys: a rotation signs with the published next key, keeps the old one while its tokens
live, and waits for slurmctld to check tokens with the new set; refused while the last rotation
is not carried out. No key is ever returned."""

from __future__ import annotations

import base64

import pytest
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import key_set_digest, key_set_from_text, new_key_set
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import Timer
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.ops.rest_keys import (
    RestKeysError,
    rotate,
    show,
    wait_in_effect,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.secrets import render_jwt_keys_secret

NOW = 1_800_000_000


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def secret_text(kube, key):
    return base64.b64decode(kube.objects[("Secret", "hpc", "demo-jwt-keys")]["data"][key]).decode()


def world(in_effect=True, keys=None):
    kube = MemoryKube()
    resource = {"apiVersion": C.GROUP_VERSION, "kind": C.KIND_CLUSTER,
                "metadata": {"name": "demo", "namespace": "hpc"}, "spec": {"rest": {"enabled": True}}}
    kube.apply(resource)
    keys = keys or new_key_set()
    kube.apply(render_jwt_keys_secret(parse_cluster(resource), keys))
    if in_effect:
        set_in_effect(kube)
    kube.writes = 0
    return kube, keys


def set_in_effect(kube):
    digest = key_set_digest(secret_text(kube, C.JWKS_SECRET_KEY))
    kube.objects[("SlurmCluster", "hpc", "demo")]["status"] = {"restKeys": {"inEffect": digest}}


def test_show_names_the_keys_by_id_only_and_whether_slurmctld_checks_with_them():
    kube, keys = world()
    result = show(kube, "demo", "hpc")
    assert result == {"signing": keys.signing, "next": keys.next, "retiring": {}, "in_effect": True,
                      "changed": False}
    assert kube.writes == 0


def test_a_rotation_signs_with_the_next_key_and_retires_the_old_one_after_the_longest_token_life():
    kube, keys = world()
    result = rotate(kube, "demo", "hpc", NOW, check_mode=False)
    after = key_set_from_text(secret_text(kube, C.JWT_SIGNING_SECRET_KEY))
    assert after.signing == keys.next == result["signing"] and result["changed"]
    assert after.retire == {keys.signing: NOW + 86400} and set(result["retiring"]) == {keys.signing}
    published = secret_text(kube, C.JWKS_SECRET_KEY)
    assert all(kid in published for kid in (keys.signing, keys.next, after.next))
    assert "PRIVATE" not in str(result)


def test_check_mode_says_what_would_change_and_writes_nothing():
    kube, keys = world()
    result = rotate(kube, "demo", "hpc", NOW, check_mode=True)
    assert result["changed"] and result["signing"] == keys.next
    assert kube.writes == 0


def test_a_rotation_waits_for_the_last_one_to_be_carried_out():
    kube, _keys = world(in_effect=False)
    with pytest.raises(RestKeysError, match="rotate: the key set in the Secret is not in effect on slurmctld yet"):
        rotate(kube, "demo", "hpc", NOW, check_mode=False)
    assert kube.writes == 0
    kube, _keys = world()
    rotate(kube, "demo", "hpc", NOW, check_mode=False)
    set_in_effect(kube)
    with pytest.raises(RestKeysError, match=r"rotate: key .* retires at 2027-01-16T\d\d:\d\d:\d\dZ"):
        rotate(kube, "demo", "hpc", NOW + 60, check_mode=False)


def test_the_wait_ends_when_the_operator_reports_the_new_set_in_effect_and_times_out_otherwise():
    kube, _keys = world()
    clock = Clock()
    rotate(kube, "demo", "hpc", NOW, check_mode=False)
    with pytest.raises(RestKeysError, match=r"does not check tokens with key set sha256:[0-9a-f]+ after 30s"):
        wait_in_effect(kube, "demo", "hpc", 30, Timer(clock.sleep, clock))
    set_in_effect(kube)
    assert wait_in_effect(kube, "demo", "hpc", 30, Timer(clock.sleep, clock))


def test_a_revocation_drops_the_old_keys_at_once_even_while_the_last_rotation_is_unfinished():
    kube, keys = world()
    first = key_set_from_text(secret_text(kube, C.JWT_SIGNING_SECRET_KEY))
    rotate(kube, "demo", "hpc", NOW, check_mode=False)  # not in effect yet, and keys.signing retiring
    result = rotate(kube, "demo", "hpc", NOW + 60, check_mode=False, revoke=True)
    after = key_set_from_text(secret_text(kube, C.JWT_SIGNING_SECRET_KEY))
    assert result["revoked"] == sorted({keys.signing, keys.next}) and result["retiring"] == {}
    assert after.retire == {} and set(after.private) == {after.signing, after.next}
    published = secret_text(kube, C.JWKS_SECRET_KEY)
    assert keys.signing not in published and keys.next not in published and first.signing == keys.signing
    assert "PRIVATE" not in str(result)


def test_a_revocation_in_check_mode_names_the_keys_and_writes_nothing():
    kube, keys = world()
    result = rotate(kube, "demo", "hpc", NOW, check_mode=True, revoke=True)
    assert result["changed"] and result["revoked"] == [keys.signing] and kube.writes == 0
