"""The modules against a real API server: changed, idempotent, check mode, diff, failures before writes."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest
from localkube_helpers import REPO, Cluster

sys.path.insert(0, str(REPO / "tests"))
from playbook_runner import run_module

pytestmark = pytest.mark.k8s


@pytest.fixture(scope="module")
def kube(localkube_cluster: Cluster) -> Cluster:
    localkube_cluster.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
    for crd in ("slurmclusters.slurmkube.io", "nodesets.slurmkube.io"):
        localkube_cluster.kubectl("wait", "--for=condition=Established", "crd/" + crd, "--timeout=60s")
    return localkube_cluster


def module(kube: Cluster, tmp_path: Path, name: str, args: dict, *flags: str):
    full = dict(args, namespace=kube.namespace, kubeconfig=kube.env["KUBECONFIG"])
    return run_module(tmp_path, name, full, *flags, env=kube.env)


def test_munge_key_created_once_never_shown(kube: Cluster, tmp_path: Path):
    proc, first = module(kube, tmp_path, "munge_key", {"cluster": "mk"}, "-vvv")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert first["changed"] is True and first["fingerprint"].startswith("sha256:")
    secret = kube.get_json("secret", "mk-munge-key")
    key = secret["data"]["munge.key"]
    assert key not in proc.stdout + proc.stderr
    assert len(base64.b64decode(key)) == 1024
    again = module(kube, tmp_path, "munge_key", {"cluster": "mk"})[1]
    assert again["changed"] is False and again["fingerprint"] == first["fingerprint"]


def test_munge_key_import_is_checked_and_hidden(kube: Cluster, tmp_path: Path):
    short = base64.b64encode(b"k" * 16).decode()
    proc, result = module(kube, tmp_path, "munge_key", {"cluster": "short", "content": short})
    assert result is None and "32 to 1024 bytes, got 16" in proc.stdout
    assert kube.kubectl("-n", kube.namespace, "get", "secret", "short-munge-key", check=False).returncode != 0
    good = base64.b64encode(b"s" * 64).decode()
    proc, result = module(kube, tmp_path, "munge_key", {"cluster": "imported", "content": good}, "-vvv")
    assert result["changed"] is True and good not in proc.stdout + proc.stderr


def cluster_args(replicas: int) -> dict:
    return {"name": "mod", "wait": False, "spec": {"login": {"replicas": 0}},
            "node_sets": [{"name": "cpu", "spec": {"replicas": replicas, "resources": {"cpu": 1, "memory": "1Gi"}}}]}


def test_slurm_cluster_changed_then_idempotent_check_and_diff(kube: Cluster, tmp_path: Path):
    proc, result = module(kube, tmp_path, "slurm_cluster", cluster_args(2), "--check")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert result["changed"] is True
    assert kube.kubectl("-n", kube.namespace, "get", "slurmcluster", "mod", check=False).returncode != 0
    proc, result = module(kube, tmp_path, "slurm_cluster", cluster_args(2))
    assert result["changed"] is True
    assert kube.get_json("nodeset", "cpu")["spec"]["clusterName"] == "mod"
    proc, result = module(kube, tmp_path, "slurm_cluster", cluster_args(2))
    assert result["changed"] is False
    proc, result = module(kube, tmp_path, "slurm_cluster", cluster_args(5), "--check", "--diff")
    assert result["changed"] is True and "replicas" in proc.stdout
    assert kube.get_json("nodeset", "cpu")["spec"]["replicas"] == 2


@pytest.mark.parametrize(("spec", "message"), [
    ({"replicas": -1, "resources": {"cpu": 1}}, "spec.replicas: must be at least 0, got -1"),
    ({"replicas": 1, "resources": {"cpu": 1, "memory": "lots"}},
     "spec.resources.memory: must be a Kubernetes quantity"),
])
def test_slurm_cluster_bad_options_fail_before_writing(kube: Cluster, tmp_path: Path, spec, message):
    args = {"name": "bad", "wait": False, "node_sets": [{"name": "badset", "spec": spec}]}
    proc, result = module(kube, tmp_path, "slurm_cluster", args)
    assert result is None and message in proc.stdout
    assert kube.kubectl("-n", kube.namespace, "get", "nodeset", "badset", check=False).returncode != 0


def test_slurm_cluster_absent_keeps_nothing_but_says_so(kube: Cluster, tmp_path: Path):
    module(kube, tmp_path, "slurm_cluster", cluster_args(1))
    result = module(kube, tmp_path, "slurm_cluster", {"name": "mod", "state": "absent"})[1]
    assert result["changed"] is True
    names = json.loads(kube.kubectl("-n", kube.namespace, "get", "nodesets", "-o", "json").stdout)["items"]
    assert not [n for n in names if n["spec"]["clusterName"] == "mod"]
