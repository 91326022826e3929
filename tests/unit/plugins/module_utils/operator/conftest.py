"""The operator's unit tests' shared in-memory world (modules with a world of their own define it there)."""

from __future__ import annotations

import pytest
from example_clusters import example_resources
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils.operator import secrets as operator_secrets


@pytest.fixture
def world(monkeypatch):
    """The cpu-only example's cluster object and its node sets in an in-memory API, writes counted from zero."""
    fake_keys = {"ssh_host_ed25519_key": b"k", "ssh_host_ed25519_key.pub": b"p"}
    monkeypatch.setattr(operator_secrets, "new_ssh_host_keys", lambda types: fake_keys)
    kube = MemoryKube()
    raw = example_resources("cpu-only")
    cluster = dict(raw["cluster"], metadata=dict(raw["cluster"]["metadata"], uid="u-1", generation=1))
    for nodeset in raw["nodesets"]:
        kube.apply(nodeset)
    kube.writes = 0
    return kube, cluster
