"""What a steady pass asks of the API server and of Slurm does not grow with node sets or nodes
(issue 37: a cluster of 1,000 nodes in 100 sets made 631 API calls a pass, six per set, before the
pass listed each kind once)."""

from __future__ import annotations

import pytest
from scale_world import T0, steady_world

from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import SeenEqual
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R
from ansible_collections.slurmkube.core.plugins.module_utils.operator import secrets as operator_secrets


@pytest.fixture(autouse=True)
def host_keys(monkeypatch):
    keys = {"ssh_host_ed25519_key": b"k", "ssh_host_ed25519_key.pub": b"p"}
    monkeypatch.setattr(operator_secrets, "new_ssh_host_keys", lambda types: keys)


def steady_pass_calls(sets, per_set):
    """The calls of the second steady pass (the first fills the operator's memory of what is equal)."""
    kube, cluster = steady_world(sets, per_set)
    seen = SeenEqual()
    R.Reconciler(kube, clock=lambda: T0, seen=seen).reconcile(cluster)
    kube.calls.clear()
    writes = kube.writes
    R.Reconciler(kube, clock=lambda: T0, seen=seen).reconcile(cluster)
    assert kube.writes == writes
    return dict(kube.calls)


def test_a_steady_pass_calls_as_often_for_twenty_node_sets_as_for_two():
    assert steady_pass_calls(20, 2) == steady_pass_calls(2, 2)


def test_a_steady_pass_calls_as_often_for_ten_times_the_nodes():
    few = steady_pass_calls(2, 2)
    assert steady_pass_calls(2, 20) == few and few["exec"] <= 2  # Slurm: its nodes, and no more
