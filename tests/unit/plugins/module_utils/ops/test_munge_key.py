"""The munge key Secret: generated once, imported with checks, replaced only on rotate, never shown."""

from __future__ import annotations

import base64

import pytest
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import Timer
from ansible_collections.slurmkube.core.plugins.module_utils.keys import key_fingerprint
from ansible_collections.slurmkube.core.plugins.module_utils.ops.munge_key import (
    MungeKeyError,
    ensure_key,
    key_from_params,
    remove_key,
    secret_name_for,
    wait_rolled_out,
)


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


def test_only_a_replaced_key_is_reported_as_replaced():
    kube = MemoryKube()
    assert not ensure_key(kube, "demo-munge-key", "hpc", b"a" * 64, False, "demo", False).replaced
    assert ensure_key(kube, "demo-munge-key", "hpc", b"b" * 64, True, "demo", False).replaced


def cluster_with(kube, status):
    kube.objects[("SlurmCluster", "hpc", "demo")] = {"apiVersion": "slurmkube.io/v1alpha1", "kind": "SlurmCluster",
                                                     "metadata": {"name": "demo", "namespace": "hpc"},
                                                     "status": status}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_rollout_wait_ends_when_the_status_names_the_new_key():
    kube, clock = MemoryKube(), Clock()
    cluster_with(kube, {"mungeKey": "sha256:new"})
    assert wait_rolled_out(kube, "demo", "hpc", "sha256:new", 60, Timer(clock.sleep, clock))
    assert clock.now == 0


def test_rollout_wait_without_a_cluster_has_nothing_to_wait_for():
    assert not wait_rolled_out(MemoryKube(), "demo", "hpc", "sha256:new", 60)


def test_rollout_wait_times_out_with_the_operators_reason():
    kube, clock = MemoryKube(), Clock()
    cluster_with(kube, {"mungeKey": "sha256:old", "conditions": [
        {"type": "MungeKeyInUse", "status": "False", "message": "munge key sha256:new not mounted yet in demo-cpu-1"}]})
    expected = r"does not run munge key sha256:new after 30s: .*not mounted yet in demo-cpu-1"
    with pytest.raises(MungeKeyError, match=expected):
        wait_rolled_out(kube, "demo", "hpc", "sha256:new", 30, Timer(clock.sleep, clock))
    assert clock.now >= 30
