"""gpu_healthcheck's logic: settings merged into spec.healthChecks, checks run in pods, drains via slurmctld."""

from __future__ import annotations

import datetime

import pytest
from example_clusters import example_resources
from test_reconcile_health import SlurmKube

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R
from ansible_collections.slurmkube.core.plugins.module_utils.operator import secrets as operator_secrets
from ansible_collections.slurmkube.core.plugins.module_utils.ops import gpu_healthcheck as H
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import ClusterError

T0 = datetime.datetime(2026, 11, 22, 12, 0, 0, tzinfo=datetime.timezone.utc)
HOT = "gpu 00000000:00:04.0: 38 C (max 37 C)"


@pytest.fixture
def kube(monkeypatch):
    keys = {"ssh_host_ed25519_key": b"k", "ssh_host_ed25519_key.pub": b"p"}
    monkeypatch.setattr(operator_secrets, "new_ssh_host_keys", lambda types: keys)
    kube = SlurmKube()
    raw = example_resources("cpu-only")
    kube.apply(raw["cluster"])
    for nodeset in raw["nodesets"]:
        kube.apply(nodeset)
    R.Reconciler(kube, clock=lambda: T0).reconcile(dict(raw["cluster"], metadata=dict(
        raw["cluster"]["metadata"], uid="u-1", generation=1)))
    kube.pod("cpu-controller-0", T0)
    for i in range(3):
        kube.pod("cpu-compute-%d" % i, T0)
        kube.node("cpu-compute-%d" % i, "IDLE")
    return kube


def spec_of(kube):
    return kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, "cpu", "research")["spec"]


def test_settings_merge_into_health_checks_once(kube):
    change = H.configure(kube, "cpu", "research", {"interval": 30, "longChecks": {"enabled": True}}, False)
    assert change.changed
    assert change.diffs[0]["before"] == {}
    assert change.diffs[0]["after"] == {"interval": 30, "longChecks": {"enabled": True}}
    assert spec_of(kube)["healthChecks"] == {"interval": 30, "longChecks": {"enabled": True}}
    # Nested settings merge key by key; the same request again changes nothing.
    assert H.configure(kube, "cpu", "research", {"longChecks": {"schedule": "0 3 * * *"}}, False).changed
    assert spec_of(kube)["healthChecks"]["longChecks"] == {"enabled": True, "schedule": "0 3 * * *"}
    writes = kube.writes
    assert not H.configure(kube, "cpu", "research", {"interval": 30}, False).changed
    assert kube.writes == writes


def test_check_mode_writes_nothing_but_says_what_would_change(kube):
    change = H.configure(kube, "cpu", "research", {"replaceDrainedNodes": True}, True)
    assert change.changed and "healthChecks" not in spec_of(kube)


def test_invalid_settings_name_the_field(kube):
    with pytest.raises(SpecError, match=r"spec.healthChecks.gpuMaxTemperatureCelsius: must be at most 150"):
        H.configure(kube, "cpu", "research", {"gpuMaxTemperatureCelsius": 500}, False)
    with pytest.raises(SpecError, match=r"spec.healthChecks.checks\[0\]: must be one of"):
        H.configure(kube, "cpu", "research", {"checks": ["smart"]}, False)


def test_unknown_cluster_and_nodes_name_the_option(kube):
    with pytest.raises(ClusterError, match=r"^name: no SlurmCluster nope in namespace research$"):
        H.run_checks(kube, "nope", "research", [])
    with pytest.raises(ClusterError, match=r"^nodes: cpu-compute-9 not a worker of SlurmCluster research/cpu"):
        H.run_checks(kube, "cpu", "research", ["cpu-compute-9"])


def test_run_now_reports_each_node_and_drains_only_what_is_ours_to_drain(kube):
    kube.reports["cpu-compute-1"] = (1, HOT + "\n", "")
    kube.reports["cpu-compute-2"] = (1, HOT + "\n", "")
    kube.node("cpu-compute-2", "IDLE", "DRAIN", reason="admin: cooling repair")
    results = H.run_checks(kube, "cpu", "research", [])
    healthy = {n: r.healthy for n, r in results.items()}
    assert healthy == {"cpu-compute-0": True, "cpu-compute-1": False, "cpu-compute-2": False}
    assert results["cpu-compute-1"].problems == [HOT]
    # Check mode: nothing is drained, the result says what would be.
    would = H.drain_failed(kube, "cpu", "research", results, True)
    assert [n for n, r in would.items() if r.drained] == ["cpu-compute-1"]
    assert "DRAIN" not in kube.nodes["cpu-compute-1"]["state"]
    drained = H.drain_failed(kube, "cpu", "research", results, False)
    assert kube.nodes["cpu-compute-1"]["reason"] == "slurmkube: " + HOT
    assert kube.nodes["cpu-compute-2"]["reason"] == "admin: cooling repair"
    assert drained["cpu-compute-1"].as_dict() == {"healthy": False, "problems": [HOT], "drained": True}
    # Idempotent: the same failure drains nothing new.
    again = H.drain_failed(kube, "cpu", "research", H.run_checks(kube, "cpu", "research", ["cpu-compute-1"]), False)
    assert not again["cpu-compute-1"].drained


def test_a_check_that_cannot_run_is_a_failure_with_its_output(kube):
    kube.reports["cpu-compute-0"] = (126, "", "exec: permission denied")
    result = H.run_checks(kube, "cpu", "research", ["cpu-compute-0"])["cpu-compute-0"]
    assert result == H.NodeResult(False, ["the check failed (exit 126): exec: permission denied"])
