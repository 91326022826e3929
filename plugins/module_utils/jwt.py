# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The REST API's JWT keys: RSA signing keys, the public key set Slurm checks tokens with, and
the tokens themselves.

Why RS256 keys of our own rather than Slurm's `scontrol token`: that signs HS256 with one
`jwt_key`, and one key cannot be rotated with old and new tokens both valid; auth/jwt checks
RS256 tokens against a JWKS of any number of keys, matched by `kid`. Slurm reads from a token
`sun` (the user), `iat` and `exp` (jwt.shtml).
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from typing import Any, Dict, Mapping

from ansible_collections.slurmkube.core.plugins.module_utils.keys import SecretError

try:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    HAS_CRYPTOGRAPHY = True
    CRYPTOGRAPHY_IMPORT_ERROR = None
except ImportError as exc:  # the modules report it with missing_required_lib
    HAS_CRYPTOGRAPHY = False
    CRYPTOGRAPHY_IMPORT_ERROR = exc

RSA_KEY_BITS = 2048
ALGORITHM = "RS256"


@dataclass(frozen=True)
class KeySet:
    """The cluster's keys: PEM private keys by key id, and the id of the one that signs."""

    signing: str
    private: Mapping[str, str]


def _require_cryptography() -> None:
    if not HAS_CRYPTOGRAPHY:
        raise SecretError("the Python library 'cryptography' is needed for the REST API's keys: %s"
                          % CRYPTOGRAPHY_IMPORT_ERROR)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _int_b64url(value: int) -> str:
    return _b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def new_key_set() -> KeySet:
    """A fresh RSA key, the only one, signing."""
    _require_cryptography()
    key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode("ascii")
    kid = _b64url(os.urandom(12))
    return KeySet(signing=kid, private={kid: pem})


def _private_key(pem: str) -> Any:
    _require_cryptography()
    key = serialization.load_pem_private_key(pem.encode("ascii"), password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise SecretError("a REST API signing key must be an RSA key")
    return key


def public_jwk(kid: str, pem: str) -> Dict[str, str]:
    """The public half of one key as auth/jwt reads it: kty RSA, alg RS256, kid, n, e."""
    numbers = _private_key(pem).public_key().public_numbers()
    return {"kty": "RSA", "alg": ALGORITHM, "use": "sig", "kid": kid,
            "n": _int_b64url(numbers.n), "e": _int_b64url(numbers.e)}


def jwks_text(keys: KeySet) -> str:
    """The JWKS slurmctld and slurmdbd load (auth/jwt's AuthAltParameters jwks=)."""
    return json.dumps({"keys": [public_jwk(kid, pem) for kid, pem in sorted(keys.private.items())]},
                      sort_keys=True)


def signing_text(keys: KeySet) -> str:
    """The private half, as the Secret keeps it."""
    return json.dumps({"signing": keys.signing, "keys": dict(sorted(keys.private.items()))}, sort_keys=True)


def key_set_from_text(text: str) -> KeySet:
    """The Secret's private half read back; a malformed one is refused, naming what is wrong."""
    try:
        data = json.loads(text)
        signing, private = data["signing"], data["keys"]
    except (ValueError, KeyError, TypeError) as exc:
        raise SecretError("the REST API's key Secret is malformed: %s" % exc) from exc
    if not isinstance(private, dict) or signing not in private:
        raise SecretError("the REST API's key Secret names signing key %r, which it does not hold" % (signing,))
    return KeySet(signing=signing, private=private)


def sign_token(keys: KeySet, username: str, now: int, lifetime: int) -> str:
    """A token for `username`, valid from `now` for `lifetime` seconds, signed by the signing key."""
    header = {"alg": ALGORITHM, "typ": "JWT", "kid": keys.signing}
    claims = {"sun": username, "iat": now, "exp": now + lifetime}
    signed = "%s.%s" % (_b64url(json.dumps(header, sort_keys=True).encode()),
                        _b64url(json.dumps(claims, sort_keys=True).encode()))
    signature = _private_key(keys.private[keys.signing]).sign(signed.encode("ascii"), padding.PKCS1v15(),
                                                              hashes.SHA256())
    return "%s.%s" % (signed, _b64url(signature))
