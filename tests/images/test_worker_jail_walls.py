"""Root in a job on a worker: the walls around the worker's own root and munged's key."""

from __future__ import annotations

import re

import pytest
from docker_cluster import (
    CONTROLLER_POD,
    REPO,
    SECRET_KEY,
    WORKERS,
    Cluster,
    daemon_ids,
    jail_home,
    needs_plugin,
    root_sbatch,
    scontrol_job,
    ssh_to_login,
    wait_for,
    wait_job_ended,
)
from entrypoint_script import entrypoint_constant

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

pytestmark = pytest.mark.slurm

# The cgroup slurmd's tree is below, in the pod's (images/common/lib/cgroups.sh).
JOBS_CGROUP = entrypoint_constant("JOBS_CGROUP")


@needs_plugin
@pytest.mark.parametrize("through", ["", "/proc/1/root", "/proc/{slurmd}/root", "/proc/{munged}/root"])
def test_root_job_cannot_take_the_munge_key_as_its_stdin(root_batch_jobs_run, cluster, through):
    """slurmstepd opens --input on the node, as root for a root job: not the key, by any path."""
    secret = (cluster.root / "munge" / C.MUNGE_KEY_SECRET_KEY).read_bytes()
    key = through.format(**daemon_ids(cluster, WORKERS[0])) + SECRET_KEY
    job = root_sbatch(cluster, "-i", key, "-o", "/root/stolen-%j.out", "--wrap", "cat")
    out = cluster.root / "jail" / "root" / ("stolen-%s.out" % job)
    got = out.read_bytes() if out.exists() else b""
    assert secret[:16] not in got and secret[-16:] not in got, got[:200]
    assert cluster.exec(WORKERS[0], "test", "-e", "/root/stolen-%s.out" % job, check=False).returncode != 0


CAP_SYS_PTRACE = 19


def batch_stepd_capabilities(cluster: Cluster, job: str) -> int:
    """The effective capabilities of the slurmstepd of a running job's batch step."""
    def stepd() -> str:
        return cluster.exec(WORKERS[0], "pgrep", "-f", r"^slurmstepd: \[%s\.batch\]" % job, check=False).stdout
    pid = wait_for("job %s's slurmstepd" % job, stepd, timeout=60).split()[0]
    status = cluster.exec(WORKERS[0], "cat", "/proc/%s/status" % pid).stdout
    return int(re.search(r"^CapEff:\s*([0-9a-f]+)$", status, re.M).group(1), 16)


def stepd_capabilities_then_cancel(cluster: Cluster, job: str) -> int:
    try:
        return batch_stepd_capabilities(cluster, job)
    finally:
        cluster.exec(CONTROLLER_POD, "scancel", job)


@needs_plugin
def test_only_a_plain_users_slurmstepd_holds_sys_ptrace(cluster):
    """The worker has sys_ptrace for job accounting (a user's tasks' /proc files); a root job's
    slurmstepd sheds it with the rest, so root in a job never acts through one that holds it."""
    # One after the other: the node has one CPU, so a second job would wait for the first to end.
    user_job = ssh_to_login(cluster, "sbatch --parsable -w %s -o /dev/null --wrap 'sleep 60'" % WORKERS[0])
    user_caps = stepd_capabilities_then_cancel(cluster, user_job.stdout.split()[0])
    root_job = cluster.exec(CONTROLLER_POD, "sbatch", "--parsable", "-w", WORKERS[0], "-o", "/dev/null",
                            "--wrap", "sleep 60").stdout  # fmt: skip
    root_caps = stepd_capabilities_then_cancel(cluster, root_job.split()[0])
    assert user_caps >> CAP_SYS_PTRACE & 1, hex(user_caps)
    assert not root_caps >> CAP_SYS_PTRACE & 1, hex(root_caps)


@needs_plugin
@pytest.mark.parametrize("source", ["/proc/1/root" + SECRET_KEY, "/proc/{slurmd}/root" + SECRET_KEY,
                                    "/proc/{munged}/root" + SECRET_KEY, "/proc/{munged}/environ",
                                    "/proc/{slurmd}/environ"])  # fmt: skip
def test_a_users_job_cannot_take_a_daemons_files_as_its_stdin(cluster, source):
    """A user's slurmstepd holds sys_ptrace, but opens --input with the user's ids (its effective
    capabilities cleared): not the key, not a daemon's environment, by any path."""
    secret = (cluster.root / "munge" / C.MUNGE_KEY_SECRET_KEY).read_bytes()
    path = source.format(**daemon_ids(cluster, WORKERS[0]))
    job = ssh_to_login(cluster, "sbatch --parsable -w %s -i %s -o stolen-%%j.out --wrap cat"
                       % (WORKERS[0], path), check=False).stdout.split()[0]  # fmt: skip
    wait_job_ended(cluster, job)
    out = jail_home(cluster) / ("stolen-%s.out" % job)
    got = out.read_bytes() if out.exists() else b""
    assert secret[:16] not in got and secret[-16:] not in got, got[:200]
    assert b"PATH=" not in got, got[:200]
    assert scontrol_job(cluster, job)["JobState"] == "FAILED", got[:200]


def worker_file_digest(cluster: Cluster, path: str) -> str:
    return cluster.exec(WORKERS[0], "sh", "-c", "sha256sum %s 2>&1 || true" % path).stdout


@needs_plugin
@pytest.mark.parametrize(
    ("flag", "target"),
    [
        ("-o", "/etc/passwd"),
        ("-o", "/etc/hosts"),  # a mount of its own in the pod, not part of "/"
        ("-e", "/etc/resolv.conf"),
        ("-o", "/proc/1/root/etc/passwd"),
        ("-o", "/proc/1/root" + C.HEALTHCHECK_PROGRAM),  # slurmd runs it as root, outside the jail
        ("-o", "/proc/1/root/etc/slurmkube-planted"),
    ],
)
def test_root_job_cannot_write_its_output_over_a_workers_file(root_batch_jobs_run, cluster, flag, target):
    pod_path = target.replace("/proc/1/root", "")
    before = worker_file_digest(cluster, pod_path)
    root_sbatch(cluster, flag, target, "--wrap", "echo pwned; echo pwned >&2")
    assert worker_file_digest(cluster, pod_path) == before


@needs_plugin
def test_root_job_cannot_reach_the_workers_root_through_proc(cluster):
    """/proc is the node's: /proc/<slurmd>/root would be the worker's own /."""
    slurmd = cluster.exec(WORKERS[0], "pidof", "slurmd").stdout.split()[0]
    probe = "for p in /proc/%s/root /proc/1/root; do ls $p/etc/munge && echo LEAK $p; cat $p/etc/munge/munge.key" \
            " | wc -c; cat $p/etc/hostname && echo LEAK $p; done; id -u" % slurmd  # fmt: skip
    out = cluster.exec(CONTROLLER_POD, "srun", "-N1", "-w", WORKERS[0], "sh", "-c", probe, check=False, timeout=60)
    words = out.stdout.split()
    assert words[-1] == "0"  # the job is root in the jail
    assert "LEAK" not in words, out.stdout
    assert words[:-1] == ["0", "0"], out.stdout  # nothing of the key was read
    assert "Permission denied" in out.stderr


# Root in a job tries every way out tests/images/attack/root_job_attempts.py knows; each must be
# refused, and for its own reason (the errno says which wall held).
DENIED, NOT_PERMITTED, READ_ONLY = "EACCES", "EPERM", "EROFS"
ROOT_JOB_ATTEMPTS = {
    "munge key through pid 1's root": {DENIED},
    "munge key through slurmd's root": {DENIED},
    "munged's root": {DENIED},
    "munged's memory": {DENIED},
    "munged's environment": {DENIED},
    "munged's maps": {DENIED},
    "becoming munged's uid": {NOT_PERMITTED},
    "becoming munged's gid": {NOT_PERMITTED},
    # EPERM: the planted file ran, with our ids (nosuid mounts, no_new_privs); the control below
    # runs the same file outside the jail and gets munged's ids.
    "a setuid file of munged's uid": {NOT_PERMITTED},
    "a setgid file of munged's gid": {NOT_PERMITTED},
    "writing the worker's /etc": {DENIED},
    "writing the worker's health check": {DENIED},
    "writing the pod's /etc/hosts": {READ_ONLY},
    "writing the pod's /etc/resolv.conf": {READ_ONLY},
    "writing slurm.conf": {READ_ONLY},
    "remounting / read-write": {NOT_PERMITTED},
    "remounting slurm.conf read-write": {NOT_PERMITTED},
    "mounting sysfs": {NOT_PERMITTED},
    "mounting cgroup2": {NOT_PERMITTED},
    "mounting a new proc": {NOT_PERMITTED},
    "unmounting slurm.conf": {NOT_PERMITTED},
    "loading a kernel module": {NOT_PERMITTED, "ENOSYS"},  # ENOSYS: a kernel built without modules
    "holding a capability that leaves the jail": {NOT_PERMITTED},
    "raw IP socket": {NOT_PERMITTED},
    "packet socket": {NOT_PERMITTED},
    "ptrace of slurmd": {NOT_PERMITTED},
    "chroot into pid 1's root": {DENIED, NOT_PERMITTED},
    "joining pid 1's mount namespace": {DENIED},
    "making a disk device node": {NOT_PERMITTED},
    "planting a file capability": {NOT_PERMITTED},
    "a key in the node's kernel keyring": {NOT_PERMITTED},
    "a userfaultfd": {NOT_PERMITTED},
    "an io_uring": {NOT_PERMITTED},
}


@pytest.fixture(scope="module")
def root_job_attempts(cluster) -> dict:
    """Each attempt's outcome, from one root job on a worker."""
    ids = daemon_ids(cluster, WORKERS[0])
    script = cluster.root / "jail" / "opt" / "root_job_attempts.py"
    script.write_text((REPO / "tests/images/attack/root_job_attempts.py").read_text())
    out = cluster.exec(CONTROLLER_POD, "srun", "-N1", "-w", WORKERS[0], "python3", "/opt/root_job_attempts.py",
                       ids["munged"], ids["slurmd"], ids["munge_uid"], SECRET_KEY, C.HEALTHCHECK_PROGRAM,
                       ids["munge_gid"], timeout=90)  # fmt: skip
    print(out.stdout, out.stderr)
    return dict(line.rsplit(": ", 1) for line in out.stdout.splitlines() if ": " in line)


@needs_plugin
@pytest.mark.parametrize(("attempt", "refused_with"), sorted(ROOT_JOB_ATTEMPTS.items()))
def test_root_in_a_job_is_refused(root_job_attempts, attempt, refused_with):
    assert root_job_attempts.get(attempt) in refused_with, (attempt, root_job_attempts)


@needs_plugin
def test_root_job_attempts_left_the_worker_as_it_was(root_job_attempts, cluster):
    assert set(root_job_attempts) == set(ROOT_JOB_ATTEMPTS)
    assert cluster.exec(WORKERS[0], "test", "-e", "/etc/slurmkube-pwned", check=False).returncode != 0
    files = cluster.exec(WORKERS[0], "cat", "/etc/hosts", "/etc/resolv.conf", C.HEALTHCHECK_PROGRAM).stdout
    assert "pwned" not in files


@needs_plugin
@pytest.mark.parametrize(("planted", "field", "ids"), [("setuid", 1, "munge_uid"), ("setgid", 4, "munge_gid")])
def test_the_set_id_files_a_root_job_planted_work_outside_the_jail(root_job_attempts, cluster, planted, field, ids):
    """The control of the two set-id attempts: run on the worker's own mount of the jail (no
    nosuid, no no_new_privs), the very file the job planted makes root munged's uid or gid."""
    path = C.JAIL_MOUNT_PATH + "/opt/slurmkube-planted-" + planted
    got = cluster.exec(WORKERS[0], path, "-c", "import os; print(*os.getresuid(), *os.getresgid())").stdout.split()
    assert got[field] == daemon_ids(cluster, WORKERS[0])[ids], got


def test_the_workers_root_is_read_only_even_for_its_own_root(cluster):
    """What slurmd runs as root outside the jail (the health check) stays the image's."""
    out = cluster.exec(WORKERS[0], "sh", "-c", "echo x >>%s" % C.HEALTHCHECK_PROGRAM, check=False)
    assert out.returncode != 0 and "Read-only file system" in out.stderr, out.stderr


def test_root_job_cannot_raise_its_own_memory_limit(cluster):
    """Jobs see the pod's cgroups through the jail's /sys, read-only; slurmd's writable tree is elsewhere."""
    limit = "/sys/fs/cgroup/memory/%s/slurm_*/uid_0/job_$SLURM_JOB_ID/memory.limit_in_bytes" % JOBS_CGROUP
    probe = ("f=$(echo %s); cat $f; echo -1 > $f && echo RAISED; cat $f; ls %s || echo HIDDEN"
             % (limit, C.CGROUP_MOUNT_DIR))  # fmt: skip
    out = cluster.exec(CONTROLLER_POD, "srun", "-w", WORKERS[0], "--mem=64M", "sh", "-c", probe,
                       check=False, timeout=60)  # fmt: skip
    words = out.stdout.split()
    assert words == [str(64 << 20), str(64 << 20), "HIDDEN"], (out.stdout, out.stderr)
    assert "Read-only file system" in out.stderr
