"""Job throughput on the quickstart-sized cluster against bare Slurm with the same slurm.conf,
in one run (issue 13), reported, never timed out on.

Tier `bench` (not in CI's default tiers): `SLURMKUBE_TIERS="unit slurm k8s bench" bash tests/run`,
or `python -m pytest -m bench tests/k8s/test_throughput_bench.py`.

Both clusters are the quickstart's shape (playbooks/vars/example-cluster.yml: two 1-CPU nodes
and one 2-CPU node, 4 CPUs, without its accounting) rendered from the same models, so their
slurm.conf is the same text:
- "kubernetes": the operator's cluster on the test kind cluster (jail, cgroups, pods);
- "bare": the same daemons and images as plain docker containers on one network
  (tests/images/docker_cluster.py's Cluster) with the pods' CPU and memory limits, no Kubernetes
  in between.

Workloads, each timed inside the controller from the first submission until the queue is
empty: JOBS × `sbatch --wrap true` (SLURMKUBE_BENCH_JOBS, default 1000) and one JOBS-task array.
Both sides run under spec.slurm.profile SLURMKUBE_BENCH_PROFILE (highThroughput by default; general
for the product's defaults). Results: $SLURMKUBE_CACHE/bench/throughput.json, also printed. The
assertion is about behaviour (by slurmctld's counts, every job started and completed, none failed
or cancelled), never about time.
"""

from __future__ import annotations

import copy
import datetime
import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Mapping

import pytest
import yaml
from cgroup_cpu import cpu_seconds, kube_pod_names, used_between
from kube_helpers import REPO, Cluster
from slurm_helpers import Operator, cluster_manifest, manifests, wait_ready

from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.quantity import parse_quantity, quantity_to_mebibytes

pytestmark = [pytest.mark.k8s, pytest.mark.bench]

CLUSTER = "tput"
JOBS = int(os.environ.get("SLURMKUBE_BENCH_JOBS", "1000"))
# spec.slurm.profile of both sides (general: the product's defaults).
PROFILE = os.environ.get("SLURMKUBE_BENCH_PROFILE", "highThroughput")

# Runs in the controller: submit, wait for an empty queue, print milliseconds and slurmctld's counts
# of the jobs that ran (sdiag's, reset first: under the highThroughput profile an ended job's
# record is gone after 10 s, so `scontrol show job` cannot count them).
WORKLOAD = r"""
set -eu
sdiag --reset >/dev/null
start=$(date +%s%N)
if [ "$1" = array ]; then
  sbatch -Q -o /dev/null --array=1-"$2" --wrap true
else
  for i in $(seq "$2"); do sbatch -Q -o /dev/null --wrap true; done
fi
while [ -n "$(squeue -h -o %i)" ]; do sleep 0.1; done
echo "ms $(( ($(date +%s%N) - start) / 1000000 ))"
sdiag | sed -n 's/^Jobs \(started\|completed\|canceled\|failed\): *\([0-9]*\)$/\2 \1/p'
"""


def quickstart_objects(namespace: str) -> tuple:
    """The quickstart's SlurmCluster and NodeSets, renamed into this namespace."""
    example = yaml.safe_load((REPO / "playbooks/vars/example-cluster.yml").read_text())
    cluster = copy.deepcopy(example["slurmkube_cluster"])
    cluster["metadata"] = {"name": CLUSTER, "namespace": namespace}
    nodesets = []
    for ns in example["slurmkube_node_sets"]:
        ns = copy.deepcopy(ns)
        ns["metadata"]["namespace"] = namespace
        ns["spec"]["clusterName"] = CLUSTER
        nodesets.append(ns)
    cluster["spec"]["login"] = {"replicas": 0}
    cluster["spec"].setdefault("slurm", {})["profile"] = PROFILE
    # Bare Slurm has no slurmdbd (the docker tier's cluster runs none), and a slurmctld told to use
    # one that never answers stops on a first start: both sides run without accounting.
    cluster["spec"].pop("accounting", None)
    return cluster, nodesets


def run_workload(run, kind: str, pods: Mapping[str, str]) -> dict:
    """run(*argv) executes in the controller; jobs/s of one workload, slurmctld's counts of its jobs
    (an array's tasks counted each), and the CPU seconds each container, pod and Kubernetes node used
    meanwhile (PODS: uid -> name of the pods to tell apart)."""
    before, began = cpu_seconds(pods), time.time()
    out = run("bash", "-c", WORKLOAD, "workload", kind, str(JOBS)).splitlines()
    ended, used = time.time(), used_between(before, cpu_seconds(pods))
    ms = int(out[0].split()[1])
    counts = {word: int(n) for n, word in (line.split() for line in out[1:])}
    return {"jobs": JOBS, "seconds": round(ms / 1000, 2), "jobs_per_s": round(JOBS * 1000 / ms, 2), "sdiag": counts,
            "cpu_seconds": used, "window": [round(began, 1), round(ended, 1)]}


def workloads(run, pods: Mapping[str, str]) -> dict:
    """Both workloads, one after the other."""
    return {kind: run_workload(run, kind, pods) for kind in ("sbatch", "array")}


@pytest.fixture(scope="module")
def docker_tier():
    """The docker tier's cluster (tests/images/docker_cluster.py), imported from its folder."""
    sys.path.insert(0, str(REPO / "tests" / "images"))
    return importlib.import_module("docker_cluster")


def test_job_throughput_against_bare_slurm(kube_cluster: Cluster, slurm_images, operator: Operator,
                                           docker_tier, tmp_path_factory, capsys):
    kube = kube_cluster
    cluster, nodesets = quickstart_objects(kube.namespace)
    images = dict(cluster_manifest(kube.namespace, CLUSTER, slurm_images)["spec"]["images"])
    cluster["spec"]["images"] = images

    # Bare Slurm first, while the local cluster has nothing else to run.
    model = parse_cluster(cluster)
    models = [parse_nodeset(ns) for ns in nodesets]
    docker_tier.built_images()  # what its clean-up runs in (the base image) among them
    bare = docker_tier.Cluster(slurm_images, tmp_path_factory.mktemp("bare"), model, models)
    bare.prepare()
    try:
        # The controller pod's limits: the sbatch loop runs beside slurmctld, in its CPU quota.
        limits = model.spec.controller.resources
        bare.start_controller(["--cpus", "%g" % float(parse_quantity(limits.cpu)),
                               "--memory", "%dm" % quantity_to_mebibytes(limits.memory)])
        names = []
        for ns in models:
            for i in range(ns.spec.replicas):
                names.append("%s-%s-%d" % (CLUSTER, ns.name, i))
                bare.start_worker(names[-1], nodeset=ns)
        docker_tier.wait_for("bare workers idle", lambda: bare.idle_nodes() >= set(names), timeout=180)
        bare_results = workloads(lambda *argv: bare.exec(bare.controller_pod, *argv, timeout=1800).stdout,
                                 kube_pod_names(kube.kubectl))
    finally:
        bare.destroy()

    kube.apply(manifests(cluster, *nodesets))
    try:
        wait_ready(kube, CLUSTER, operator)
        pod = "%s-controller-0" % CLUSTER
        kube_results = workloads(lambda *argv: kube.kubectl("-n", kube.namespace, "exec", pod, "--", *argv,
                                                            timeout=1800).stdout, kube_pod_names(kube.kubectl))
    finally:
        kube.kubectl("-n", kube.namespace, "delete", "slurmcluster", CLUSTER, "--wait=true", check=False, timeout=300)
        kube.kubectl("-n", kube.namespace, "delete", "nodesets", "--all", "--wait=true", check=False, timeout=300)

    results = {
        "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": "%d CPUs, load %s" % (os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())),
        "cluster": "quickstart shape: node sets cpu (2 x 1 CPU) and big (1 x 2 CPUs), 4 CPUs",
        "profile": PROFILE,
        "kubernetes": kube_results,
        "bare": bare_results,
        "ratio_kubernetes_over_bare": {k: round(kube_results[k]["jobs_per_s"] / bare_results[k]["jobs_per_s"], 3)
                                       for k in kube_results},
    }
    out = Path(os.environ.get("SLURMKUBE_CACHE", "/var/cache/slurmkube")) / "bench" / "throughput.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    with capsys.disabled():
        print("\nthroughput bench: " + json.dumps(results))
    for side in (kube_results, bare_results):
        for kind in side.values():
            assert kind["sdiag"] == {"started": JOBS, "completed": JOBS, "canceled": 0, "failed": 0}, kind
