"""The worker containers: jobs in the jail, job arrays, the node's own /tmp, their size in Slurm,
a clean stop. Jobs across the workers, MPI and nodes joining at run time are proven on Kubernetes
(tests/k8s: test_slurm_jobs, test_quickstart, test_operator) and srun over every worker here in
test_controller_image."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from docker_cluster import (
    CONTROLLER_POD,
    NODESET,
    NODESET_MODEL,
    WORKER_MEMORY_MB,
    WORKERS,
    docker,
    jail_home,
    spank_plugin_expected,
    ssh_to_login,
    wait_for,
)

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    nodeset_object_name,
)

pytestmark = pytest.mark.slurm


needs_plugin = pytest.mark.skipif(not spank_plugin_expected(), reason="spank/Makefile does not exist yet")


@needs_plugin
def test_jobs_run_in_the_jail_and_share_its_files(cluster):
    def srun(node: str, command: str) -> subprocess.CompletedProcess:
        return cluster.exec(CONTROLLER_POD, "srun", "-N1", "-w", node, "sh", "-c", command, check=False, timeout=60)

    seen = srun(WORKERS[0], "cat /%s; test -e /usr/sbin/slurmd || echo no-slurmd-here" % C.JAIL_MARKER_FILE)
    assert seen.stdout.split() == ["test", "no-slurmd-here"], seen.stderr
    assert srun(WORKERS[0], "echo from-cpu-0 > /srv/shared.txt").returncode == 0
    assert srun(WORKERS[1], "cat /srv/shared.txt").stdout.strip() == "from-cpu-0"
    # A root job sees neither the worker's munge key nor the mounted Secret.
    for path in ("/etc/munge/munge.key", C.MUNGE_KEY_MOUNT_DIR + "/" + C.MUNGE_KEY_SECRET_KEY):
        assert srun(WORKERS[0], "cat " + path).returncode != 0


@needs_plugin
def test_job_array_writes_every_output(cluster):
    tasks = 6
    job = ssh_to_login(
        cluster,
        "cd ~ && sbatch --parsable --wait -a 0-%d -o array-%%A_%%a.out --wrap 'echo task $SLURM_ARRAY_TASK_ID'"
        % (tasks - 1),
    )
    job_id = job.stdout.split()[0]
    for task in range(tasks):
        out = jail_home(cluster) / ("array-%s_%d.out" % (job_id, task))
        assert out.read_text() == "task %d\n" % task


@needs_plugin
def test_jobs_tmp_is_the_nodes_own_scratch(cluster):
    """plugstack's submounts= shows the worker's NODE_TMP_DIR as the job's /tmp, not the jail's /tmp."""
    name = "node-local-%s" % cluster.suffix
    write = "touch /tmp/%s && stat -c %%a /tmp" % name
    mode = cluster.exec(CONTROLLER_POD, "srun", "-w", WORKERS[0], "sh", "-c", write, timeout=60).stdout.strip()
    seen = cluster.exec(CONTROLLER_POD, "srun", "-w", WORKERS[1], "ls", "/tmp", timeout=60).stdout.split()
    assert name not in seen
    assert not (cluster.root / "jail" / "tmp" / name).exists()
    assert (cluster.root / "nodes" / WORKERS[0] / "tmp" / name).exists()
    assert mode == "1777"  # sticky: no user deletes another's files


def test_workers_register_with_their_size_and_nodeset(cluster):
    told = cluster.node(WORKERS[0])
    # Slurm sees the pod's whole memory and keeps the daemons' share from jobs.
    assert (told["cpus"], told["real_memory"], told["specialized_memory"]) == (1, WORKER_MEMORY_MB, 256)
    derived = cluster.node(WORKERS[1])
    assert (derived["cpus"], derived["real_memory"]) == (1, WORKER_MEMORY_MB)
    assert NODESET in told["features"]


def test_worker_stops_cleanly_on_sigterm(cluster):
    """On a worker of its own: the cluster's three serve the tests of the other files."""
    extra = names.pod(nodeset_object_name(NODESET_MODEL), len(WORKERS) + 1)
    cluster.start_worker(extra)
    wait_for(extra + " idle", lambda: extra in cluster.idle_nodes(), timeout=60)
    container = cluster.containers[extra]
    start = time.monotonic()
    docker("stop", "-t", "30", container, timeout=60)
    assert time.monotonic() - start < 25
    state = json.loads(docker("inspect", container).stdout)[0]["State"]
    logs = docker("logs", container).stdout
    assert state["ExitCode"] == 0, logs[-2000:]
    assert "received SIGTERM" in logs and "munged stopped" in logs
    cluster.exec(CONTROLLER_POD, "scontrol", "delete", "nodename=" + extra)
