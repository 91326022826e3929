"""A real Kubernetes for the `k8s` tests: one kind cluster (tools/kind/kind.sh), KIND_TEST_CLUSTER.

The session fixture `kube_cluster` brings it up (building the node image on a cold machine)
and deletes it at the end unless it was already running or SLURMKUBE_TEST_KEEP=1.
`slurm_images`, `crds` and `operator` give a test module what it needs to run Slurm
clusters in the session's namespace (see slurm_helpers.py for manifests and readers).
Modules marked `kind` make kind clusters of their own.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kube_helpers import KIND_TEST_CLUSTER, REPO, Cluster, kind, up_kind
from playbook_runner import run_module
from slurm_helpers import SLURM_IMAGES, Operator, built_cluster_images


def pytest_collection_modifyitems(items: list) -> None:
    """Tests that need no Kubernetes first: in CI's second process they run while the first kind
    cluster waits for its node image (cold, for the Kubernetes build). Then the modules that make
    kind clusters of their own, and the tests on the session's cluster last: it stays up to the
    session's end, and beside the other modules' clusters (quickstart's) it took CPU from them on a
    two-core machine. Modules marked either_lane at the very end, the longest first (its marker's
    `seconds`, as a loaded lane took it): whichever process gets there first runs one, and the
    short ones last even out where the two processes end."""
    def rank(item: pytest.Item) -> Tuple[int, int]:
        if not item.get_closest_marker("k8s"):
            return 0, 0
        if item.get_closest_marker("kind"):
            return 1, 0
        either = item.get_closest_marker("either_lane")
        return (3, -int(either.kwargs.get("seconds", 0))) if either else (2, 0)

    items.sort(key=rank)


@pytest.fixture(scope="session")
def kube_cluster() -> Cluster:
    if os.geteuid() != 0:
        pytest.skip("kind here needs root")
    was_running, env = up_kind()
    namespace = f"k8s-test-{uuid.uuid4().hex[:6]}"
    cluster = Cluster(env=env, namespace=namespace)
    cluster.kubectl("create", "namespace", namespace)
    yield cluster
    cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    if not was_running and os.environ.get("SLURMKUBE_TEST_KEEP") != "1":
        kind("down", KIND_TEST_CLUSTER, check=False)


@pytest.fixture(scope="session")
def slurm_images(kube_cluster: Cluster) -> dict:
    """The project's images (Slurm and operator), built or found up to date, imported into the
    cluster; "jail" is the core jail (BUILT_AS)."""
    return built_cluster_images(*SLURM_IMAGES, "operator")


@pytest.fixture(scope="session")
def crds(kube_cluster: Cluster) -> None:
    kube_cluster.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
    for crd in ("slurmclusters.slurmkube.io", "nodesets.slurmkube.io"):
        kube_cluster.wait_crd_established(crd)


@pytest.fixture(scope="session")
def operator(kube_cluster: Cluster, slurm_images: dict, tmp_path_factory) -> Operator:
    """The operator as users run it: installed by the slurm_operator module, two replicas electing a leader.

    It lives in the test namespace and watches only that one, so tests running beside other
    sessions never share an operator.
    """
    namespace = kube_cluster.namespace
    running = Operator(kube_cluster, namespace, slurm_images["operator"])
    running.install(tmp_path_factory.mktemp("operator"), [namespace])
    yield running
    # What the operator said, for whoever reads a failed run later.
    logs = Path(os.environ.get("SLURMKUBE_CACHE", "/var/cache/slurmkube")) / "logs" / ("operator-%s.log" % namespace)
    logs.parent.mkdir(parents=True, exist_ok=True)
    logs.write_text(running.logs(tail=20000))
    # Cluster-wide grants are named per namespace: remove ours with the namespace.
    run_module(tmp_path_factory.mktemp("operator-absent"), "slurm_operator", {
        "namespace": namespace, "state": "absent", "kubeconfig": kube_cluster.env["KUBECONFIG"],
    }, env=kube_cluster.env)
