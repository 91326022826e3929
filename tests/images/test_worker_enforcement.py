"""Jobs are held to what they were given (cgroups), on a wide node of a second node set."""

from __future__ import annotations

import re

import pytest
from docker_cluster import (
    CONTROLLER_POD,
    WIDE_MODEL,
    WIDE_NODE,
    Cluster,
    remove_worker,
    scontrol_job,
    wait_for,
)
from entrypoint_script import entrypoint_constant
from slurm_output import size_kib

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    slurm_cpus,
    slurm_job_memory_mib,
    slurm_real_memory_mib,
)

pytestmark = pytest.mark.slurm

# The cgroup slurmd's tree is below, in the pod's (images/common/lib/cgroups.sh).
JOBS_CGROUP = entrypoint_constant("JOBS_CGROUP")


@pytest.mark.usefixtures("wide_node")
class TestEnforcement:
    """Jobs are held to what they were given, with the rendered cgroup.conf, on this cgroup v1 host."""

    @pytest.fixture(scope="class")
    @classmethod
    def wide_node(cls, cluster):
        cluster.start_worker(WIDE_NODE, nodeset=WIDE_MODEL)
        wait_for(WIDE_NODE + " idle", lambda: WIDE_NODE in cluster.idle_nodes(), timeout=60)
        yield WIDE_NODE
        remove_worker(cluster, WIDE_NODE)

    def sbatch(self, cluster: Cluster, *args: str, wait: bool = True) -> str:
        out = cluster.exec(CONTROLLER_POD, "sbatch", "--parsable", *(["--wait"] if wait else []),
                           "-w", WIDE_NODE, "-o", "/tmp/enforce-%j.out", *args, check=False, timeout=120)  # fmt: skip
        assert out.stdout.strip(), out.stderr
        return out.stdout.split()[0]

    def test_the_node_offers_the_pods_cpus_and_memory_less_the_daemons_share(self, cluster):
        node = cluster.node(WIDE_NODE)
        assert (node["cpus"], node["real_memory"]) == (slurm_cpus(WIDE_MODEL), slurm_real_memory_mib(WIDE_MODEL))
        assert node["real_memory"] - node["specialized_memory"] == slurm_job_memory_mib(WIDE_MODEL)

    def test_job_over_its_memory_ends_out_of_memory(self, cluster):
        job = self.sbatch(cluster, "--mem=100M", "--wrap", "python3 -c 'b = b\"x\" * (600 << 20)'")
        record = scontrol_job(cluster, job)
        assert record["JobState"] == "OUT_OF_MEMORY", record

    def test_one_cpu_job_sees_one_cpu_and_its_cpuset_is_one_core(self, cluster):
        probe = ("nproc; grep Cpus_allowed_list /proc/self/status;"
                 " cat /sys/fs/cgroup/cpuset/%s/slurm_*/uid_0/job_$SLURM_JOB_ID/cpuset.cpus" % JOBS_CGROUP)  # fmt: skip
        out = cluster.exec(CONTROLLER_POD, "srun", "-w", WIDE_NODE, "-n1", "-c1", "sh", "-c", probe, timeout=60)
        nproc, allowed, cpuset = out.stdout.splitlines()
        assert nproc == "1"
        assert re.fullmatch(r"Cpus_allowed_list:\s*\d+", allowed), allowed
        assert re.fullmatch(r"\d+", cpuset), cpuset

    def test_root_job_cannot_raise_its_own_memory_limit(self, cluster):
        """Jobs see the pod's cgroups through the jail's /sys, read-only; slurmd's writable tree is elsewhere."""
        limit = "/sys/fs/cgroup/memory/%s/slurm_*/uid_0/job_$SLURM_JOB_ID/memory.limit_in_bytes" % JOBS_CGROUP
        probe = ("f=$(echo %s); cat $f; echo -1 > $f && echo RAISED; cat $f; ls %s || echo HIDDEN"
                 % (limit, C.CGROUP_MOUNT_DIR))  # fmt: skip
        out = cluster.exec(CONTROLLER_POD, "srun", "-w", WIDE_NODE, "--mem=64M", "sh", "-c", probe,
                           check=False, timeout=60)  # fmt: skip
        words = out.stdout.split()
        assert words == [str(64 << 20), str(64 << 20), "HIDDEN"], (out.stdout, out.stderr)
        assert "Read-only file system" in out.stderr

    def test_two_one_cpu_jobs_share_a_two_cpu_node(self, cluster):
        jobs = [self.sbatch(cluster, "-c1", "--wrap", "sleep 30", wait=False) for attempt in range(2)]
        try:
            wait_for("both jobs running at once",
                     lambda: all(scontrol_job(cluster, j)["JobState"] == "RUNNING" for j in jobs), timeout=30)
        finally:
            cluster.exec(CONTROLLER_POD, "scancel", *jobs)

    def test_sstat_reports_a_running_jobs_memory(self, cluster):
        job = self.sbatch(cluster, "--wrap", "python3 -c 'import time; b = b\"x\" * (64 << 20); time.sleep(60)'",
                          wait=False)  # fmt: skip
        try:
            def max_rss_kib() -> int:
                out = cluster.exec(CONTROLLER_POD, "sstat", "-a", "-n", "-P", "-o", "MaxRSS", "-j", job,
                                   check=False).stdout  # fmt: skip
                sizes = [size_kib(v) for v in out.split()]
                return max(sizes, default=0)

            assert wait_for("sstat MaxRSS", lambda: max_rss_kib() >= 64 << 10, timeout=60)
        finally:
            cluster.exec(CONTROLLER_POD, "scancel", job)

    def test_a_jobs_leftover_background_process_is_killed_when_it_ends(self, cluster):
        # Double-forked into its own session: reparented away from the job, as a daemon is.
        job = self.sbatch(cluster, "--wrap", "(setsid sleep 3141 &); sleep 1; echo started")
        assert scontrol_job(cluster, job)["JobState"] == "COMPLETED"
        wait_for("the leftover sleep gone",
                 lambda: cluster.exec(WIDE_NODE, "pgrep", "-f", "sleep 3141", check=False).returncode == 1,
                 timeout=30)  # fmt: skip
