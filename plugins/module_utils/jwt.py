# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The REST API's JWT keys: RSA signing keys, the public key set Slurm checks tokens with, and
the tokens themselves.

Why RS256 keys of our own rather than Slurm's `scontrol token`: that signs HS256 with one
`jwt_key`, and one key cannot be rotated with old and new tokens both valid; auth/jwt checks
RS256 tokens against a JWKS of any number of keys, matched by `kid`. Slurm reads from a token
`sun` (the user), `iat` and `exp` (jwt.shtml).

A key set holds the signing key, the next one (published, signing after the next rotation) and
the keys a rotation retired, until the tokens they signed have expired. The next key is
published one rotation ahead because slurmdbd reads the key set only when it starts: the key a
rotation makes the signing one is one every running slurmdbd has loaded already.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Tuple

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
    """The cluster's keys: PEM private keys by key id, the id of the one that signs, of the next
    one, and when each retired one leaves the set (seconds since the epoch)."""

    signing: str
    private: Mapping[str, str]
    next: str = ""
    retire: Mapping[str, int] = field(default_factory=dict)


def _require_cryptography() -> None:
    if not HAS_CRYPTOGRAPHY:
        raise SecretError("the Python library 'cryptography' is needed for the REST API's keys: %s"
                          % CRYPTOGRAPHY_IMPORT_ERROR)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _int_b64url(value: int) -> str:
    return _b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def _new_key() -> Tuple[str, str]:
    """A fresh RSA key: (key id, PEM)."""
    _require_cryptography()
    key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode("ascii")
    return _b64url(os.urandom(12)), pem


def new_key_set() -> KeySet:
    """A signing key and the next one, both fresh."""
    (signing, signing_pem), (following, following_pem) = _new_key(), _new_key()
    return KeySet(signing=signing, private={signing: signing_pem, following: following_pem}, next=following)


def with_next_key(keys: KeySet) -> KeySet:
    """The set with a next key, made when it has none (a set older than rotation)."""
    if keys.next:
        return keys
    kid, pem = _new_key()
    return KeySet(keys.signing, {**keys.private, kid: pem}, kid, dict(keys.retire))


def rotated(keys: KeySet, now: int, hold_seconds: int) -> KeySet:
    """The next key signs from now on and a fresh one is next; the old signing key stays in the
    set `hold_seconds` more, as long as a token it signed may live."""
    if not keys.next:
        raise SecretError("the REST API's key set has no next key to rotate to yet")
    kid, pem = _new_key()
    return KeySet(keys.next, {**keys.private, kid: pem}, kid, {**keys.retire, keys.signing: now + hold_seconds})


def without_retired(keys: KeySet, now: int) -> KeySet:
    """The set without the retired keys whose time has come."""
    gone = {kid for kid, when in keys.retire.items() if when <= now}
    if not gone:
        return keys
    return KeySet(keys.signing, {kid: pem for kid, pem in keys.private.items() if kid not in gone}, keys.next,
                  {kid: when for kid, when in keys.retire.items() if kid not in gone})


def without_retiring(keys: KeySet) -> KeySet:
    """The set without every key a rotation retired, whenever it was to leave (a revocation: the
    tokens they signed stop working as soon as slurmctld reads the set)."""
    return without_retired(keys, max(keys.retire.values(), default=0))


def loaded_at_start(keys: KeySet) -> List[str]:
    """The key ids a daemon that reads the set only at start (slurmdbd) must have loaded: all but
    the next key while an old one retires, so that a rotation does not ask for a restart (the key
    it makes the signing one was the next, loaded already), and the one retirement does."""
    return sorted(kid for kid in keys.private if not (keys.retire and kid == keys.next))


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


def key_set_summary(keys: KeySet) -> Dict[str, Any]:
    """What may be shown of a key set: its key ids by role, and when each retiring one leaves."""
    retiring = {kid: datetime.datetime.fromtimestamp(when, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                for kid, when in sorted(keys.retire.items())}
    return {"signing": keys.signing, "next": keys.next, "retiring": retiring}


def key_set_digest(jwks: str) -> str:
    """What may be shown of a key set: a digest of its public half (status.restKeys.inEffect)."""
    return "sha256:" + hashlib.sha256(jwks.encode("ascii")).hexdigest()


def signing_text(keys: KeySet) -> str:
    """The private half, as the Secret keeps it."""
    return json.dumps({"signing": keys.signing, "next": keys.next, "retire": dict(keys.retire),
                       "keys": dict(sorted(keys.private.items()))}, sort_keys=True)


def key_set_from_text(text: str) -> KeySet:
    """The Secret's private half read back; a malformed one is refused, naming what is wrong."""
    try:
        data = json.loads(text)
        signing, private = data["signing"], data["keys"]
        following, retire = data.get("next") or "", dict(data.get("retire") or {})
    except (ValueError, KeyError, TypeError) as exc:
        raise SecretError("the REST API's key Secret is malformed: %s" % exc) from exc
    if not isinstance(private, dict):
        raise SecretError("the REST API's key Secret is malformed: 'keys' is not a mapping")
    for role, kid in (("signing", signing), ("next", following), *(("retiring", kid) for kid in retire)):
        if kid and kid not in private:
            raise SecretError("the REST API's key Secret names %s key %r, which it does not hold" % (role, kid))
    return KeySet(signing=signing, private=private, next=following, retire=retire)


def sign_token(keys: KeySet, username: str, now: int, lifetime: int) -> str:
    """A token for `username`, valid from `now` for `lifetime` seconds, signed by the signing key."""
    header = {"alg": ALGORITHM, "typ": "JWT", "kid": keys.signing}
    claims = {"sun": username, "iat": now, "exp": now + lifetime}
    signed = "%s.%s" % (_b64url(json.dumps(header, sort_keys=True).encode()),
                        _b64url(json.dumps(claims, sort_keys=True).encode()))
    signature = _private_key(keys.private[keys.signing]).sign(signed.encode("ascii"), padding.PKCS1v15(),
                                                              hashes.SHA256())
    return "%s.%s" % (signed, _b64url(signature))
