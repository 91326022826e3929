"""Operator benchmarks on the local cluster (issue 5), reported, never timed out on.

Tier `bench` (not in CI's default tiers): `SLURMKUBE_TIERS="unit slurm k8s bench" bash tests/run`.

- scale-up: seconds from `replicas: 0 → 20` until 20 Slurm nodes are idle, against 0 → 1 in the same run;
- reconcile latency: seconds from a NodeSet spec change until its StatefulSet carries it, against the
  same StatefulSet change made directly through the API (the API round trip the operator cannot beat);
- no-op writes: objects our field managers changed over three passes of a steady cluster (must be none).

Results: $SLURMKUBE_CACHE/bench/operator.json, also printed. The assertions are about behaviour
(all nodes idle, nothing written), never about time.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import pytest
from kube_helpers import Cluster, wait_for
from slurm_helpers import (
    Operator,
    SlurmView,
    our_writes,
    running_cluster,
    wait_ready,
)

pytestmark = [pytest.mark.k8s, pytest.mark.bench]

CLUSTER = "bench"
WIDE = 20
# The smallest nodes the model allows: twenty fit beside everything else on a 2-core, 24 GiB machine.
TINY = {"resources": {"cpu": 1, "cpuRequest": "20m", "memory": "512Mi"}}


@pytest.fixture(scope="module")
def bench_cluster(kube_cluster: Cluster, slurm_images, operator: Operator) -> Cluster:
    with running_cluster(kube_cluster, operator, CLUSTER, slurm_images, {"login": {"replicas": 0}},
                         [("wide", 0, TINY)], delete_timeout=300):
        yield kube_cluster


def scale(kube: Cluster, replicas: int) -> None:
    kube.kubectl("-n", kube.namespace, "patch", "nodeset", "wide", "--type=merge",
                 "-p", json.dumps({"spec": {"replicas": replicas}}))


def idle_nodes(slurm: SlurmView) -> int:
    return sum(1 for states in slurm.nodes().values() if "IDLE" in states and "DRAIN" not in states)


def time_scale_up(kube: Cluster, slurm: SlurmView, operator: Operator, replicas: int) -> float:
    start = time.monotonic()
    scale(kube, replicas)
    wait_for(lambda: idle_nodes(slurm) == replicas, 900, 1, explain=slurm.explain)
    elapsed = time.monotonic() - start
    scale(kube, 0)
    wait_for(lambda: not slurm.nodes(), 600, 3)
    # Each measurement starts from no worker pod at all.
    wait_for(lambda: not kube.get_json("pods", "-l", "slurmkube.io/nodeset=wide")["items"], 300, 3)
    wait_ready(kube, CLUSTER, operator)
    return elapsed


def slurmd_env(kube: Cluster) -> list:
    sts = kube.get_json("statefulset", "%s-wide" % CLUSTER)
    return sts["spec"]["template"]["spec"]["containers"][0]["env"]


def time_until_changed(kube: Cluster, change, before) -> float:
    start = time.monotonic()
    change()
    wait_for(lambda: slurmd_env(kube) != before, 120, 0.2)
    return time.monotonic() - start


def test_operator_benchmarks(bench_cluster: Cluster, operator: Operator, capsys):
    kube, slurm = bench_cluster, SlurmView(bench_cluster, CLUSTER)
    results: dict = {}
    one = time_scale_up(kube, slurm, operator, 1)
    wide = time_scale_up(kube, slurm, operator, WIDE)
    results["scale_up"] = {"nodes_1_s": round(one, 1), "nodes_%d_s" % WIDE: round(wide, 1),
                           "ratio": round(wide / one, 2)}

    operator_runs, direct_runs = [], []
    for memory in ("513Mi", "514Mi", "515Mi"):
        before = slurmd_env(kube)
        operator_runs.append(time_until_changed(kube, lambda m=memory: kube.kubectl(
            "-n", kube.namespace, "patch", "nodeset", "wide", "--type=merge",
            "-p", json.dumps({"spec": {"resources": {"memory": m}}})), before))
    sts = "%s-wide" % CLUSTER
    for value in ("direct-1", "direct-2", "direct-3"):
        before = slurmd_env(kube)
        env = [*before, {"name": "SLURMKUBE_BENCH", "value": value}]
        direct_runs.append(time_until_changed(kube, lambda e=env: kube.kubectl(
            "-n", kube.namespace, "patch", "statefulset", sts, "--type=strategic",
            "-p", json.dumps({"spec": {"template": {"spec": {"containers": [{"name": "slurmd", "env": e}]}}}})),
            before))
    latency, direct = statistics.median(operator_runs), statistics.median(direct_runs)
    results["reconcile_latency"] = {"operator_median_s": round(latency, 2), "direct_api_median_s": round(direct, 2),
                                    "ratio": round(latency / direct, 1)}

    wait_ready(kube, CLUSTER, operator)
    time.sleep(15)  # the rolling-update bookkeeping of the direct edit above settles first
    before = our_writes(kube, CLUSTER)
    time.sleep(35)
    after = our_writes(kube, CLUSTER)
    changed = sorted(name for name, when in after.items() if before.get(name) != when)
    results["noop_pass"] = {"objects": len(before), "changed_by_us_in_3_passes": changed}

    out = Path(os.environ.get("SLURMKUBE_CACHE", "/var/cache/slurmkube")) / "bench" / "operator.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    with capsys.disabled():
        print("\noperator bench: " + json.dumps(results))
    assert changed == [], results
