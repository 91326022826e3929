"""A real Kubernetes for the `k8s` tests: localkube (tools/localkube/localkube.sh).

The session fixture `localkube_cluster` brings the cluster up (building it on a cold
machine) and takes it down at the end unless it was already running or LOCALKUBE_KEEP=1.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from localkube_helpers import Cluster, localkube, localkube_env


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
