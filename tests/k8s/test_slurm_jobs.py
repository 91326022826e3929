"""Jobs on an operator-made cluster behave as on bare metal: held to the CPUs and memory they
were given, sharing nodes, accounted while they run, and leaving nothing behind.

One small cluster for the module: a controller and two 2-CPU workers (they ask the scheduler
for a tenth of a core each; Slurm sees their limits).
"""

from __future__ import annotations

import re

import pytest
from localkube_helpers import Cluster, wait_for
from slurm_helpers import (
    Operator,
    SlurmView,
    cluster_manifest,
    manifests,
    nodeset_manifest,
    tiny_cluster_spec,
    wait_ready,
)

from ansible_collections.slurmkube.core.plugins.module_utils.model.spec import (
    parse_nodeset,
    slurm_cpus,
    slurm_job_memory_mib,
    slurm_real_memory_mib,
)

pytestmark = pytest.mark.k8s

CLUSTER = "jobs"
NODESET = "wide"
WIDE = {"resources": {"cpu": 2, "cpuRequest": "100m", "memory": "1536Mi"}}
NODES = ("%s-%s-0" % (CLUSTER, NODESET), "%s-%s-1" % (CLUSTER, NODESET))
CONTROLLER = "%s-controller-0" % CLUSTER


@pytest.fixture(scope="module")
def slurm(localkube_cluster: Cluster, slurm_images, operator: Operator) -> SlurmView:
    kube = localkube_cluster
    kube.apply(manifests(cluster_manifest(kube.namespace, CLUSTER, slurm_images, tiny_cluster_spec()),
                         nodeset_manifest(kube.namespace, CLUSTER, NODESET, len(NODES), WIDE)))  # fmt: skip
    wait_ready(kube, CLUSTER, operator)
    yield SlurmView(kube, CLUSTER)
    kube.kubectl("-n", kube.namespace, "delete", "slurmcluster", CLUSTER, "--wait=true", check=False, timeout=180)
    kube.kubectl("-n", kube.namespace, "delete", "nodeset", NODESET, "--wait=true", check=False, timeout=180)


def model():
    return parse_nodeset(nodeset_manifest("ns", CLUSTER, NODESET, len(NODES), WIDE))


def sbatch(slurm: SlurmView, *args: str) -> str:
    """Submit as root from the controller pod; the job's id."""
    out = slurm.kube.exec(CONTROLLER, "sbatch", "--parsable", "-w", NODES[0], "-o", "/tmp/jobs-%j.out", *args)
    return out.stdout.split()[0]


def job_record(slurm: SlurmView, job: str) -> dict:
    """scontrol's one-line record as KEY: value (MinJobAge keeps finished jobs a while)."""
    return dict(re.findall(r"(\w+)=(\S*)", slurm.run("scontrol", "show", "job", "-o", job)))


def finished(slurm: SlurmView, job: str) -> dict:
    """The job's record once it has ended."""
    ended = ("COMPLETED", "FAILED", "OUT_OF_MEMORY", "CANCELLED", "TIMEOUT", "NODE_FAIL")
    return wait_for(lambda: (lambda r: r if r.get("JobState") in ended else None)(job_record(slurm, job)),
                    120, 1, explain=slurm.explain)  # fmt: skip


def test_nodes_offer_the_pods_limits_and_keep_the_daemons_share(slurm: SlurmView):
    for node in NODES:
        words = dict(re.findall(r"(\w+)=(\S*)", slurm.run("scontrol", "show", "node", "-o", node)))
        assert int(words["CPUTot"]) == slurm_cpus(model())
        assert int(words["RealMemory"]) == slurm_real_memory_mib(model())
        assert int(words["RealMemory"]) - int(words["MemSpecLimit"]) == slurm_job_memory_mib(model())


def test_a_job_over_its_memory_ends_out_of_memory(slurm: SlurmView):
    job = sbatch(slurm, "--mem=100M", "--wrap", "python3 -c 'b = b\"x\" * (600 << 20)'")
    assert finished(slurm, job)["JobState"] == "OUT_OF_MEMORY"


def test_a_one_cpu_job_sees_one_cpu_and_its_cpuset_is_one_core(slurm: SlurmView):
    cpuset = ("if [ -e /sys/fs/cgroup/cgroup.controllers ]; then"
              " cat /sys/fs/cgroup/system.slice/slurmstepd.scope/job_$SLURM_JOB_ID/cpuset.cpus.effective;"
              " else cat /sys/fs/cgroup/cpuset/slurm_*/uid_0/job_$SLURM_JOB_ID/cpuset.cpus; fi")  # fmt: skip
    out = slurm.run("srun", "-w", NODES[0], "-n1", "-c1", "sh", "-c",
                    "nproc; grep Cpus_allowed_list /proc/self/status; " + cpuset)  # fmt: skip
    nproc, allowed, cpus = out.splitlines()
    assert nproc == "1"
    assert re.fullmatch(r"Cpus_allowed_list:\s*\d+", allowed), allowed
    assert re.fullmatch(r"\d+", cpus), cpus


def test_two_one_cpu_jobs_run_at_once_on_a_two_cpu_node(slurm: SlurmView):
    jobs = [sbatch(slurm, "-c1", "--wrap", "sleep 60") for _ in range(2)]
    try:
        wait_for(lambda: all(slurm.job_state(j) == "RUNNING" for j in jobs), 60, 1, explain=slurm.explain)
    finally:
        slurm.run("scancel", *jobs)


def test_sstat_shows_a_running_jobs_memory(slurm: SlurmView):
    job = sbatch(slurm, "--wrap", "python3 -c 'import time; b = b\"x\" * (64 << 20); time.sleep(120)'")
    try:
        slurm.wait_running(job)

        def max_rss_kib() -> int:
            out = slurm.kube.exec(CONTROLLER, "sstat", "-a", "-n", "-P", "-o", "MaxRSS", "-j", job, check=False)
            return max((kib(v) for v in out.stdout.split()), default=0)

        wait_for(lambda: max_rss_kib() >= 64 << 10, 60, 2, explain=slurm.explain)
    finally:
        slurm.run("scancel", job)


def kib(size: str) -> int:
    """A size as sstat prints it ('123K', '4.5M', '0') in KiB."""
    match = re.fullmatch(r"([\d.]+)([KMGT]?)", size)
    assert match, size
    return int(float(match.group(1)) * 1024 ** "KMGT".index(match.group(2) or "K"))


def test_a_jobs_leftover_background_process_is_killed_when_it_ends(slurm: SlurmView):
    # Double-forked into a session of its own, as a daemon is: no longer the job's child.
    job = sbatch(slurm, "--wrap", "(setsid sleep 3141 &); sleep 1")
    assert finished(slurm, job)["JobState"] == "COMPLETED"
    wait_for(lambda: slurm.kube.exec(NODES[0], "pgrep", "-f", "sleep 3141", check=False).returncode == 1, 30, 1)


def test_daemon_logs_carry_timestamps(slurm: SlurmView):
    for pod in (CONTROLLER, NODES[0]):
        log = slurm.kube.kubectl("-n", slurm.kube.namespace, "logs", pod, "--tail=20").stdout
        # slurmctld/slurmd lines on stderr: "[2026-11-25T10:57:53.008] message" (LogTimeFormat).
        assert re.search(r"^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\] ", log, re.MULTILINE), log
