"""The exporter under a full queue (issue 17), reported, never timed out on.

Tier `bench` (not in CI's default tiers): `python -m pytest -m bench tests/k8s/test_exporter_bench.py`.

One small cluster with the exporter; its /metrics is fetched from inside the exporter's pod
(the exporter caches Slurm's answers for minIntervalSeconds, set to 1 so that each timed fetch
asks Slurm anew) with an empty queue, then with JOBS held jobs. Results:
$SLURMKUBE_CACHE/bench/exporter.json (copied to tests/bench/exporter.json), also printed.
The assertion is about behaviour: the series count stays within SERIES_BOUND, whatever the
number of jobs.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from kube_helpers import REPO, Cluster, load_images, wait_for
from slurm_helpers import (
    SLURM_IMAGES,
    TINY,
    Operator,
    SlurmView,
    running_cluster,
    tiny_cluster_spec,
)

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

pytestmark = [pytest.mark.k8s, pytest.mark.bench]

CLUSTER = "mon"
JOBS = int(os.environ.get("SLURMKUBE_BENCH_JOBS", "1000"))
FETCHES = 5
# The bound: the node, resource, scheduler and jail families of one node set and one partition,
# about 70 RPC types (two series each), every job state and pending reason of one partition,
# and 21 user series per state; health and long-check series grow with nodes, never with jobs.
SERIES_BOUND = 400

# In the exporter's pod: FETCHES fetches of /metrics, each after the cache expired; prints the
# milliseconds of each and the last body.
FETCH = r"""
import sys, time, urllib.request
times = []
for _ in range(int(sys.argv[1])):
    time.sleep(1.1)
    start = time.monotonic()
    body = urllib.request.urlopen("http://127.0.0.1:9341/metrics", timeout=60).read().decode()
    times.append((time.monotonic() - start) * 1000)
print(" ".join("%.1f" % t for t in times))
print(body)
"""


@pytest.fixture(scope="module")
def images(kube_cluster: Cluster, slurm_images: dict) -> dict:
    build = subprocess.run(["bash", str(REPO / "images" / "build.sh"), "exporter"], capture_output=True,
                           text=True, timeout=3600, check=False)
    assert build.returncode == 0, build.stderr[-4000:]
    ref = json.loads(build.stdout)["exporter"]
    load_images(ref)
    return dict(slurm_images, exporter=ref)


@pytest.fixture(scope="module")
def cluster(kube_cluster: Cluster, images: dict, operator: Operator) -> Cluster:
    spec = dict(tiny_cluster_spec(), exporter={"enabled": True, "resources": TINY, "minIntervalSeconds": 1})
    spec["images"] = dict({n: images[n] for n in (*SLURM_IMAGES, "exporter")}, pullPolicy="Never")
    with running_cluster(kube_cluster, operator, CLUSTER, images, spec, [("cpu", 1)]):
        yield kube_cluster


def exporter_pod(kube: Cluster) -> str:
    selector = "%s=%s,%s=%s" % (C.LABEL_CLUSTER, CLUSTER, C.LABEL_COMPONENT, C.COMPONENT_EXPORTER)
    pods = kube.get_json("pods", "-l", selector)["items"]
    return pods[0]["metadata"]["name"]


def fetch(kube: Cluster) -> tuple:
    """(milliseconds of each fetch, the series in the last body)."""
    out = kube.exec(exporter_pod(kube), "python3", "-c", FETCH, str(FETCHES)).stdout
    times, _newline, body = out.partition("\n")
    series = [line for line in body.splitlines() if line and not line.startswith("#")]
    return [float(t) for t in times.split()], series


def summary(times: list, series: list) -> dict:
    return {"fetch_ms_median": sorted(times)[len(times) // 2], "fetch_ms": times, "series": len(series)}


def test_a_thousand_queued_jobs_keep_the_series_bounded(cluster: Cluster):
    slurm = SlurmView(cluster, CLUSTER)
    wait_for(lambda: re.search(r"^slurm_up 1\.0$", "\n".join(fetch(cluster)[1]), re.M), 180, 5)
    empty = summary(*fetch(cluster))
    started = time.monotonic()
    slurm.run("bash", "-c", 'for i in $(seq "$1"); do sbatch -Q -H -o /dev/null --wrap true; done', "_", str(JOBS))
    submit_s = time.monotonic() - started
    assert int(slurm.run("bash", "-c", "squeue -h -t PD | wc -l").strip()) == JOBS
    try:
        times, series = fetch(cluster)
        full = summary(times, series)
        assert any(re.match(r'^slurm_jobs\{partition="main",state="pending"\} %d\.0$' % JOBS, s) for s in series), \
            [s for s in series if s.startswith("slurm_jobs{")]
    finally:
        slurm.run("scancel", "--state=PENDING")
    result = {
        "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": "%d CPUs, load %s" % (os.cpu_count() or 0, " ".join("%.2f" % x for x in os.getloadavg())),
        "cluster": "one 1-CPU node; exporter limited to 0.1 CPU, minIntervalSeconds=1, fetched from inside its pod",
        "series_bound": SERIES_BOUND,
        "empty_queue": empty,
        "queued": dict(full, jobs=JOBS, submit_seconds=round(submit_s, 1)),
        "fetch_time_ratio_queued_to_empty": round(full["fetch_ms_median"] / empty["fetch_ms_median"], 2),
    }
    out = Path(os.environ.get("SLURMKUBE_CACHE", "/var/cache/slurmkube")) / "bench" / "exporter.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    assert full["series"] <= SERIES_BOUND, full
