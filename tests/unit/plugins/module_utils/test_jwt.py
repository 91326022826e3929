"""The REST API's keys and tokens: what auth/jwt reads (a JWKS of RS256 keys with kid, n, e) and
what it checks (an RS256 signature by the key named in the header, sun/iat/exp claims)."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from ansible_collections.slurmkube.core.plugins.module_utils.jwt import (
    KeySet,
    jwks_text,
    key_set_from_text,
    loaded_at_start,
    new_key_set,
    rotated,
    sign_token,
    signing_text,
    with_next_key,
    without_retired,
)
from ansible_collections.slurmkube.core.plugins.module_utils.keys import SecretError


@pytest.fixture(scope="module")
def keys() -> KeySet:
    return new_key_set()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def public_key(jwk: dict) -> rsa.RSAPublicKey:
    numbers = rsa.RSAPublicNumbers(int.from_bytes(unb64(jwk["e"]), "big"), int.from_bytes(unb64(jwk["n"]), "big"))
    return numbers.public_key()


def test_the_key_set_holds_the_public_half_of_each_key_as_auth_jwt_reads_it(keys):
    published = json.loads(jwks_text(keys))["keys"]
    assert sorted(jwk["kid"] for jwk in published) == sorted((keys.signing, keys.next))
    for jwk in published:
        assert jwk["kty"] == "RSA" and jwk["alg"] == "RS256" and public_key(jwk).key_size == 2048
        assert "d" not in jwk
    assert "PRIVATE" not in jwks_text(keys)


def test_a_token_names_its_user_and_lifetime_and_verifies_with_the_published_key(keys):
    token = sign_token(keys, "alice", now=1_800_000_000, lifetime=600)
    header, claims, signature = token.split(".")
    assert json.loads(unb64(header)) == {"alg": "RS256", "typ": "JWT", "kid": keys.signing}
    assert json.loads(unb64(claims)) == {"sun": "alice", "iat": 1_800_000_000, "exp": 1_800_000_600}
    jwk = published_key(keys, keys.signing)
    public_key(jwk).verify(unb64(signature), ("%s.%s" % (header, claims)).encode(), padding.PKCS1v15(),
                           hashes.SHA256())


def test_a_token_changed_after_signing_does_not_verify(keys):
    header, _claims, signature = sign_token(keys, "alice", now=1_800_000_000, lifetime=600).split(".")
    forged = json.dumps({"sun": "root", "iat": 1_800_000_000, "exp": 1_800_000_600}).encode()
    jwk = published_key(keys, keys.signing)
    with pytest.raises(InvalidSignature):
        public_key(jwk).verify(unb64(signature), ("%s.%s" % (header, base64.urlsafe_b64encode(forged).decode()))
                               .encode(), padding.PKCS1v15(), hashes.SHA256())


def test_the_private_half_reads_back_and_a_malformed_one_is_refused(keys):
    assert key_set_from_text(signing_text(keys)) == keys
    with pytest.raises(SecretError, match="malformed"):
        key_set_from_text("{not json")
    with pytest.raises(SecretError, match="names signing key 'gone'"):
        key_set_from_text(json.dumps({"signing": "gone", "keys": dict(keys.private)}))
    with pytest.raises(SecretError, match="names retiring key 'old'"):
        key_set_from_text(json.dumps({"signing": keys.signing, "retire": {"old": 5}, "keys": dict(keys.private)}))


def test_two_key_sets_never_share_a_key_id():
    one, other = new_key_set(), new_key_set()
    assert len({one.signing, one.next, other.signing, other.next}) == 4


def published_key(keys: KeySet, kid: str) -> dict:
    return next(jwk for jwk in json.loads(jwks_text(keys))["keys"] if jwk["kid"] == kid)


def test_a_rotation_signs_with_the_published_next_key_and_keeps_the_old_one_while_its_tokens_live(keys):
    after = rotated(keys, now=1000, hold_seconds=600)
    assert after.signing == keys.next and after.next not in keys.private
    assert after.retire == {keys.signing: 1600}
    assert set(after.private) == {keys.signing, keys.next, after.next}
    assert key_set_from_text(signing_text(after)) == after
    assert without_retired(after, now=1599) == after
    gone = without_retired(after, now=1600)
    assert set(gone.private) == {keys.next, after.next} and gone.retire == {}
    assert gone.signing == after.signing and gone.next == after.next


def test_slurmdbd_which_reads_keys_at_start_restarts_when_a_key_retires_not_when_one_is_rotated_in(keys):
    after = rotated(keys, now=1000, hold_seconds=600)
    assert loaded_at_start(after) == loaded_at_start(keys)  # the new signing key was loaded as the next
    assert loaded_at_start(without_retired(after, now=1600)) == sorted((after.signing, after.next))


def test_a_set_without_a_next_key_gets_one_and_cannot_rotate_until_then():
    fresh = new_key_set()
    only = KeySet("a", {"a": fresh.private[fresh.signing]})
    with pytest.raises(SecretError, match="no next key"):
        rotated(only, now=0, hold_seconds=60)
    completed = with_next_key(only)
    assert completed.signing == "a" and completed.next in completed.private and completed.next != "a"
    assert with_next_key(completed) == completed
