"""Slurm clusters on the test kind cluster for the k8s tests: manifests, readiness, and reading Slurm's JSON."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import yaml
from kube_helpers import REPO, Cluster, load_images, wait_for
from playbook_runner import run_module

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.operator import telemetry
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_cluster import is_ready

SLURM_IMAGES = ("controller", "worker", "login", "jail")
# The spec.images keys whose image, in the test clusters, is another build (images/build.sh names
# the rest as the keys). The test clusters' jail is the core one
# (Slurm's clients, the plugin, Python, curl: test_accounting's REST clients run it): a fifth of the
# full jail's size, so each cluster's populate Job copies ~0.3 GB instead of 1.3 GB (65 s in a cold
# CI run, for every cluster) and the session clusters' nodes import that much less. What the full
# jail holds is proven where jobs use it: test_slurm_jobs (MPI built and run in it), test_quickstart
# (site.yml's default images) and tests/images (the docker tier).
BUILT_AS = {"jail": "jail-core"}
ACCOUNTING_IMAGES = ("slurmdbd", "mariadb")
SMALL = {"cpu": "100m", "memory": "256Mi"}
# The local cluster's two cores are shared by every test cluster: ask the scheduler for little.
TINY = {"cpu": "100m", "cpuRequest": "10m", "memory": "256Mi"}
TINY_NODES = {"resources": {"cpu": 1, "cpuRequest": "10m", "memory": "1Gi"}}
OPERATOR_LABEL = "%s=%s" % (C.LABEL_NAME, C.OPERATOR_NAME)
PASSES_METRIC = telemetry.PASSES.name + "_total"  # prometheus-client's name for a counter's samples


# Slurm holds a requeued job until its old step credential has expired (AuthInfo cred_expire,
# 120 s by default). The test clusters requeue often (pod loss, drains, evictions) and use 30 s:
# the same behaviour, a shorter wait.
QUICK_REQUEUE = {"AuthInfo": "cred_expire=30"}


def tiny_cluster_spec() -> dict:
    """A controller asking for little and no login node, for tests that never log in."""
    return {"controller": {"resources": TINY, "stateVolume": {"size": "1Gi"}},
            "login": {"replicas": 0, "resources": TINY}, "slurm": {"config": dict(QUICK_REQUEUE)}}


def nodeset_manifest(namespace: str, cluster: str, name: str, replicas: int, spec: Optional[Mapping] = None) -> dict:
    """A NodeSet of 1-CPU nodes that ask the scheduler for a tenth of a core each."""
    return {"apiVersion": "slurmkube.io/v1alpha1", "kind": "NodeSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterName": cluster, "replicas": replicas, "drainTimeoutSeconds": 600,
                     "resources": {"cpu": 1, "cpuRequest": "100m", "memory": "1Gi"}, **(spec or {})}}


def cluster_manifest(namespace: str, name: str, images: Mapping[str, str], spec: Optional[Mapping] = None) -> dict:
    """A small SlurmCluster running the project's imported images."""
    return {
        "apiVersion": "slurmkube.io/v1alpha1", "kind": "SlurmCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "images": dict({n: images[n] for n in SLURM_IMAGES}, pullPolicy="Never"),
            "controller": {"resources": SMALL, "stateVolume": {"size": "1Gi"}},
            "login": {"resources": SMALL},
            "jail": {"size": "5Gi"},
            **(spec or {}),
        },
    }


def manifests(*objects: dict) -> str:
    return yaml.safe_dump_all(list(objects))


@dataclass
class Operator:
    """The operator Deployment the tests run (in-cluster, from the project's image)."""

    kube: Cluster
    namespace: str
    image: str

    def install(self, workdir: Path, watch_namespaces: Sequence[str], bridge_namespaces: Sequence[str] = ()) -> None:
        """Install or change it as users do (the slurm_operator module): two replicas electing a
        leader, watching these namespaces, scheduling the pods of BRIDGE_NAMESPACES; returns once a
        leader holds the lease."""
        workdir.mkdir(parents=True, exist_ok=True)
        proc, result = run_module(workdir, "slurm_operator", {
            "namespace": self.namespace, "watch_namespaces": list(watch_namespaces),
            "bridge_namespaces": list(bridge_namespaces), "image": self.image,
            "image_pull_policy": "Never", "replicas": 2, "wait_timeout": 300, "kubeconfig": self.kube.env["KUBECONFIG"],
        }, env=self.kube.env)
        assert result is not None, proc.stdout[-4000:]
        wait_for(self.leader, 60, 2)

    def pods(self) -> Dict[str, dict]:
        items = self.kube.get_json("pods", "-l", OPERATOR_LABEL)["items"]
        return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}

    def leader(self) -> str:
        lease = self.kube.get_json("lease", C.OPERATOR_NAME)
        return lease["spec"].get("holderIdentity") or ""

    def passes(self, namespace: str, cluster: str) -> Tuple[str, float]:
        """The leader, and how many reconcile passes of the cluster it has counted (its metric,
        served per process: a new leader counts from 0). A pass is counted once its applies and
        node steps are done, before its Events and status are written."""
        leader = self.leader()
        metrics = self.kube.kubectl("get", "--raw", "/api/v1/namespaces/%s/pods/%s:%d/proxy/metrics"
                                    % (self.namespace, leader, C.OPERATOR_METRICS_PORT), check=False).stdout
        having = ('slurmkube_namespace="%s"' % namespace, 'slurmkube_cluster="%s"' % cluster)
        return leader, sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                           if line.startswith(PASSES_METRIC + "{") and all(label in line for label in having))

    def wait_passes(self, namespace: str, cluster: str, since: Tuple[str, float], count: int,
                    timeout: float = 180) -> None:
        """Until the leader has counted COUNT passes of the cluster after SINCE (what passes()
        said then); a new leader's passes all count."""
        def counted() -> bool:
            leader, now = self.passes(namespace, cluster)
            return bool(leader) and now - (since[1] if leader == since[0] else 0) >= count

        wait_for(counted, timeout, 2, what="%d reconcile passes of %s/%s" % (count, namespace, cluster))

    def scale(self, replicas: int) -> None:
        """Run this many replicas; with any, return once one of them leads."""
        self.kube.kubectl("-n", self.namespace, "scale", "deployment", C.OPERATOR_NAME, "--replicas=%d" % replicas)
        wait_for(lambda: len(self.pods()) == replicas, 180, 2)
        if replicas:
            wait_for(lambda: self.leader() in self.pods(), 120, 2)

    def logs(self, tail: int = 200) -> str:
        return self.kube.kubectl("-n", self.namespace, "logs", "-l", OPERATOR_LABEL, "--prefix",
                                 "--tail=%d" % tail, check=False).stdout

    def keep_logs(self, cluster: str) -> None:
        """What the operator said while CLUSTER lived, for whoever reads a failed run later: the
        session's log at its end has only the pods then running, and a lane's modules share one
        operator whose pods some tests replace."""
        logs = Path(os.environ.get("SLURMKUBE_CACHE", "/var/cache/slurmkube")) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        (logs / ("operator-%s-%s.log" % (self.namespace, cluster))).write_text(self.logs(tail=20000))


def in_service(states: set) -> bool:
    """Idle and nothing wrong (dynamic nodes also carry DYNAMIC_NORM)."""
    return "IDLE" in states and not states & {"DRAIN", "DOWN", "NOT_RESPONDING", "FAIL"}


class SlurmView:
    """One cluster's Slurm, read through its controller pod."""

    def __init__(self, kube: Cluster, cluster: str) -> None:
        self.kube, self.cluster = kube, cluster

    def run(self, *argv: str) -> str:
        return self.kube.exec("%s-controller-0" % self.cluster, *argv).stdout

    def nodes(self) -> Dict[str, set]:
        nodes = json.loads(self.run("scontrol", "show", "nodes", "--json"))["nodes"]
        return {n["name"]: set(n["state"]) for n in nodes}

    def job(self, job: str) -> Optional[Dict[str, Any]]:
        """The job as slurmctld reports it; None when the answer holds no job. A controller that
        has just restarted may not be reachable through its Service yet, and `scontrol show job
        --json` then prints an empty list and still exits 0 (24.11.5, measured; `show nodes` and
        `squeue` exit 1): a test waiting for a state asks again."""
        jobs = json.loads(self.run("scontrol", "show", "job", job, "--json")).get("jobs") or []
        return jobs[0] if jobs else None

    def job_state(self, job: str) -> str:
        found = self.job(job)
        return found["job_state"][0] if found else ""

    def switches(self) -> Dict[str, Tuple[frozenset, str]]:
        """`scontrol show topology` as switch -> (the nodes Slurm placed under it, its child switches).
        Key=value words, not columns; Nodes is a hostlist. The whole tree: since 26.05 the word
        after `show topology` names a topology (topology.yaml), not a switch."""
        switches = {}
        for line in self.run("scontrol", "show", "topology").splitlines():
            words = dict(w.split("=", 1) for w in line.split() if "=" in w)
            if "SwitchName" in words:
                nodes = self.run("scontrol", "show", "hostnames", words["Nodes"]).split() if words.get("Nodes") else []
                switches[words["SwitchName"]] = (frozenset(nodes), words.get("Switches", ""))
        return switches

    def explain(self) -> str:
        """Nodes, jobs, worker pods and slurmctld's last words as they are now (for timeout
        messages: a job stuck in a state is explained by what slurmctld logged about it)."""
        ns = self.kube.namespace
        pods = self.kube.kubectl("-n", ns, "get", "pods", "-o", "wide",
                                 "-l", "slurmkube.io/cluster=" + self.cluster, check=False).stdout
        logged = self.kube.kubectl("-n", ns, "logs", "%s-controller-0" % self.cluster, "--tail=40", check=False).stdout
        return "sinfo:\n%s\nsqueue:\n%s\npods:\n%s\ncontroller log:\n%s" % (
            self.run("sinfo", "-N", "-o", "%N %T %E"), self.run("squeue", "-o", "%i %T %r %N"), pods, logged)

    def wait_running(self, job: str, timeout: float = 90) -> None:
        wait_for(lambda: self.job_state(job) == "RUNNING", timeout, 1, explain=self.explain)


OUR_MANAGERS = ("slurmkube", "kopf")


def our_writes(kube: Cluster, cluster: str) -> Dict[str, str]:
    """Per object of a cluster (its SlurmCluster, NodeSets and what it owns), the last time a field
    manager of ours changed it: managedFields record writes that changed something, and a
    status write or an apply that changes nothing leaves them as they were."""
    owned = kube.get_json("statefulset,service,configmap,secret,pdb,networkpolicy,cronjob,serviceaccount",
                          "-l", "slurmkube.io/cluster=" + cluster, "--show-managed-fields")["items"]
    mine = [o for o in kube.get_json("slurmcluster,nodeset", "--show-managed-fields")["items"]
            if o["metadata"]["name"] == cluster or (o.get("spec") or {}).get("clusterName") == cluster]
    out = {}
    for obj in owned + mine:
        times = [m.get("time", "") for m in obj["metadata"].get("managedFields") or []
                 if m.get("manager") in OUR_MANAGERS]
        out["%s/%s" % (obj["kind"], obj["metadata"]["name"])] = max(times, default="")
    return out


def kopf_retries_pending(kube: Cluster, cluster: str) -> Dict[str, str]:
    """The cluster's objects on which a kopf handler failed and waits for its retry (kopf keeps
    that progress as a JSON annotation with a retry count, and clears it when the retry is done,
    up to a minute later: a write, though the cluster did not change)."""
    objs = [o for o in kube.get_json("slurmcluster,nodeset")["items"]
            if o["metadata"]["name"] == cluster or (o.get("spec") or {}).get("clusterName") == cluster]
    pending = {}
    for obj in objs:
        for key, value in (obj["metadata"].get("annotations") or {}).items():
            try:
                record = json.loads(value)
            except ValueError:
                continue
            if isinstance(record, dict) and "retries" in record and not record.get("success"):
                pending["%s/%s" % (obj["kind"], obj["metadata"]["name"])] = "%s: %s" % (key, record.get("message"))
    return pending


def cluster_status(kube: Cluster, name: str) -> dict:
    return kube.get_json("slurmcluster", name).get("status") or {}


def wait_ready(kube: Cluster, name: str, operator: Operator, timeout: float = 600) -> dict:
    """The cluster's status once Ready for its latest spec (the modules' own predicate); on
    timeout, what the pods and the operator said."""
    def ready() -> Optional[dict]:
        obj = kube.get_json("slurmcluster", name)
        return obj.get("status") if is_ready(obj) else None

    def explain() -> str:
        pods = kube.kubectl("-n", kube.namespace, "get", "pods", "-o", "wide", check=False).stdout
        return "cluster %s: %s\npods:\n%s\noperator log:\n%s" % (
            name, cluster_status(kube, name), pods, operator.logs()[-6000:])

    return wait_for(ready, timeout, 3, explain=explain)


@contextlib.contextmanager
def running_cluster(kube: Cluster, operator: Operator, name: str, images: Mapping[str, str],
                    spec: Optional[Mapping] = None, nodesets: Sequence[Tuple[Any, ...]] = (),
                    ready_timeout: float = 600, delete_timeout: float = 180) -> Iterator[SlurmView]:
    """The test modules' one cluster fixture: a SlurmCluster and its NodeSets ((name, replicas[,
    spec]) each) applied and Ready; when the block ends the cluster is deleted, then every NodeSet
    of it (those its tests added too)."""
    kube.apply(manifests(cluster_manifest(kube.namespace, name, images, spec),
                         *(nodeset_manifest(kube.namespace, name, *nodeset) for nodeset in nodesets)))
    wait_ready(kube, name, operator, timeout=ready_timeout)
    try:
        yield SlurmView(kube, name)
    finally:
        operator.keep_logs(name)
        kube.kubectl("-n", kube.namespace, "delete", "slurmcluster", name, "--wait=true", check=False,
                     timeout=delete_timeout)
        mine = [n["metadata"]["name"] for n in (kube.find_json("nodesets") or {}).get("items", [])
                if (n.get("spec") or {}).get("clusterName") == name]
        if mine:
            kube.kubectl("-n", kube.namespace, "delete", "nodeset", *mine, "--wait=true", check=False,
                         timeout=delete_timeout)


def built_images(*names: str) -> Dict[str, str]:
    """NAMES built by images/build.sh (or found up to date), imported into the cluster."""
    build = subprocess.run(["bash", str(REPO / "images" / "build.sh"), *names], capture_output=True,
                           text=True, timeout=3600, check=False)
    assert build.returncode == 0, build.stderr[-4000:]
    refs = json.loads(build.stdout)
    load_images(*(refs[name] for name in names))
    return {name: refs[name] for name in names}


def built_cluster_images(*names: str) -> Dict[str, str]:
    """The images of spec.images keys NAMES, built as BUILT_AS says (by built_images), by those keys."""
    built = built_images(*(BUILT_AS.get(name, name) for name in names))
    return {name: built[BUILT_AS.get(name, name)] for name in names}


def with_accounting_images(slurm_images: Mapping[str, str]) -> Dict[str, str]:
    """The Slurm images and slurmdbd's and MariaDB's, built or found up to date, imported into the cluster."""
    return {**slurm_images, **built_images(*ACCOUNTING_IMAGES)}


# What slurmctld logs as control passes between controllers, and as it loads or saves state.
HANDOVER_WORDS = ("REQUEST_CONTROL", "REQUEST_TAKEOVER", "taking over", "Running as primary", "background mode",
                  "Recovered information", "Saving all slurm state", "Old state possible", "send/recv",
                  "relinquish", "Terminate signal", "slurmkube-controller-stop", "slurmkube-entrypoint",
                  "job state", "Purged", "version", "error:", "fatal:")


def controller_log(kube: Cluster, pod: str) -> str:
    """The slurmctld container's log of controller POD, as far as it is kept: its container's
    before the last restart first (a primary that starts stops a serving backup, whose container
    starts again)."""
    return "".join(kube.kubectl("-n", kube.namespace, "logs", pod, "-c", C.CONTAINER_CONTROLLER, *previous,
                                check=False).stdout for previous in (["--previous"], []))


@contextlib.contextmanager
def log_followed(kube: Cluster, pod: str) -> Iterator[Callable[[], str]]:
    """POD's slurmctld log as it grows, until the pod ends (a replaced pod's log is gone once it
    is); yields what reads it so far."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "log"
        with path.open("w") as out:
            proc = subprocess.Popen(["kubectl", "-n", kube.namespace, "logs", "-f", pod, "-c",
                                     C.CONTAINER_CONTROLLER], env=kube.env, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield path.read_text
        finally:
            proc.kill()
            proc.wait(timeout=30)


def container_id(kube: Cluster, pod: str) -> str:
    """The ID of POD's slurmctld container now ("" while there is no pod or it has none yet)."""
    path = '{.status.containerStatuses[?(@.name=="%s")].containerID}' % C.CONTAINER_CONTROLLER
    return kube.kubectl("-n", kube.namespace, "get", "pod", pod, "-o", "jsonpath=" + path, check=False).stdout.strip()


def follow_containers(kube: Cluster, pod: str, out, stop: threading.Event) -> None:
    """Streams each slurmctld container POD runs to OUT, one after the other, until STOP."""
    followed = set()
    while not stop.is_set():
        found = container_id(kube, pod)
        if not found or found in followed:
            stop.wait(1)
            continue
        followed.add(found)
        proc = subprocess.Popen(["kubectl", "-n", kube.namespace, "logs", "-f", pod, "-c", C.CONTAINER_CONTROLLER],
                                env=kube.env, stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
        while proc.poll() is None and not stop.wait(0.5):
            pass
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


@contextlib.contextmanager
def logs_followed(kube: Cluster, pod: str) -> Iterator[Callable[[], str]]:
    """The log of every slurmctld container POD runs from now on (there may be no such pod yet),
    each streamed as it grows: a restarted container's log is kept only until the next restart,
    and a CI run found a backup's, stopped by the new primary, gone minutes later. Yields what
    reads it so far."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "log"
        stop = threading.Event()
        with path.open("w") as out:
            follower = threading.Thread(target=follow_containers, args=(kube, pod, out, stop), daemon=True)
            follower.start()
            try:
                yield path.read_text
            finally:
                stop.set()
                follower.join(timeout=60)


def handover_story(logs: Dict[str, str], jobs: Tuple[str, ...], most: int = 150) -> str:
    """For a lost job: each controller's lines about control, state, errors and JOBS (its last
    MOST such lines)."""
    about_jobs = re.compile(r"JobId=(%s)\b" % "|".join(map(re.escape, jobs)))

    def told(log: str) -> List[str]:
        return [line for line in log.splitlines()
                if about_jobs.search(line) or any(word in line for word in HANDOVER_WORDS)][-most:]

    return "\n".join("--- %s\n%s" % (name, "\n".join(told(log))) for name, log in logs.items())
