"""A real Kubernetes for the `k8s` tests: localkube (tools/localkube/localkube.sh).

The session fixture `localkube_cluster` brings the cluster up (building it on a cold
machine) and takes it down at the end unless it was already running or LOCALKUBE_KEEP=1.
`slurm_images`, `crds` and `operator` give a test module what it needs to run Slurm
clusters in the session's namespace (see slurm_helpers.py for manifests and readers).

tests/run runs the localkube tests in two pytest processes on one cluster, each in a namespace
of its own with an operator of its own. Every test holds a shared lock on the cluster while it
runs; a test marked `whole_cluster` (it changes what every namespace sees, e.g. cordons the only
node) holds it alone.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from localkube_helpers import REPO, Cluster, localkube, localkube_env
from playbook_runner import run_module
from slurm_helpers import SLURM_IMAGES, Operator


def pytest_collection_modifyitems(items: list) -> None:
    """test_localkube.py first: it takes the cluster down and up again, which would wipe the
    session's operator and imported images under any module that ran before it."""
    first = ("test_localkube.py",)
    items.sort(key=lambda item: first.index(item.path.name) if item.path.name in first else len(first))


# Beside the cluster's state, so every process testing this cluster finds the same file.
SHARE_LOCK = Path(os.environ.get("SLURMKUBE_CACHE", "/var/cache/slurmkube")) / "localkube" / "tests.lock"


@pytest.fixture(autouse=True)
def localkube_share(request: pytest.FixtureRequest):
    """The lock of the module docstring, for every test on localkube (its module fixtures are
    made outside it: a cordon only keeps their pods Pending a while, within their waits)."""
    if "localkube_cluster" not in request.fixturenames:
        yield
        return
    SHARE_LOCK.parent.mkdir(parents=True, exist_ok=True)
    alone = request.node.get_closest_marker("whole_cluster") is not None
    with SHARE_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        yield


@pytest.fixture(scope="session")
def localkube_cluster() -> Cluster:
    if os.geteuid() != 0:
        pytest.skip("localkube needs root")
    was_running = localkube("status", check=False).returncode == 0
    up = localkube("up", check=False)
    if up.returncode != 0:
        pytest.fail(f"localkube up failed:\n{up.stderr[-4000:]}")
    env = localkube_env()
    namespace = f"lk-test-{uuid.uuid4().hex[:6]}"
    cluster = Cluster(env=env, namespace=namespace)
    cluster.kubectl("create", "namespace", namespace)
    yield cluster
    cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    if not was_running and os.environ.get("LOCALKUBE_KEEP") != "1":
        localkube("down", check=False)


@pytest.fixture(scope="session")
def slurm_images(localkube_cluster: Cluster) -> dict:
    """The project's images (Slurm and operator), built or found up to date, imported into the cluster."""
    wanted = (*SLURM_IMAGES, "operator")
    build = subprocess.run(["bash", str(REPO / "images" / "build.sh"), *wanted], capture_output=True,
                           text=True, timeout=3600, check=False)
    assert build.returncode == 0, build.stderr[-4000:]
    refs = json.loads(build.stdout)
    for name in wanted:
        localkube("import-image", refs[name])
    return refs


@pytest.fixture(scope="session")
def crds(localkube_cluster: Cluster) -> None:
    localkube_cluster.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
    for crd in ("slurmclusters.slurmkube.io", "nodesets.slurmkube.io"):
        localkube_cluster.wait_crd_established(crd)


@pytest.fixture(scope="session")
def operator(localkube_cluster: Cluster, slurm_images: dict, tmp_path_factory) -> Operator:
    """The operator as users run it: installed by the slurm_operator module, two replicas electing a leader.

    It lives in the test namespace and watches only that one, so tests running beside other
    sessions never share an operator.
    """
    namespace = localkube_cluster.namespace
    running = Operator(localkube_cluster, namespace, slurm_images["operator"])
    running.install(tmp_path_factory.mktemp("operator"), [namespace])
    yield running
    # What the operator said, for whoever reads a failed run later.
    logs = Path(os.environ.get("SLURMKUBE_CACHE", "/var/cache/slurmkube")) / "logs" / ("operator-%s.log" % namespace)
    logs.parent.mkdir(parents=True, exist_ok=True)
    logs.write_text(running.logs(tail=20000))
    # Cluster-wide grants are named per namespace: remove ours with the namespace.
    run_module(tmp_path_factory.mktemp("operator-absent"), "slurm_operator", {
        "namespace": namespace, "state": "absent", "kubeconfig": localkube_cluster.env["KUBECONFIG"],
    }, env=localkube_cluster.env)
