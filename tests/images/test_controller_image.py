"""The controller's container in the docker cluster, and what every daemon container shares with it:
the rendered config in effect, munged out of reach, timestamped logs, accounts from the jail, the
munge key switched in place."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from docker_cluster import (
    AS_MUNGE,
    CONTROLLER_POD,
    JAIL_UID,
    JAIL_USER,
    LOGIN_POD,
    SECRET_KEY,
    WORKERS,
    Cluster,
    daemon_ids,
    docker,
    job_state,
    wait_for,
)

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.keys import key_fingerprint

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize(("pod", "port"), [(CONTROLLER_POD, C.SLURMCTLD_PORT), (WORKERS[0], C.SLURMD_PORT)])
def test_the_readiness_probe_is_slurms_own_readyz(cluster, pod, port):
    """What the rendered readinessProbe runs, in the serving daemon's container: Slurm's GET
    /readyz on its port answers 204 (ready), and the probe passes."""
    answer = cluster.exec(pod, "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/%d; printf 'GET /readyz HTTP/1.1\\r\\n"
                          "Host: x\\r\\nConnection: close\\r\\n\\r\\n' >&3; head -1 <&3" % port).stdout
    assert answer.startswith("HTTP/1.1 204"), answer
    assert cluster.exec(pod, C.READY_PROGRAM, str(port), check=False).returncode == 0


def test_rendered_config_is_what_the_daemons_run_with(cluster):
    conf = cluster.exec(CONTROLLER_POD, "scontrol", "show", "config").stdout
    assert "HealthCheckProgram      = %s" % C.HEALTHCHECK_PROGRAM in conf
    assert "PlugStackConfig         = %s/plugstack.conf" % C.SLURM_CONFIG_DIR in conf
    plugstack = (cluster.root / "slurm/plugstack.conf").read_text()
    assert "submounts=%s:/tmp" % C.NODE_TMP_DIR in plugstack


@pytest.mark.parametrize("host", [CONTROLLER_POD, WORKERS[0], LOGIN_POD])
def test_munged_is_not_dumpable_even_to_its_own_uid(cluster, host):
    """munged holds the keys it derives from the key file in its heap. It is started with real
    and effective gids that differ, so the kernel makes it non-dumpable: its /proc files are
    root's and refused even to munged's uid and gid. The control: the same reads of another
    process of those ids work."""
    munged = daemon_ids(cluster, host)["munged"]
    owners = cluster.exec(host, "stat", "-c", "%u", *("/proc/%s/%s" % (munged, f) for f in ("environ", "maps", "mem")))
    assert owners.stdout.split() == ["0", "0", "0"]
    probe = "sleep 30 & peer=$!; for p in %s $peer; do for f in environ maps mem; do " \
            "head -c1 /proc/$p/$f >/dev/null 2>&1 && echo $p/$f read || echo $p/$f refused; done; done; " \
            "kill $peer" % munged  # fmt: skip
    lines = cluster.exec(host, *AS_MUNGE, "sh", "-c", probe).stdout.split("\n")
    assert ["%s/%s refused" % (munged, f) for f in ("environ", "maps", "mem")] == lines[:3], lines
    # mem at offset 0 is unmapped: opening it passes the access check, reading gives EIO.
    assert [ln.split("/")[1] for ln in lines[3:5]] == ["environ read", "maps read"], lines


@pytest.mark.parametrize("host", [CONTROLLER_POD, WORKERS[0]])
def test_munged_runs_ten_worker_threads(cluster, host):
    """SchedMD's high-throughput guide: munged's two threads by default queue the credentials of many
    jobs starting at once; it suggests ten."""
    munged = daemon_ids(cluster, host)["munged"]
    status = cluster.exec(host, "cat", "/proc/%s/status" % munged).stdout
    assert int(re.search(r"^Threads:\s+(\d+)$", status, re.M).group(1)) >= 10, status


def test_munged_keeps_no_key_file_its_own_uid_could_read(cluster):
    """Once munged runs, the copy it read is gone; the Secret's file is root's: a process that
    became munged's uid (root in a job cannot: it has no setuid) would find no key on disk."""
    ids = daemon_ids(cluster, WORKERS[0])
    assert cluster.exec(WORKERS[0], "test", "-e", "/etc/munge/munge.key", check=False).returncode != 0
    for path in (SECRET_KEY, "/proc/%s/root%s" % (ids["munged"], SECRET_KEY)):
        out = cluster.exec(WORKERS[0], *AS_MUNGE, "cat", path, check=False)
        assert out.returncode != 0 and "Permission denied" in out.stderr, (path, out.stdout, out.stderr)


TIMESTAMPED = re.compile(r"^(\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\]|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) ")


@pytest.mark.parametrize("host", [CONTROLLER_POD, WORKERS[0], LOGIN_POD])
def test_every_line_a_container_logs_carries_its_time(cluster, host):
    """slurmctld/slurmd (LogTimeFormat), munged and sshd (stamped by the entrypoint), the entrypoint."""
    out = docker("logs", cluster.containers[host])
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    assert lines and not [ln for ln in lines if not TIMESTAMPED.match(ln)], "\n".join(
        ln for ln in lines if not TIMESTAMPED.match(ln))


@pytest.mark.parametrize("host", [CONTROLLER_POD, LOGIN_POD])
def test_jail_accounts_resolve_on_controller_and_login(cluster, host):
    entry = cluster.exec(host, "getent", "passwd", JAIL_USER).stdout
    assert entry.startswith("%s:x:%d:%d:" % (JAIL_USER, JAIL_UID, JAIL_UID))
    assert cluster.exec(host, "getent", "passwd", "slurm").returncode == 0  # the image's own users stay


def rotate_mounted_key(directory: Path, key: bytes) -> None:
    """A new key in the Secret dir, swapped in the way the kubelet updates a mounted Secret."""
    data = directory / "..2026_06_01_00_00_00.000000002"
    data.mkdir()
    (data / C.MUNGE_KEY_SECRET_KEY).write_bytes(key)
    (data / C.MUNGE_KEY_SECRET_KEY).chmod(0o400)
    (directory / "..data_tmp").symlink_to(data.name)
    (directory / "..data_tmp").rename(directory / "..data")


def munge_key_status(cluster: Cluster, host: str) -> str:
    return cluster.exec(host, C.MUNGE_KEY_PROGRAM, "status").stdout.strip()


def test_munge_key_switches_in_place_under_a_running_job(cluster):
    """The operator's rotation by hand: mount the new key, restart munged controller first,
    then everywhere else. slurmd, slurmctld, sshd and the running job never stop."""
    hosts = [CONTROLLER_POD, *WORKERS, LOGIN_POD]
    old_fp = key_fingerprint((cluster.root / "munge" / C.MUNGE_KEY_SECRET_KEY).read_bytes())
    assert {munge_key_status(cluster, h) for h in hosts} == {"running=%s mounted=%s" % (old_fp, old_fp)}
    daemons = {h: cluster.exec(h, "pgrep", "-x", "slurmctld|slurmd|sshd", check=False).stdout.split()[:1]
               for h in hosts}  # fmt: skip
    # The job runs until the switches are done (a file the test makes in the jail's /root), not for
    # a time that a slow machine's switches could outlast.
    job = cluster.exec(CONTROLLER_POD, "sbatch", "--parsable", "-w", WORKERS[0], "-o", "/dev/null", "--wrap",
                       "timeout 120 sh -c 'until [ -e /root/release-$SLURM_JOB_ID ]; do sleep 0.5; done'"
                       ).stdout.strip()  # fmt: skip
    assert wait_for("job %s started" % job, lambda: job_state(cluster, job) != "PENDING", timeout=60)
    assert job_state(cluster, job) == "RUNNING", cluster.exec(CONTROLLER_POD, "scontrol", "show", "job", job).stdout

    new_key = os.urandom(1024)
    new_fp = key_fingerprint(new_key)
    rotate_mounted_key(cluster.root / "munge", new_key)
    assert munge_key_status(cluster, WORKERS[0]) == "running=%s mounted=%s" % (old_fp, new_fp)
    wrong = cluster.exec(WORKERS[0], C.MUNGE_KEY_PROGRAM, "switch", "sha256:" + "0" * 64, check=False)
    assert wrong.returncode == 3, wrong.stderr  # a key that is not the mounted one: nothing restarts
    for host in hosts:
        switched = cluster.exec(host, C.MUNGE_KEY_PROGRAM, "switch", new_fp, check=False, timeout=60)
        assert switched.returncode == 0, (host, switched.stdout, switched.stderr)
    assert {munge_key_status(cluster, h) for h in hosts} == {"running=%s mounted=%s" % (new_fp, new_fp)}
    again = cluster.exec(WORKERS[1], C.MUNGE_KEY_PROGRAM, "switch", new_fp)
    assert "already" in again.stdout

    assert job_state(cluster, job) == "RUNNING"
    (cluster.root / "jail" / "root" / ("release-%s" % job)).touch()
    wait_for("job %s completed" % job, lambda: job_state(cluster, job) == "COMPLETED", timeout=90)
    wait_for("every worker idle", lambda: cluster.idle_nodes() >= set(WORKERS), timeout=90)
    out = cluster.exec(CONTROLLER_POD, "srun", "-N%d" % len(WORKERS), "hostname", timeout=60).stdout
    assert sorted(out.split()) == sorted(WORKERS)
    # A credential from one node's munged decodes on another's: they share the new key.
    cred = cluster.exec(LOGIN_POD, "munge", "-n").stdout
    decoded = subprocess.run(["docker", "exec", "-i", cluster.containers[WORKERS[2]], "unmunge"], input=cred,
                             capture_output=True, text=True, timeout=30, check=False)
    assert decoded.returncode == 0, decoded.stderr
    assert {h: cluster.exec(h, "pgrep", "-x", "slurmctld|slurmd|sshd", check=False).stdout.split()[:1]
            for h in hosts} == daemons  # fmt: skip
    assert "SIGHUP: restarting munged" in docker("logs", cluster.containers[WORKERS[0]]).stdout
