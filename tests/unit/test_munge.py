"""The munge key Secret: generated once, imported with checks, replaced only on rotate, never shown."""

from __future__ import annotations

import base64

import pytest
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils.munge import (
    MungeKeyError,
    ensure_key,
    key_from_params,
    remove_key,
    secret_name_for,
)
from ansible_collections.slurmkube.core.plugins.module_utils.secrets import key_fingerprint


def stored(kube):
    return base64.b64decode(kube.objects[("Secret", "hpc", "demo-munge-key")]["data"]["munge.key"])


def test_generated_once_then_left_alone():
    kube = MemoryKube()
    first = ensure_key(kube, "demo-munge-key", "hpc", None, False, "demo", False)
    assert first.changed and len(stored(kube)) == 1024
    assert first.fingerprint == key_fingerprint(stored(kube))
    again = ensure_key(kube, "demo-munge-key", "hpc", None, False, "demo", False)
    assert not again.changed and again.fingerprint == first.fingerprint


def test_a_different_key_needs_rotate():
    kube = MemoryKube()
    ensure_key(kube, "demo-munge-key", "hpc", b"a" * 64, False, "demo", False)
    with pytest.raises(MungeKeyError, match=r"holds a different munge key .*set rotate=true"):
        ensure_key(kube, "demo-munge-key", "hpc", b"b" * 64, False, "demo", False)
    assert stored(kube) == b"a" * 64
    assert ensure_key(kube, "demo-munge-key", "hpc", b"b" * 64, True, "demo", False).changed
    assert stored(kube) == b"b" * 64


def test_same_key_given_again_is_no_change():
    kube = MemoryKube()
    ensure_key(kube, "demo-munge-key", "hpc", b"a" * 64, False, "demo", False)
    assert not ensure_key(kube, "demo-munge-key", "hpc", b"a" * 64, False, "demo", False).changed


@pytest.mark.parametrize("size", [0, 31, 1025])
def test_key_length_is_checked_before_any_write(size):
    kube = MemoryKube()
    with pytest.raises(MungeKeyError, match="32 to 1024 bytes, got %d" % size):
        ensure_key(kube, "demo-munge-key", "hpc", b"k" * size, False, "demo", False)
    assert kube.writes == 0


def test_check_mode_writes_nothing():
    kube = MemoryKube()
    assert ensure_key(kube, "demo-munge-key", "hpc", None, False, "demo", True).changed
    assert kube.objects == {}


def test_content_must_be_base64_and_error_does_not_echo_it():
    with pytest.raises(MungeKeyError) as info:
        key_from_params("not base64 at all!!", None)
    assert "not base64 at all" not in str(info.value)
    assert key_from_params(base64.b64encode(b"x" * 40).decode(), None) == b"x" * 40


def test_absent_removes_and_reports_what_was_there():
    kube = MemoryKube()
    ensure_key(kube, "demo-munge-key", "hpc", b"a" * 64, False, "demo", False)
    gone = remove_key(kube, "demo-munge-key", "hpc", False)
    assert gone.changed and gone.fingerprint == key_fingerprint(b"a" * 64)
    assert not remove_key(kube, "demo-munge-key", "hpc", False).changed


def test_secret_name_defaults_to_the_clusters():
    assert secret_name_for({"cluster": "demo"}) == "demo-munge-key"
    assert secret_name_for({"cluster": "demo", "secret_name": "k"}) == "k"
