"""What the bridge's kind modules share (test_bridge.py, test_bridge_bench.py): a cluster whose
operator schedules one namespace's pods, that namespace's view, and the pods and Jobs they make."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from kube_helpers import TOOLBOX_IMAGE, Cluster, wait_for
from slurm_helpers import (
    ACCOUNTING_IMAGES,
    SLURM_IMAGES,
    TINY,
    Operator,
    SlurmView,
    running_cluster,
    tiny_cluster_spec,
    with_accounting_images,
)

ONE_CPU = {"resources": {"cpu": 1, "cpuRequest": "10m", "memory": "1Gi"}}
TWO_CPU = {"resources": {"cpu": 2, "cpuRequest": "10m", "memory": "1Gi"}}
# What a pod asks Kubernetes: half a core (Slurm counts a whole CPU), so two fit a kind node
# beside the cluster's own pods.
POD_RESOURCES = {"requests": {"cpu": "500m", "memory": "64Mi"}, "limits": {"memory": "64Mi"}}
# Next to nothing asked (Slurm still counts a whole CPU each): for tests that run many pods at once.
# The limit is higher: runc's init is charged to the container's cgroup, and under 16Mi one start in
# a couple of hundred was OOM-killed before `true` ran (CI, 2026-12-01: one of 200 pods Failed).
SMALL_POD = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}}


class Bridged:
    """The cluster and the namespace whose pods it schedules."""

    def __init__(self, kube: Cluster, slurm: SlurmView, namespace: str, operator: Operator) -> None:
        self.kube, self.slurm, self.namespace, self.operator = kube, slurm, namespace, operator

    def kubectl(self, *args: str, **kw):
        return self.kube.kubectl("-n", self.namespace, *args, **kw)

    def pod(self, name: str) -> Optional[dict]:
        found = self.kubectl("get", "pod", name, "-o", "json", check=False)
        return json.loads(found.stdout) if found.returncode == 0 else None

    def pods(self, selector: str) -> List[dict]:
        return json.loads(self.kubectl("get", "pods", "-l", selector, "-o", "json").stdout)["items"]

    def running(self, selector: str, count: int) -> Optional[List[dict]]:
        """The pods the selector finds, once there are COUNT and all of them run."""
        pods = self.pods(selector)
        return pods if len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods) else None

    def squeue(self, *args: str) -> str:
        return self.slurm.run("squeue", "-h", *args)

    def worker_host(self, slurm_node: str) -> str:
        return self.kube.get_json("pod", slurm_node)["spec"]["nodeName"]

    def explain(self, *jobs: str) -> str:
        """The bridged pods and their Events, the bridge's own Events on the cluster and the
        operator's last words, Slurm's view, and JOBS as slurmctld holds them."""
        pods = self.kubectl("get", "pods", "-o", "wide", "--show-labels", check=False).stdout
        events = self.kubectl("get", "events", "--sort-by=.lastTimestamp", check=False).stdout[-3000:]
        bridge_events = self.kube.kubectl("-n", self.kube.namespace, "get", "events", "--sort-by=.lastTimestamp",
                                          "--field-selector=involvedObject.kind=SlurmCluster",
                                          check=False).stdout[-2000:]
        records = "".join(self.kube.exec("%s-controller-0" % self.slurm.cluster, "scontrol", "show", "job", job,
                                         check=False).stdout for job in jobs)
        return "bridged pods:\n%s\nevents:\n%s\nthe cluster's events:\n%s\noperator:\n%s\n%s\n%s" % (
            pods, events, bridge_events, self.operator.logs(tail=40), records, self.slurm.explain())


def parallel_job(namespace: str, name: str, command: str, annotations: Dict[str, str]) -> dict:
    """A Kubernetes Job of two pods that run at once (one gang, one Slurm job)."""
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
            "spec": {"parallelism": 2, "completions": 2, "backoffLimit": 0, "template": {
                "metadata": {"annotations": annotations},
                "spec": bare_pod(namespace, "x", command, {})["spec"]}}}


def bare_pod(namespace: str, name: str, command: str, annotations: Dict[str, str],
             resources: Optional[Mapping[str, Any]] = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": TOOLBOX_IMAGE, "imagePullPolicy": "Never",
                                     "command": ["sh", "-c", command],
                                     "resources": dict(resources or POD_RESOURCES)}]}}


# The bridge's cycles run their squeue, sbatch and completions in the controller pod, under its CPU
# limit: at TINY's tenth of a core, the latency bench's 100 sbatch took 26 s (0.9 s on the same
# machine unthrottled, tests/bench/bridge_submit.json). A whole core as the limit, little asked.
BRIDGE_CONTROLLER = {"cpu": "1", "cpuRequest": "10m", "memory": "256Mi"}


@contextlib.contextmanager
def bridged_cluster(kube: Cluster, slurm_images: dict, operator: Operator, workdir: Path, name: str,
                    partitions: Sequence[Mapping[str, Any]], nodesets: Sequence[Tuple[Any, ...]],
                    account: str, suffix: str = "ml") -> Iterator[Bridged]:
    """A cluster NAME with accounting (slurmdbd and MariaDB) whose operator schedules the pods of
    namespace <kube's>-SUFFIX, which may charge ACCOUNT (root has an association with it). Each
    module its own SUFFIX: a namespace deleted by the one before may still be terminating."""
    namespace = "%s-%s" % (kube.namespace, suffix)
    kube.kubectl("create", "namespace", namespace)
    operator.install(workdir, [kube.namespace], bridge_namespaces=[namespace])
    images = with_accounting_images(slurm_images)
    spec = dict(tiny_cluster_spec(), partitions=list(partitions),
                bridge={"namespaces": [namespace], "accounts": [{"namespace": namespace, "accounts": [account]}]},
                accounting={"enabled": True, "resources": TINY,
                            "database": {"resources": dict(TINY, memory="512Mi"), "storage": {"size": "1Gi"}}})
    spec["images"] = dict({n: images[n] for n in (*SLURM_IMAGES, *ACCOUNTING_IMAGES)}, pullPolicy="Never")
    spec["controller"] = dict(spec["controller"], resources=BRIDGE_CONTROLLER)
    try:
        with running_cluster(kube, operator, name, images, spec, nodesets) as view:
            wait_for(lambda: name in view.run("sacctmgr", "-n", "-P", "list", "cluster", "format=Cluster").split(),
                     180, 2)
            view.run("sacctmgr", "-i", "add", "account", account)
            view.run("sacctmgr", "-i", "add", "user", "root", "Account=" + account)
            wait_for(lambda: account in view.run("scontrol", "show", "assoc_mgr", "flags=assoc", "accounts=" + account),
                     60, 2)
            yield Bridged(kube, view, namespace, operator)
    finally:
        # The operator keeps the bridge namespace it was given (no reinstall: a minute of CI): with
        # the namespace gone, its policy binding matches no pod, and a later install replaces it.
        kube.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
