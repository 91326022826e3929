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
    new_key_set,
    sign_token,
    signing_text,
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
    (jwk,) = json.loads(jwks_text(keys))["keys"]
    assert jwk["kty"] == "RSA" and jwk["alg"] == "RS256" and jwk["kid"] == keys.signing
    assert public_key(jwk).key_size == 2048
    assert "PRIVATE" not in jwks_text(keys) and "d" not in jwk


def test_a_token_names_its_user_and_lifetime_and_verifies_with_the_published_key(keys):
    token = sign_token(keys, "alice", now=1_800_000_000, lifetime=600)
    header, claims, signature = token.split(".")
    assert json.loads(unb64(header)) == {"alg": "RS256", "typ": "JWT", "kid": keys.signing}
    assert json.loads(unb64(claims)) == {"sun": "alice", "iat": 1_800_000_000, "exp": 1_800_000_600}
    (jwk,) = json.loads(jwks_text(keys))["keys"]
    public_key(jwk).verify(unb64(signature), ("%s.%s" % (header, claims)).encode(), padding.PKCS1v15(),
                           hashes.SHA256())


def test_a_token_changed_after_signing_does_not_verify(keys):
    header, _claims, signature = sign_token(keys, "alice", now=1_800_000_000, lifetime=600).split(".")
    forged = json.dumps({"sun": "root", "iat": 1_800_000_000, "exp": 1_800_000_600}).encode()
    (jwk,) = json.loads(jwks_text(keys))["keys"]
    with pytest.raises(InvalidSignature):
        public_key(jwk).verify(unb64(signature), ("%s.%s" % (header, base64.urlsafe_b64encode(forged).decode()))
                               .encode(), padding.PKCS1v15(), hashes.SHA256())


def test_the_private_half_reads_back_and_a_malformed_one_is_refused(keys):
    assert key_set_from_text(signing_text(keys)) == KeySet(keys.signing, dict(keys.private))
    with pytest.raises(SecretError, match="malformed"):
        key_set_from_text("{not json")
    with pytest.raises(SecretError, match="names signing key 'gone'"):
        key_set_from_text(json.dumps({"signing": "gone", "keys": dict(keys.private)}))


def test_two_key_sets_never_share_a_key_id():
    assert new_key_set().signing != new_key_set().signing
