"""The login container: sshd with the mounted host key, sessions chrooted into the jail without
root or admin capabilities, batch jobs from there."""

from __future__ import annotations

import shlex

import pytest
from docker_cluster import (
    CONTROLLER_POD,
    JAIL_UID,
    JAIL_USER,
    LOGIN_POD,
    WORKERS,
    docker,
    jail_home,
    needs_plugin,
    root_sbatch,
    scontrol_job,
    ssh_to_login,
    wait_for,
    wait_job_ended,
)
from slurm_output import seconds, size_kib

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

pytestmark = pytest.mark.slurm


@needs_plugin
def test_user_logs_in_and_runs_a_batch_job_in_the_jail(cluster):
    session = "cd ~ && sbatch --wait -o job.out --wrap 'hostname; id -un; cat /%s' >/dev/null && cat job.out" % (
        C.JAIL_MARKER_FILE
    )
    out = ssh_to_login(cluster, session).stdout.split()
    assert out[0] in WORKERS
    assert out[1:] == [JAIL_USER, "test"]


# Holds 150 MiB and burns about two CPU seconds, then waits to be cancelled.
HOLD_MEMORY_AND_CPU = ("python3 -c 'import time; b = b\"x\" * (150 << 20); t = time.process_time() + 2\n"
                       "while time.process_time() < t: pass\ntime.sleep(120)'")


@needs_plugin
def test_sstat_shows_a_users_running_job_its_memory_and_cpu(cluster):
    """Job accounting reads a user's tasks' /proc files (the worker's sys_ptrace): MaxRSS and
    AveCPU of a plain user's job, not only of root's."""
    job = ssh_to_login(cluster, "sbatch --parsable -w %s -o /dev/null --wrap %s"
                       % (WORKERS[0], shlex.quote(HOLD_MEMORY_AND_CPU))).stdout.split()[0]  # fmt: skip

    def batch_step() -> list:
        out = cluster.exec(CONTROLLER_POD, "sstat", "-n", "-P", "-o", "JobID,MaxRSS,AveCPU", "-j", job + ".batch",
                           check=False).stdout.split()  # fmt: skip
        row = out[0].split("|") if out else []
        return row if len(row) == 3 and row[1] and size_kib(row[1]) >= 100 << 10 and seconds(row[2]) >= 1 else []

    try:
        ave_cpu = wait_for("sstat MaxRSS >= 100 MiB, AveCPU >= 1 s", batch_step, timeout=90)[2]
        record = scontrol_job(cluster, job)
        assert record["UserId"].startswith(JAIL_USER + "(")
        assert seconds(ave_cpu) <= seconds(record["RunTime"]) * int(record["NumCPUs"]) + 1, (ave_cpu, record)
    finally:
        cluster.exec(CONTROLLER_POD, "scancel", job)


@needs_plugin
def test_sbatch_from_login_writes_default_output_into_the_jail_home(cluster):
    job = ssh_to_login(cluster, "cd ~ && sbatch --parsable --wrap 'id -un; cat /%s'" % C.JAIL_MARKER_FILE)
    job_id = job.stdout.split()[0]
    wait_job_ended(cluster, job_id)
    out = jail_home(cluster) / ("slurm-%s.out" % job_id)
    assert out.read_text().split() == [JAIL_USER, "test"]
    for worker in WORKERS:  # written into the jail, not into a worker's own /home
        assert cluster.exec(worker, "test", "-e", "/home/%s" % JAIL_USER, check=False).returncode != 0


def test_login_runs_sshd_with_the_mounted_host_key_and_slurm_clients(cluster):
    wait_for(
        "sshd listening",
        lambda: (
            "Server listening"
            in docker("logs", cluster.containers[LOGIN_POD]).stderr
            + docker("logs", cluster.containers[LOGIN_POD]).stdout
        ),
        timeout=60,
    )
    mounted = (cluster.root / "host-keys/ssh_host_ed25519_key.pub").read_text().split()[1]
    served = cluster.exec(LOGIN_POD, "cat", "/etc/ssh/ssh_host_ed25519_key.pub").stdout.split()[1]
    assert served == mounted
    out = cluster.exec(LOGIN_POD, "sinfo", "-h", "-N", "-o", "%N").stdout
    assert set(out.split()) == set(WORKERS)


def test_ssh_login_lands_in_the_jail_with_slurm_commands(cluster):
    session = "cat /%s; test -e /usr/sbin/sshd || echo no-sshd-here; sinfo -h -N -o %%N" % C.JAIL_MARKER_FILE
    out = ssh_to_login(cluster, session).stdout.split()
    assert out[0] == "test"  # the jail's marker is the session's /
    assert out[1] == "no-sshd-here"  # the login container's own files are not visible
    assert set(out[2:]) == set(WORKERS)


CAP_SYS_ADMIN = 21


@needs_plugin
def test_a_setuid_binary_root_planted_in_the_jail_gives_a_session_no_root(root_batch_jobs_run, cluster):
    """Root in a job can make a setuid-root file in the shared jail; login pods mount the jail
    nosuid, so a user running it stays the user (and file capabilities count for nothing)."""
    root_sbatch(cluster, "-o", "/root/plant-%j.out", "--wrap", "cp /usr/bin/id /opt/suid-id && chmod 4755 /opt/suid-id")
    planted = cluster.root / "jail/opt/suid-id"
    assert planted.exists() and planted.stat().st_mode & 0o4000
    out = ssh_to_login(cluster, "/opt/suid-id -u; /opt/suid-id -ru").stdout.split()
    assert out == [str(JAIL_UID), str(JAIL_UID)]


@needs_plugin
def test_a_setuid_root_file_planted_in_the_jail_gives_a_plain_users_job_no_root(root_batch_jobs_run, cluster):
    """The same planted file in a job of the user: the jail is nosuid in jobs and their tasks run
    with no_new_privs. The control: on the worker's own mount of the jail, the user's uid running
    it does become root, so the file is a working setuid-root program."""
    root_sbatch(cluster, "-o", "/root/plant-job-%j.out", "--wrap",
                "cp /usr/bin/id /opt/suid-id-job && chmod 4755 /opt/suid-id-job")  # fmt: skip
    out = ssh_to_login(cluster, "srun -N1 -w %s sh -c '/opt/suid-id-job -u; /opt/suid-id-job -ru'" % WORKERS[0])
    assert out.stdout.split() == [str(JAIL_UID), str(JAIL_UID)], (out.stdout, out.stderr)
    as_user = ["setpriv", "--reuid=%d" % JAIL_UID, "--regid=%d" % JAIL_UID, "--clear-groups", "--"]
    control = cluster.exec(WORKERS[0], *as_user, C.JAIL_MOUNT_PATH + "/opt/suid-id-job", "-u").stdout.split()
    assert control == ["0"]


def test_a_session_holds_no_admin_capability_and_cannot_reach_the_login_pods_root(cluster):
    out = ssh_to_login(cluster, "grep CapBnd /proc/self/status; cat /proc/1/root/etc/ssh/ssh_host_ed25519_key"
                                " 2>&1 | head -c 200; echo")  # fmt: skip
    bounding = int(out.stdout.split()[1], 16)
    assert not bounding & (1 << CAP_SYS_ADMIN), out.stdout  # sshd and its sessions lost it for good
    assert "Permission denied" in out.stdout and "PRIVATE KEY" not in out.stdout, out.stdout
