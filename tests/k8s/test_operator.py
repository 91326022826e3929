"""The operator on a real Kubernetes (localkube): a Slurm cluster made, changed, scaled and healed.

The operator runs as a local process (`kopf run`) against the real API server; the pods run
the project's images, imported into the cluster's containerd (nothing is pulled).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from localkube_helpers import REPO, Cluster, localkube, wait_for

pytestmark = pytest.mark.k8s

CLUSTER = "demo"
SLURM_IMAGES = ("controller", "worker", "login", "jail")


@pytest.fixture(scope="session")
def slurm_images(localkube_cluster: Cluster) -> dict:
    """The project's images, built (or found up to date) and imported into the cluster."""
    build = subprocess.run(["bash", str(REPO / "images" / "build.sh"), *SLURM_IMAGES], capture_output=True,
                           text=True, timeout=3600, check=False)
    assert build.returncode == 0, build.stderr[-4000:]
    refs = json.loads(build.stdout)
    for name in SLURM_IMAGES:
        localkube("import-image", refs[name])
    return refs


@pytest.fixture(scope="session")
def crds(localkube_cluster: Cluster) -> None:
    localkube_cluster.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
    for crd in ("slurmclusters.slurmkube.io", "nodesets.slurmkube.io"):
        localkube_cluster.kubectl("wait", "--for=condition=Established", "crd/" + crd, "--timeout=60s")


@pytest.fixture(scope="module")
def operator(localkube_cluster: Cluster, crds, tmp_path_factory):
    """`kopf run` of images/operator/slurmkube_operator.py, watching the test namespace only."""
    sys.path.insert(0, str(REPO / "tests"))
    from collection_path import ensure_importable

    log = tmp_path_factory.mktemp("operator") / "operator.log"
    env = dict(localkube_cluster.env, PYTHONPATH=str(ensure_importable().parents[2]))
    kopf = os.path.join(os.path.dirname(sys.executable), "kopf")
    with open(log, "w") as out:
        proc = subprocess.Popen([kopf, "run", "--standalone", "--namespace", localkube_cluster.namespace,
                                 str(REPO / "images" / "operator" / "slurmkube_operator.py")],
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    yield log
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def cluster_manifests(namespace: str, images: dict, cpu_replicas: int) -> str:
    refs = {name: images[name] for name in SLURM_IMAGES}
    small = {"cpu": "100m", "memory": "256Mi"}
    cluster = {
        "apiVersion": "slurmkube.io/v1alpha1", "kind": "SlurmCluster",
        "metadata": {"name": CLUSTER, "namespace": namespace},
        "spec": {
            "images": dict(refs, pullPolicy="Never"),
            "controller": {"resources": small, "stateVolume": {"size": "1Gi"}},
            "login": {"resources": small},
            "jail": {"size": "5Gi"},
            "partitions": [{"name": "main", "default": True}, {"name": "big", "nodeSets": ["big"]}],
        },
    }

    def nodeset(name: str, replicas: int) -> dict:
        return {"apiVersion": "slurmkube.io/v1alpha1", "kind": "NodeSet",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"clusterName": CLUSTER, "replicas": replicas, "drainTimeoutSeconds": 600,
                         "resources": {"cpu": 1, "cpuRequest": "100m", "memory": "1Gi"}}}

    return yaml.safe_dump_all([cluster, nodeset("cpu", cpu_replicas), nodeset("big", 1)])


def status(kube: Cluster) -> dict:
    return kube.get_json("slurmcluster", CLUSTER).get("status") or {}


def slurm(kube: Cluster, *argv: str) -> str:
    return kube.exec("%s-controller-0" % CLUSTER, *argv).stdout


def sinfo_nodes(kube: Cluster) -> dict:
    nodes = json.loads(slurm(kube, "scontrol", "show", "nodes", "--json"))["nodes"]
    return {n["name"]: set(n["state"]) for n in nodes}


def worker_pods(kube: Cluster, nodeset: str) -> set:
    return {p["metadata"]["name"] for p in kube.get_json("pods", "-l", "slurmkube.io/nodeset=" + nodeset)["items"]}


def pods_by_uid(kube: Cluster) -> dict:
    pods = kube.get_json("pods", "-l", "slurmkube.io/cluster=%s" % CLUSTER)["items"]
    return {p["metadata"]["name"]: (p["metadata"]["uid"], sum(c.get("restartCount", 0) for c in
                                                              p["status"].get("containerStatuses") or []))
            for p in pods if p["metadata"]["labels"].get("app.kubernetes.io/component") != "jail"}


def wait_ready(kube: Cluster, operator_log: Path, timeout: float = 600) -> dict:
    try:
        return wait_for(lambda: status(kube) if status(kube).get("phase") == "Ready" else None, timeout, 3)
    except AssertionError:
        pods = kube.kubectl("-n", kube.namespace, "get", "pods", "-o", "wide", check=False).stdout
        raise AssertionError("cluster not Ready: %s\npods:\n%s\noperator log:\n%s"
                             % (status(kube), pods, operator_log.read_text()[-6000:])) from None


@pytest.fixture(scope="module")
def slurm_cluster(localkube_cluster: Cluster, slurm_images, operator) -> Cluster:
    localkube_cluster.apply(cluster_manifests(localkube_cluster.namespace, slurm_images, 2))
    wait_ready(localkube_cluster, operator)
    return localkube_cluster


def test_cluster_with_two_nodesets_comes_up_idle(slurm_cluster: Cluster):
    current = status(slurm_cluster)
    assert current["nodes"] == {"ready": 3, "desired": 3}
    nodes = sinfo_nodes(slurm_cluster)
    assert set(nodes) == {"demo-cpu-0", "demo-cpu-1", "demo-big-0"}
    assert all("IDLE" in states and "DRAIN" not in states for states in nodes.values()), nodes
    nodeset = slurm_cluster.get_json("nodeset", "cpu")["status"]
    assert nodeset["replicas"] == 2 and nodeset["readyReplicas"] == 2


def test_partitions_are_what_the_spec_says(slurm_cluster: Cluster):
    partitions = json.loads(slurm(slurm_cluster, "scontrol", "show", "partition", "--json"))["partitions"]
    assert {p["name"]: p["node_sets"] for p in partitions} == {"main": "big,cpu", "big": "big"}
    assert {p["name"]: p["nodes"]["total"] for p in partitions} == {"main": 3, "big": 1}
    # The JSON has no default flag; the one-line form does (key=value words, not columns).
    words = dict(w.split("=", 1) for w in slurm(slurm_cluster, "scontrol", "-o", "show", "partition", "main").split()
                 if "=" in w)
    assert words["Default"] == "YES"


def test_setting_change_reaches_slurm_without_restarting_pods(slurm_cluster: Cluster):
    before = pods_by_uid(slurm_cluster)
    patch = {"spec": {"slurm": {"config": {"MinJobAge": 600}}}}
    slurm_cluster.kubectl("-n", slurm_cluster.namespace, "patch", "slurmcluster", CLUSTER, "--type=merge",
                          "-p", json.dumps(patch))
    wait_for(lambda: "MinJobAge               = 600" in slurm(slurm_cluster, "scontrol", "show", "config"),
             timeout=240, interval=5)
    assert pods_by_uid(slurm_cluster) == before


def test_scale_down_waits_for_the_running_job_and_leaves_no_ghost(slurm_cluster: Cluster, operator):
    kube = slurm_cluster
    kube.kubectl("-n", kube.namespace, "patch", "nodeset", "cpu", "--type=merge", "-p", '{"spec":{"replicas":3}}')
    wait_for(lambda: "demo-cpu-2" in sinfo_nodes(kube) and "IDLE" in sinfo_nodes(kube)["demo-cpu-2"], 180, 3)
    job = slurm(kube, "sbatch", "--parsable", "-w", "demo-cpu-2", "-o", "/tmp/scale-%j.out",
                "--wrap", "sleep 25; echo done").strip()
    wait_running(kube, job)
    kube.kubectl("-n", kube.namespace, "patch", "nodeset", "cpu", "--type=merge", "-p", '{"spec":{"replicas":1}}')
    wait_for(lambda: set(sinfo_nodes(kube)) == {"demo-cpu-0", "demo-big-0"}, 300, 3)
    history = slurm(kube, "scontrol", "show", "job", job, "--json")
    assert json.loads(history)["jobs"][0]["job_state"] == ["COMPLETED"]
    # Slurm forgot the nodes first; their pods go on the next pass, never the other way round.
    wait_for(lambda: worker_pods(kube, "cpu") == {"demo-cpu-0"}, 180, 3)
    assert set(sinfo_nodes(kube)) == {"demo-cpu-0", "demo-big-0"}
    wait_ready(kube, operator)


def wait_running(kube: Cluster, job: str, timeout: float = 90) -> None:
    try:
        wait_for(lambda: "RUNNING" in slurm(kube, "squeue", "-h", "-j", job, "-o", "%T"), timeout, 1)
    except AssertionError:
        raise AssertionError("job %s not running:\n%s\n%s" % (
            job, slurm(kube, "squeue", "-o", "%i %T %r %N"), slurm(kube, "sinfo", "-N", "-o", "%N %T %E"))) from None


def test_controller_restart_keeps_the_running_job(slurm_cluster: Cluster, operator):
    kube = slurm_cluster
    # Root jobs may not write to the worker's own root (the jail plugin makes it read-only).
    job = slurm(kube, "sbatch", "--parsable", "-o", "/tmp/restart-%j.out", "--wrap", "sleep 30").strip()
    wait_running(kube, job)
    kube.kubectl("-n", kube.namespace, "delete", "pod", "%s-controller-0" % CLUSTER, "--wait=true")
    kube.wait_pod_ready("%s-controller-0" % CLUSTER, timeout=180)
    wait_for(lambda: "COMPLETED" in slurm(kube, "scontrol", "show", "job", job), 120, 3)


def test_invalid_spec_is_reported_and_nothing_changes(slurm_cluster: Cluster):
    kube = slurm_cluster
    before = pods_by_uid(kube)
    rejected = kube.kubectl("-n", kube.namespace, "patch", "nodeset", "cpu", "--type=merge",
                            "-p", '{"spec":{"replicas":-2}}', check=False)
    assert rejected.returncode != 0 and "spec.replicas" in rejected.stderr
    kube.kubectl("-n", kube.namespace, "patch", "nodeset", "big", "--type=merge",
                 "-p", '{"spec":{"resources":{"cpu":"1500m"}}}')
    wait_for(lambda: (kube.get_json("nodeset", "big").get("status") or {}).get("phase") == "Invalid", 60, 2)
    assert "whole number of CPUs" in kube.get_json("nodeset", "big")["status"]["message"]
    time.sleep(15)
    after = pods_by_uid(kube)
    assert {k: v for k, v in after.items() if "big" not in k} == {k: v for k, v in before.items() if "big" not in k}
    kube.kubectl("-n", kube.namespace, "patch", "nodeset", "big", "--type=merge",
                 "-p", '{"spec":{"resources":{"cpu":1}}}')
