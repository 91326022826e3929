"""The fast health check and the long checks on the workers: drains with their reasons, resumes
only their own."""

from __future__ import annotations

import datetime
import re
import time

import pytest
from docker_cluster import (
    CLUSTER,
    CLUSTER_MODEL,
    CONTROLLER_POD,
    HEALTHCHECK_INTERVAL,
    NAMESPACE,
    WORKERS,
    Cluster,
    docker,
    env_args,
    job_state,
    wait_for,
)

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.render import common as render_common
from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import (
    render_health_conf,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.drain import PURPOSE_SCALE_DOWN, drain_reason

pytestmark = pytest.mark.slurm


def test_healthcheck_program_drains_on_failure_and_resumes_only_its_own_drain(cluster):
    """slurmd runs the check every HEALTHCHECK_INTERVAL seconds, with its bare environment."""
    worker = WORKERS[0]
    marker = cluster.root / "jail" / C.JAIL_MARKER_FILE
    assert cluster.exec(worker, C.HEALTHCHECK_PROGRAM, check=False).returncode == 0

    def drained(node: dict) -> bool:
        return "DRAIN" in node["state"]

    marker.rename(marker.with_suffix(".away"))
    try:
        node = wait_for(
            "slurmd's health check to drain " + worker,
            lambda: drained(cluster.node(worker)) and cluster.node(worker),
            timeout=6 * HEALTHCHECK_INTERVAL,
        )
        assert node["reason"].startswith(C.DRAIN_REASON_PREFIX + " jail not readable")
        assert cluster.exec(worker, C.HEALTHCHECK_PROGRAM, check=False).returncode == 1
    finally:
        marker.with_suffix(".away").rename(marker)
    # The jail is shared: every worker was drained, and every one comes back.
    wait_for(
        "the health check to resume every worker",
        lambda: not any(drained(cluster.node(w)) for w in WORKERS),
        timeout=6 * HEALTHCHECK_INTERVAL,
    )
    # That it leaves the drains that are not its own: test_failed_long_check_drains_and_the_fast_check_leaves_it.


def write_health_settings(cluster: Cluster, health_checks: dict) -> None:
    """What an edit of spec.healthChecks does: a new settings file in the config ConfigMap."""
    model = parse_cluster({"metadata": {"name": CLUSTER, "namespace": NAMESPACE},
                           "spec": {"healthChecks": health_checks}})  # fmt: skip
    (cluster.root / "slurm" / C.HEALTH_CONFIG_FILE).write_text(render_health_conf(model))


def test_scratch_check_drains_with_its_reason_from_the_rendered_settings_and_resumes(cluster):
    worker = WORKERS[1]
    report = cluster.exec(worker, C.HEALTHCHECK_PROGRAM, "--report", check=False)
    assert (report.returncode, report.stdout) == (0, "healthy\n"), report.stderr
    write_health_settings(cluster, {"scratchMinFreePercent": 100})  # no disk is that empty
    try:
        node = wait_for(
            "the scratch check to drain " + worker,
            lambda: "DRAIN" in cluster.node(worker)["state"] and cluster.node(worker),
            timeout=6 * HEALTHCHECK_INTERVAL,
        )
        assert node["reason"].startswith("%s scratch %s: " % (C.DRAIN_REASON_PREFIX, C.NODE_TMP_DIR))
        assert node["reason"].endswith("need 1024 MiB and 100%")
        report = cluster.exec(worker, C.HEALTHCHECK_PROGRAM, "--report", check=False)
        assert report.returncode == 1 and report.stdout.startswith("scratch %s: " % C.NODE_TMP_DIR)
        # Each check's verdict, for the exporter, in the jail: only scratch failed.
        assert health_results(cluster, worker)["scratch"] == "fail"
    finally:
        write_health_settings(cluster, {})
    wait_for("the health check to resume " + worker, lambda: "DRAIN" not in cluster.node(worker)["state"],
             timeout=6 * HEALTHCHECK_INTERVAL)  # fmt: skip

    def passed() -> dict:
        results = health_results(cluster, worker)
        return results if results.get("scratch") == "pass" else {}

    results = wait_for("a passing verdict for scratch", passed, timeout=3 * HEALTHCHECK_INTERVAL)
    assert set(results) == {"time", "munged", "slurmd", "jail", "scratch", "memory", "clock", "gpu"}, results
    assert {v for k, v in results.items() if k != "time"} == {"pass"}, results
    assert abs(int(results["time"]) - time.time()) < 10 * HEALTHCHECK_INTERVAL


def health_results(cluster: Cluster, worker: str) -> dict:
    """The fast check's last verdicts for a node, as the exporter reads them from the jail."""
    path = cluster.root / "jail" / C.HEALTH_RESULTS_DIR.lstrip("/") / worker
    return dict(line.split(" ", 1) for line in path.read_text().splitlines()) if path.exists() else {}


def run_long_checks(cluster: Cluster, *env: str) -> tuple:
    """Run the long-checks CronJob's container once: (node-check job ids, all job ids, its log).

    The container waits for the jobs and prints their per-node results, as the CronJob's pod
    does. Earlier tests drain and resume nodes; the checks go only to nodes in service, so wait
    until every worker is back.
    """
    wait_for("every worker idle", lambda: cluster.idle_nodes() >= set(WORKERS), 60)
    args = [a for e in env for a in ("-e", e)]
    rendered = env_args(render_common.env(CLUSTER_MODEL, C.ROLE_LONG_CHECKS), "long-checks")
    out = docker("run", "--rm", *cluster.common_args("long-checks")[1:], *rendered, *args,
                 cluster.images["login"], timeout=420).stdout  # fmt: skip
    submitted = re.findall(r"(long|latency) check of (\S+): job (\d+)$", out, re.MULTILINE)
    return [job for kind, node, job in submitted if kind == "long"], [s[2] for s in submitted], out


def test_long_checks_pass_on_healthy_nodes_and_report_per_node(cluster):
    # Four engineers share this machine's two cores: the test proves the checks' wiring, so
    # its thresholds only require that the benchmarks ran.
    write_health_settings(cluster, {"longChecks": {"minMemoryBandwidthMibPerSecond": 10,
                                                   "minComputeMibPerSecond": 1}})
    try:
        node_jobs, jobs, log = run_long_checks(cluster)
    finally:
        write_health_settings(cluster, {})
    assert len(node_jobs) == len(WORKERS), log
    # Three workers of one node set: pairs (0, 1) and (0, 2).
    assert len(jobs) == len(WORKERS) + 2, log
    for job in jobs:
        assert job_state(cluster, job) == "COMPLETED", log
    for worker in WORKERS:
        # One result line per node from the CPU benchmark, in the CronJob's log...
        assert re.search(r"slurmkube-result node=%s compute_mib_per_s=\S+ memory_mib_per_s=\S+ PASS$" % worker,
                         log, re.MULTILINE), log
        # ...and the job's whole output in the jail, where admins on a login node find it.
        saved = (cluster.root / "jail" / C.LONG_CHECK_RESULTS_DIR.lstrip("/") / (worker + ".log")).read_text()
        assert "slurmkube-result node=%s " % worker in saved and "passed" in saved
    assert len(re.findall(r"slurmkube-result node=\S+ latency_us=\S+ PASS$", log, re.MULTILINE)) == 2, log
    assert not any("DRAIN" in cluster.node(w)["state"] for w in WORKERS)


def test_failed_long_check_drains_and_the_fast_check_leaves_it(cluster):
    """The long check's drain, an admin's and the operator's planned one (each on a worker) all
    outlive two runs of the fast check, which passes: it resumes only the drains it made."""
    # The job inherits the submitter's environment: no CPU hashes 256 MiB in 10 ms.
    node_jobs, jobs, log = run_long_checks(cluster, "SLURMKUBE_LONG_CHECK_CPU_SECONDS=0.01",
                                           "SLURMKUBE_LONG_CHECKS_WAIT_SECONDS=120")
    try:
        for job in node_jobs:
            assert job_state(cluster, job) == "FAILED", log
        for worker in WORKERS:
            node = cluster.node(worker)
            assert "DRAIN" in node["state"]
            assert node["reason"].startswith(C.DRAIN_REASON_PREFIX + " long check: 1 CPUs did not hash")
            assert re.search(r"slurmkube-result node=%s FAIL: 1 CPUs did not hash" % worker, log), log
        # A pair's latency check waits for both node checks: cancelled when they fail.
        assert all(job_state(cluster, j) == "CANCELLED" for j in jobs if j not in node_jobs), log
        planned = drain_reason(PURPOSE_SCALE_DOWN, datetime.datetime.now(datetime.timezone.utc))
        reasons = {WORKERS[0]: "admin: bad disk", WORKERS[1]: cluster.node(WORKERS[1])["reason"], WORKERS[2]: planned}
        for worker in (WORKERS[0], WORKERS[2]):
            cluster.exec(CONTROLLER_POD, "scontrol", "update", "nodename=" + worker, "state=drain",
                         "reason=" + reasons[worker])  # fmt: skip
        time.sleep(2 * HEALTHCHECK_INTERVAL + 1)  # the fast check passes, and must not resume
        nodes = {w: cluster.node(w) for w in WORKERS}
        assert all("DRAIN" in node["state"] for node in nodes.values()), nodes
        assert {w: node["reason"] for w, node in nodes.items()} == reasons
    finally:
        for worker in WORKERS:
            cluster.exec(CONTROLLER_POD, "scontrol", "update", "nodename=" + worker, "state=resume", check=False)
