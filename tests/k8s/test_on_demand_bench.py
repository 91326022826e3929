"""Benchmark (issue 37): resume latency of an on-demand node, from `sbatch` until slurmctld has the
node registered (no longer POWERING_UP), against a plain pod's start (created until Running, same
image and resources, `sleep`) on the same kind cluster in the same run, rounds alternating.
Reported, never asserted on time.

Tier `bench` (not in CI's default tiers): `SLURMKUBE_TIERS="unit slurm k8s bench" bash tests/run`,
or `SLURMKUBE_TEST_KIND_WORKERS=2 python -m pytest -m bench tests/k8s/test_on_demand_bench.py`.

The resumed node's path: Slurm's scheduler gives the job the powered-down node (POWERING_UP), the
operator's power loop (every 2 s) sees it and makes the pod, whose init containers (the seccomp
profile, the wait for slurmctld) and entrypoint (munged, the jail, slurmd -b) run before slurmd
registers. The plain pod pays the kubelet's share only. Both are timed on this machine's clock by
polling (slurmctld through `kubectl exec`, the pod through the API), so each figure carries up to a
poll's error (about half a second). Results: $SLURMKUBE_CACHE/bench/on_demand_resume.json, also
printed; the last is copied to tests/bench/on_demand_resume.json. First run (2026-11-30, 2 CPUs, 5
rounds): resume median 6.9 s (5.8-8.0), plain pod 2.1 s (1.6-2.2): 3.3 times.
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import time
from pathlib import Path
from typing import Iterator, List

import pytest
from kube_helpers import Cluster, wait_for
from slurm_helpers import Operator, SlurmView, running_cluster, tiny_cluster_spec

pytestmark = [pytest.mark.k8s, pytest.mark.bench]

CLUSTER = "odbench"
NODE = "%s-burst-0" % CLUSTER
ROUNDS = int(os.environ.get("SLURMKUBE_BENCH_ROUNDS", "5"))
SUSPEND_TIME = 5


@pytest.fixture(scope="module")
def slurm(kube_cluster: Cluster, slurm_images: dict, operator: Operator) -> Iterator[SlurmView]:
    base = tiny_cluster_spec()
    spec = dict(base, slurm=dict(base["slurm"], config=dict(base["slurm"]["config"], SuspendTimeout=10)))
    with running_cluster(kube_cluster, operator, CLUSTER, slurm_images, spec,
                         [("burst", 0, {"maxReplicas": 1, "suspendTimeSeconds": SUSPEND_TIME})]) as view:
        yield view


def states(slurm: SlurmView) -> set:
    return slurm.nodes()[NODE]


def asleep(slurm: SlurmView) -> bool:
    pods = slurm.kube.get_json("pods", "-l", "slurmkube.io/cluster=%s,slurmkube.io/nodeset=burst" % CLUSTER)
    found = states(slurm)
    return not pods["items"] and "POWERED_DOWN" in found and "POWERING_DOWN" not in found


def resume_seconds(slurm: SlurmView) -> float:
    """From sbatch until the node registered (asleep before)."""
    wait_for(lambda: asleep(slurm), 180, 1, explain=slurm.explain)
    started = time.monotonic()
    slurm.run("sbatch", "-o", "/dev/null", "--wrap", "true")
    wait_for(lambda: not states(slurm) & {"POWERED_DOWN", "POWERING_UP", "NOT_RESPONDING"}, 300, 0.2,
             explain=slurm.explain)
    return time.monotonic() - started


def plain_pod_seconds(slurm: SlurmView, n: int) -> float:
    """A pod of the worker image and the node's resources, created until Running."""
    template = slurm.kube.get_json("podtemplate", "%s-burst" % CLUSTER)["template"]
    container = template["spec"]["containers"][0]
    name = "plain-%d" % n
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": container["image"], "imagePullPolicy": "Never",
                                    "command": ["sleep", "3600"], "resources": container["resources"]}]}}
    started = time.monotonic()
    slurm.kube.apply(json.dumps(pod))
    wait_for(lambda: (slurm.kube.get_json("pod", name).get("status") or {}).get("phase") == "Running", 120, 0.2)
    took = time.monotonic() - started
    slurm.kube.kubectl("-n", slurm.kube.namespace, "delete", "pod", name, "--wait=true")
    return took


def summary(values: List[float]) -> dict:
    return {"rounds": len(values), "median_s": round(statistics.median(values), 1),
            "min_s": round(min(values), 1), "max_s": round(max(values), 1), "each_s": [round(v, 1) for v in values]}


def test_resume_latency_against_a_plain_pod_start(slurm: SlurmView):
    resumed, plain = [], []
    for n in range(ROUNDS):
        plain.append(plain_pod_seconds(slurm, n))
        resumed.append(resume_seconds(slurm))
    load = Path("/proc/loadavg").read_text().split()[:3]
    result = {
        "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": "%d CPUs, load %s" % (os.cpu_count() or 0, " ".join(load)),
        "method": "tests/k8s/test_on_demand_bench.py: rounds alternating; resume: sbatch until the node is "
                  "registered (no POWERING_UP); plain: a pod of the worker image created until Running",
        "resume": summary(resumed),
        "plain_pod_start": summary(plain),
        "median_ratio_resume_to_plain": round(statistics.median(resumed) / statistics.median(plain), 1),
    }
    out = Path(os.environ.get("SLURMKUBE_CACHE", "/var/cache/slurmkube")) / "bench" / "on_demand_resume.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    assert len(resumed) == ROUNDS and all(v > 0 for v in resumed + plain)
