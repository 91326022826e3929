"""The docker tier's shared fixtures: the images, built once a session, and one cluster of
containers (docker_cluster.py) for every test file that needs it, started by the first and
stopped when the run leaves this folder (not at the session's end: the other tiers' tests run
after these in the same pytest)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Optional

import pytest
from docker_cluster import WORKERS, Cluster, built_images, root_sbatch, wait_for

HERE = Path(__file__).resolve().parent
_RUNNING: dict = {}


@pytest.fixture(scope="session")
def images() -> dict:
    return built_images()


@pytest.fixture(scope="session")
def cluster(images, tmp_path_factory) -> Iterator[Cluster]:
    c = Cluster(images, tmp_path_factory.mktemp("cluster"))
    c.prepare()
    _RUNNING["cluster"] = c
    try:
        c.start_controller()
        # Workers are told their size by the rendered env; demo-cpu-1 derives it from its cgroup limits.
        for worker in WORKERS:
            c.start_worker(worker, env_from_limits=worker == WORKERS[1])
        c.start_login()
        try:
            wait_for("every worker idle", lambda: c.idle_nodes() >= set(WORKERS), timeout=120)
        except AssertionError:
            pytest.fail("cluster did not come up:\n" + c.logs())
        yield c
    finally:
        stop_cluster()


def stop_cluster() -> None:
    c: Optional[Cluster] = _RUNNING.pop("cluster", None)
    if c is not None:
        c.destroy()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: Optional[pytest.Item]) -> None:
    """The last test of this folder done: the cluster goes now (after the test's own fixtures,
    which may still use it)."""
    if nextitem is None or HERE not in Path(str(nextitem.path)).parents:
        stop_cluster()


@pytest.fixture(scope="session")
def root_batch_jobs_run(cluster) -> None:
    """The attacks on the jail's walls pass when a root job's output never appears: first prove a
    root batch job does run and writes its output where they write theirs."""
    job = root_sbatch(cluster, "-o", "/root/control-%j.out", "--wrap", "echo ran as $(id -u)")
    out = cluster.root / "jail" / "root" / ("control-%s.out" % job)
    assert out.exists() and out.read_text() == "ran as 0\n"
