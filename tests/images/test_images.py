"""Smoke tests of the images with real daemons in docker (no Kubernetes).

The images come from ``images/build.sh`` (content-tagged: a no-op when nothing changed).
The cluster below is a controller and two workers on a docker network, named the way the
pods are (``demo-controller-0`` behind the Service name
``demo-controller.hpc.svc.cluster.local``, workers ``demo-cpu-0``/``demo-cpu-1``).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "images" / "build.sh"

CLUSTER = "demo"
NAMESPACE = "hpc"
CONTROLLER_POD = "%s-controller-0" % CLUSTER
CONTROLLER_SERVICE = "%s-controller.%s.svc.cluster.local" % (CLUSTER, NAMESPACE)
WORKERS = ("%s-cpu-0" % CLUSTER, "%s-cpu-1" % CLUSTER)
LOGIN_POD = "%s-login-0" % CLUSTER
JAIL_USER = "alice"
JAIL_UID = 2000
HEALTHCHECK_INTERVAL = 5
NODESET = "cpu"


def run(*args: str, check: bool = True, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    result = subprocess.run(args, check=False, timeout=timeout, capture_output=True, text=True, **kw)
    if check and result.returncode != 0:
        raise AssertionError(
            "%s exited with %d\nstdout:\n%s\nstderr:\n%s"
            % (" ".join(args), result.returncode, result.stdout[-3000:], result.stderr[-3000:])
        )
    return result


def docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return run("docker", *args, check=check, timeout=timeout)


def wait_for(what: str, predicate, timeout: float = 120, interval: float = 1.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(interval)


def remove_as_root(path: Path) -> None:
    """Files written by containers belong to root: remove them from a container."""
    if path.exists():
        docker(
            "run",
            "--rm",
            "--entrypoint",
            "rm",
            "-v",
            "%s:/victim" % path.parent,
            IMAGES["base"],
            "-rf",
            "/victim/" + path.name,
            check=False,
        )


IMAGES: dict = {}


@pytest.fixture(scope="session")
def images() -> dict:
    """name -> name:tag of every image, built (or found up to date) by images/build.sh."""
    if not IMAGES:
        try:
            out = run("bash", str(BUILD), timeout=3600, cwd=REPO)
        except AssertionError as err:
            pytest.fail("images/build.sh failed: %s" % err)
        IMAGES.update(json.loads(out.stdout))
    return IMAGES


def spank_plugin_expected() -> bool:
    return (REPO / "spank" / "Makefile").is_file()


# ---------------------------------------------------------------------------- single images


def test_print_tags_names_the_built_images_without_building(images):
    out = run("bash", str(BUILD), "--print-tags", cwd=REPO)
    assert json.loads(out.stdout) == images
    assert "building" not in out.stderr


def test_controller_image_runs_slurmctld(images):
    out = docker("run", "--rm", images["controller"], "slurmctld", "-V").stdout
    assert " 24.11." in out  # "slurm-wlm 24.11.5" (Debian trixie)


def test_login_image_runs_sshd(images):
    out = docker("run", "--rm", images["login"], "/usr/sbin/sshd", "-V", check=False)
    assert "OpenSSH_10" in out.stdout + out.stderr


def test_worker_image_has_slurmd_healthcheck_and_plugin(images):
    files = [C.HEALTHCHECK_PROGRAM, C.ENTRYPOINT_PROGRAM]
    if spank_plugin_expected():
        files.append(C.SPANK_PLUGIN_PATH)
    docker("run", "--rm", images["worker"], "sh", "-c", "slurmd -V && " + " && ".join("test -s %s" % f for f in files))


def test_jail_image_has_what_hpc_users_expect(images):
    tools = [
        "srun",
        "sbatch",
        "squeue",
        "mpirun",
        "mpicc",
        "python3",
        "gcc",
        "g++",
        "gfortran",
        "make",
        "vim",
        "less",
        "git",
        "curl",
        "ssh",
        "tmux",
    ]
    docker("run", "--rm", images["jail"], "sh", "-c", " && ".join("command -v %s >/dev/null" % t for t in tools))
    if spank_plugin_expected():
        docker("run", "--rm", images["jail"], "test", "-s", C.SPANK_PLUGIN_PATH)


def test_operator_image_imports_its_handlers_unprivileged_on_a_read_only_root(images):
    script = (
        "import kubernetes, kopf, slurmkube_operator;"
        "from ansible_collections.slurmkube.core.plugins.module_utils import reconcile;"
        "import os; print(os.getuid())"
    )
    out = docker("run", "--rm", "--read-only", images["operator"], "python3", "-c", script).stdout
    assert out.strip() == "65532"
    assert "1.45" in docker("run", "--rm", images["operator"], "kopf", "--version").stdout


@pytest.mark.parametrize("name", ["controller", "worker", "login", "jail"])
def test_every_image_running_slurm_clients_has_the_spank_plugin(images, name):
    if not spank_plugin_expected():
        pytest.skip("spank/Makefile does not exist yet")
    docker("run", "--rm", images[name], "test", "-s", C.SPANK_PLUGIN_PATH)


def test_no_image_ships_a_munge_key_or_ssh_host_keys(images):
    for name in ("controller", "worker", "login", "jail"):
        docker(
            "run",
            "--rm",
            images[name],
            "sh",
            "-c",
            "test ! -e /etc/munge/munge.key && ! ls /etc/ssh/ssh_host_*_key 2>/dev/null",
        )


# ---------------------------------------------------------------------------- jail population


def populate(images: dict, jail: Path, version: str) -> str:
    out = docker(
        "run",
        "--rm",
        "-v",
        "%s:%s" % (jail, C.JAIL_MOUNT_PATH),
        "-e",
        "%s=%s" % (C.ENV_JAIL_VERSION, version),
        images["jail"],
        timeout=900,
    )
    return out.stdout


@pytest.fixture
def jail_dir(tmp_path):
    jail = tmp_path / "jail"
    jail.mkdir()
    yield jail
    remove_as_root(jail)


def test_jail_populate_once_then_noop_and_user_data_survives_upgrade(images, jail_dir):
    log = populate(images, jail_dir, "v1")
    marker = jail_dir / C.JAIL_MARKER_FILE
    assert marker.read_text() == "v1\n"
    assert (jail_dir / "usr/bin/srun").exists()
    assert os.path.lexists(jail_dir / "usr/bin/mpirun")  # an alternatives link, absolute
    assert (jail_dir / "etc/hosts").exists()  # an empty bind target, not the container's
    assert not (jail_dir / ".dockerenv").exists()
    assert not any((jail_dir / C.JAIL_MOUNT_PATH.lstrip("/")).glob("*"))
    assert oct((jail_dir).stat().st_mode & 0o7777) == "0o755"  # sshd's ChrootDirectory checks

    user_file = jail_dir / "home/alice/results.txt"
    user_file.parent.mkdir(parents=True)
    user_file.write_text("precious\n")
    with open(jail_dir / "etc/passwd", "a") as passwd:
        passwd.write("alice:x:2000:2000::/home/alice:/bin/bash\n")

    log = populate(images, jail_dir, "v1")
    assert "nothing to do" in log
    assert user_file.read_text() == "precious\n"

    log = populate(images, jail_dir, "v2")
    assert marker.read_text() == "v2\n"
    assert user_file.read_text() == "precious\n"
    assert "alice:x:2000" in (jail_dir / "etc/passwd").read_text()


# ---------------------------------------------------------------------------- a real cluster


def write_slurm_config(conf_dir: Path) -> None:
    """The cluster's Slurm config. Hand-written for now; to be replaced by the renderers'."""
    slurm_conf = f"""\
ClusterName={CLUSTER}
SlurmctldHost={CONTROLLER_POD}({CONTROLLER_SERVICE})
SlurmctldPort={C.SLURMCTLD_PORT}
SlurmdPort={C.SLURMD_PORT}
AuthType=auth/munge
CredType=cred/munge
SlurmUser=slurm
SlurmdUser=root
StateSaveLocation={C.SLURMCTLD_STATE_DIR}
SlurmdSpoolDir={C.SLURMD_SPOOL_DIR}
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MaxNodeCount=16
TreeWidth=65533
CommunicationParameters=NoAddrCache
MailProg=/bin/true
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
HealthCheckProgram={C.HEALTHCHECK_PROGRAM}
HealthCheckInterval={HEALTHCHECK_INTERVAL}

NodeSet={NODESET} Feature={NODESET}
PartitionName=main Nodes={NODESET} Default=YES MaxTime=INFINITE State=UP
"""
    if spank_plugin_expected():
        # Every job task runs with the jail as /; "required": never on the node's own root.
        slurm_conf += f"PlugStackConfig={C.SLURM_CONFIG_DIR}/plugstack.conf\n"
        plugstack = f"required {C.SPANK_PLUGIN_PATH} jail={C.JAIL_MOUNT_PATH} binds=/etc/hosts,/etc/resolv.conf\n"
        (conf_dir / "plugstack.conf").write_text(plugstack)
    (conf_dir / "slurm.conf").write_text(slurm_conf)
    (conf_dir / "cgroup.conf").write_text("CgroupPlugin=autodetect\nIgnoreSystemd=yes\n")


def write_sshd_config(config_dir: Path) -> None:
    """The login pods' sshd_config. Hand-written for now; to be replaced by the renderer's."""
    lines = [
        "Port %d" % C.SSH_PORT,
        "HostKey /etc/ssh/ssh_host_ed25519_key",
        "ChrootDirectory %s" % C.JAIL_MOUNT_PATH,
        "AuthorizedKeysFile %s/home/%%u/.ssh/authorized_keys" % C.JAIL_MOUNT_PATH,
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin no",
        "UsePAM no",
    ]
    (config_dir / C.SSHD_CONFIG_FILE).write_text("\n".join(lines) + "\n")


def write_secret(directory: Path, files: dict) -> None:
    """Files laid out the way the kubelet mounts a Secret: symlinks into a data dir, mode 0644."""
    data = directory / "..2026_01_01_00_00_00.000000001"
    data.mkdir(parents=True)
    for name, content in files.items():
        (data / name).write_bytes(content)
        (data / name).chmod(0o644)
        (directory / name).symlink_to("..data/" + name)
    (directory / "..data").symlink_to(data.name)


def ssh_keygen(images: dict, directory: Path, name: str) -> Path:
    """A new ed25519 key pair directory/name(.pub), made with the login image's ssh-keygen."""
    docker("run", "--rm", "--entrypoint", "ssh-keygen", "-v", "%s:/keys" % directory, images["login"],
           "-q", "-t", "ed25519", "-N", "", "-f", "/keys/" + name)  # fmt: skip
    return directory / name


class Cluster:
    def __init__(self, images: dict, root: Path):
        self.images = images
        self.suffix = uuid.uuid4().hex[:8]
        self.network = "slurmkube-test-" + self.suffix
        self.root = root
        self.containers: dict = {}

    def name(self, host: str) -> str:
        return "%s-%s" % (host, self.suffix)

    def prepare(self) -> None:
        for d in ("slurm", "sshd", "jail", "state", "client", "keygen"):
            (self.root / d).mkdir(parents=True)
        write_secret(self.root / "munge", {C.MUNGE_KEY_SECRET_KEY: os.urandom(1024)})
        write_slurm_config(self.root / "slurm")
        write_sshd_config(self.root / "sshd")
        host_key = ssh_keygen(self.images, self.root / "keygen", "ssh_host_ed25519_key")
        write_secret(
            self.root / "host-keys", {p.name: p.read_bytes() for p in (host_key, host_key.with_suffix(".pub"))}
        )
        client_key = ssh_keygen(self.images, self.root / "client", "id_ed25519")
        # A real jail, with a user that exists only there and logs in with a key.
        populate(self.images, self.root / "jail", "test")
        add_user = (
            f"useradd -m -u {JAIL_UID} -s /bin/bash {JAIL_USER} && usermod -p '*' {JAIL_USER}"
            f" && install -d -o {JAIL_UID} -g {JAIL_UID} -m 0700 /home/{JAIL_USER}/.ssh"
            f" && install -o {JAIL_UID} -g {JAIL_UID} -m 0600 /tmp/authorized_keys /home/{JAIL_USER}/.ssh/"
            " && rm /tmp/authorized_keys"
        )
        (self.root / "jail/tmp/authorized_keys").write_text(client_key.with_suffix(".pub").read_text())
        docker(
            "run",
            "--rm",
            "--entrypoint",
            "chroot",
            "-v",
            "%s:/jail" % (self.root / "jail"),
            self.images["jail"],
            "/jail",
            "sh",
            "-c",
            add_user,
        )
        docker("network", "create", self.network)

    def common_args(self, host: str) -> list:
        return [
            "-d",
            "--name",
            self.name(host),
            "--hostname",
            host,
            "--network",
            self.network,
            "--network-alias",
            host,
            "-v",
            "%s:%s:ro" % (self.root / "munge", C.MUNGE_KEY_MOUNT_DIR),
            "-v",
            "%s:%s:ro" % (self.root / "slurm", C.SLURM_CONFIG_DIR),
            "-e",
            "%s=%s" % (C.ENV_CLUSTER, CLUSTER),
            "-e",
            "%s=%s" % (C.ENV_CONTROLLER_HOST, CONTROLLER_SERVICE),
        ]

    def start_controller(self) -> None:
        args = [
            *self.common_args(CONTROLLER_POD),
            "--network-alias",
            CONTROLLER_SERVICE,
            "-v",
            "%s:%s" % (self.root / "state", C.SLURMCTLD_STATE_DIR),
            "-v",
            "%s:%s:ro" % (self.root / "jail", C.JAIL_MOUNT_PATH),
            "-e",
            "%s=%s" % (C.ENV_ROLE, C.ROLE_CONTROLLER),
        ]
        docker("run", *args, self.images["controller"])
        self.containers[CONTROLLER_POD] = self.name(CONTROLLER_POD)

    def start_worker(self, host: str, extra: list) -> None:
        args = [
            *self.common_args(host),
            "-v",
            "%s:%s" % (self.root / "jail", C.JAIL_MOUNT_PATH),
            # What the jail plugin needs: mounts, and pivot_root (refused by the default seccomp).
            "--cap-add",
            "SYS_ADMIN",
            "--security-opt",
            "seccomp=unconfined",
            "-e",
            "%s=%s" % (C.ENV_ROLE, C.ROLE_WORKER),
            "-e",
            "%s=%s" % (C.ENV_NODE_NAME, host),
            "-e",
            "%s=%s" % (C.ENV_NODESET, NODESET),
            "-e",
            "%s=Feature=%s" % (C.ENV_NODE_CONF, NODESET),
            *extra,
        ]
        docker("run", *args, self.images["worker"])
        self.containers[host] = self.name(host)

    def start_login(self) -> None:
        args = [
            *self.common_args(LOGIN_POD),
            "-v",
            "%s:%s" % (self.root / "jail", C.JAIL_MOUNT_PATH),
            "-v",
            "%s:%s:ro" % (self.root / "host-keys", C.SSH_HOST_KEYS_MOUNT_DIR),
            "-v",
            "%s:%s:ro" % (self.root / "sshd", C.SSHD_CONFIG_MOUNT_DIR),
            "--cap-add",
            "SYS_ADMIN",  # binds /proc, /dev, Slurm's config and munge's socket into the jail
            "-e",
            "%s=%s" % (C.ENV_ROLE, C.ROLE_LOGIN),
        ]
        docker("run", *args, self.images["login"])
        self.containers[LOGIN_POD] = self.name(LOGIN_POD)

    def exec(self, host: str, *cmd: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        return docker("exec", self.containers[host], *cmd, check=check, timeout=timeout)

    def node(self, node: str) -> dict:
        out = self.exec(CONTROLLER_POD, "scontrol", "show", "node", node, "--json").stdout
        return json.loads(out)["nodes"][0]

    def idle_nodes(self) -> set:
        out = self.exec(CONTROLLER_POD, "sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout
        return {line.split()[0] for line in out.splitlines() if line.split()[1:] == ["idle"]}

    def logs(self) -> str:
        parts = []
        for host, container in self.containers.items():
            out = docker("logs", "--tail", "40", container, check=False)
            parts.append("==== %s\n%s%s" % (host, out.stdout, out.stderr))
        return "\n".join(parts)

    def destroy(self) -> None:
        for container in self.containers.values():
            docker("rm", "-f", container, check=False)
        docker("network", "rm", self.network, check=False)
        for d in ("state", "jail"):
            remove_as_root(self.root / d)


@pytest.fixture(scope="module")
def cluster(images, tmp_path_factory):
    c = Cluster(images, tmp_path_factory.mktemp("cluster"))
    c.prepare()
    try:
        c.start_controller()
        # demo-cpu-0 is told its size; demo-cpu-1 derives it from its cgroup limits.
        c.start_worker(WORKERS[0], ["-e", "%s=1" % C.ENV_CPUS, "-e", "%s=500" % C.ENV_MEMORY_MB])
        c.start_worker(WORKERS[1], ["--cpus", "1", "--memory", "600m"])
        c.start_login()
        try:
            wait_for("both workers idle", lambda: c.idle_nodes() >= set(WORKERS), timeout=120)
        except AssertionError:
            pytest.fail("cluster did not come up:\n" + c.logs())
        yield c
    finally:
        c.destroy()


def test_srun_runs_on_both_workers(cluster):
    out = cluster.exec(CONTROLLER_POD, "srun", "-N2", "hostname", timeout=60).stdout
    assert sorted(out.split()) == sorted(WORKERS)


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
def test_user_logs_in_and_runs_a_batch_job_in_the_jail(cluster):
    session = "cd ~ && sbatch --wait -o job.out --wrap 'hostname; id -un; cat /%s' >/dev/null && cat job.out" % (
        C.JAIL_MARKER_FILE
    )
    out = ssh_to_login(cluster, session).stdout.split()
    assert out[0] in WORKERS
    assert out[1:] == [JAIL_USER, "test"]


def test_workers_register_with_their_size_and_nodeset(cluster):
    told = cluster.node(WORKERS[0])
    assert (told["cpus"], told["real_memory"]) == (1, 500)
    derived = cluster.node(WORKERS[1])
    assert (derived["cpus"], derived["real_memory"]) == (1, 600)
    assert NODESET in told["features"]


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


@pytest.mark.parametrize("host", [CONTROLLER_POD, LOGIN_POD])
def test_jail_accounts_resolve_on_controller_and_login(cluster, host):
    entry = cluster.exec(host, "getent", "passwd", JAIL_USER).stdout
    assert entry.startswith("%s:x:%d:%d:" % (JAIL_USER, JAIL_UID, JAIL_UID))
    assert cluster.exec(host, "getent", "passwd", "slurm").returncode == 0  # the image's own users stay


def ssh_to_login(cluster: Cluster, command: str) -> subprocess.CompletedProcess:
    """Run command in an ssh session of the jail user on the login node, from another container."""
    return docker(
        "run", "--rm", "--network", cluster.network, "-v", "%s:/keys:ro" % (cluster.root / "client"),
        "--entrypoint", "ssh", cluster.images["jail"], "-i", "/keys/id_ed25519", "-o", "BatchMode=yes",
        "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
        "%s@%s" % (JAIL_USER, LOGIN_POD), command, timeout=120,
    )  # fmt: skip


def test_ssh_login_lands_in_the_jail_with_slurm_commands(cluster):
    session = "cat /%s; test -e /usr/sbin/sshd || echo no-sshd-here; sinfo -h -N -o %%N" % C.JAIL_MARKER_FILE
    out = ssh_to_login(cluster, session).stdout.split()
    assert out[0] == "test"  # the jail's marker is the session's /
    assert out[1] == "no-sshd-here"  # the login container's own files are not visible
    assert set(out[2:]) == set(WORKERS)


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

    cluster.exec(CONTROLLER_POD, "scontrol", "update", "nodename=" + worker, "state=drain", "reason=admin: bad disk")
    try:
        time.sleep(2 * HEALTHCHECK_INTERVAL + 1)
        node = cluster.node(worker)
        assert drained(node) and node["reason"] == "admin: bad disk"
    finally:
        cluster.exec(CONTROLLER_POD, "scontrol", "update", "nodename=" + worker, "state=resume")


def run_long_checks(cluster: Cluster, *env: str) -> list:
    """Run the long-checks CronJob's container once; the ids of the jobs it submitted."""
    args = [a for e in env for a in ("-e", e)]
    out = docker("run", "--rm", *cluster.common_args("long-checks")[1:], *args,
                 "-e", "%s=long-checks" % C.ENV_ROLE, cluster.images["login"], timeout=120).stdout  # fmt: skip
    return [line.split()[-1] for line in out.splitlines() if "long check of" in line]


def job_state(cluster: Cluster, job: str) -> str:
    out = cluster.exec(CONTROLLER_POD, "scontrol", "show", "job", job, "--json").stdout
    return json.loads(out)["jobs"][0]["job_state"][0]


def test_long_checks_pass_on_healthy_nodes(cluster):
    jobs = run_long_checks(cluster)
    assert len(jobs) == len(WORKERS), [cluster.node(w) for w in WORKERS]
    for job in jobs:
        wait_for("long check job %s" % job, lambda j=job: job_state(cluster, j) in ("COMPLETED", "FAILED"), 120)
        assert job_state(cluster, job) == "COMPLETED"
    assert not any("DRAIN" in cluster.node(w)["state"] for w in WORKERS)


def test_failed_long_check_drains_and_the_fast_check_leaves_it(cluster):
    # The job inherits the submitter's environment: no CPU hashes 256 MiB in 10 ms.
    jobs = run_long_checks(cluster, "SLURMKUBE_LONG_CHECK_CPU_SECONDS=0.01")
    try:
        for job in jobs:
            wait_for("long check job %s" % job, lambda j=job: job_state(cluster, j) in ("COMPLETED", "FAILED"), 120)
        for worker in WORKERS:
            node = cluster.node(worker)
            assert "DRAIN" in node["state"]
            assert node["reason"].startswith(C.DRAIN_REASON_PREFIX + " long check: 1 CPUs did not hash")
        time.sleep(2 * HEALTHCHECK_INTERVAL + 1)  # the fast check passes, and must not resume
        assert all("DRAIN" in cluster.node(w)["state"] for w in WORKERS)
    finally:
        for worker in WORKERS:
            cluster.exec(CONTROLLER_POD, "scontrol", "update", "nodename=" + worker, "state=resume", check=False)


def test_node_added_at_run_time_joins_and_leaves_no_ghost_when_removed(cluster):
    extra = "%s-cpu-2" % CLUSTER
    cluster.start_worker(extra, ["-e", "%s=1" % C.ENV_CPUS, "-e", "%s=300" % C.ENV_MEMORY_MB])
    wait_for(extra + " idle", lambda: extra in cluster.idle_nodes(), timeout=60)
    # Scale-down as the operator does it: drain, stop the pod, delete the node.
    cluster.exec(CONTROLLER_POD, "scontrol", "update", "nodename=" + extra, "state=drain", "reason=scale down")
    docker("stop", "-t", "30", cluster.containers[extra], timeout=60)
    cluster.exec(CONTROLLER_POD, "scontrol", "delete", "nodename=" + extra)
    out = cluster.exec(CONTROLLER_POD, "sinfo", "-h", "-N", "-o", "%N").stdout
    assert extra not in out.split()


def test_worker_stops_cleanly_on_sigterm(cluster):
    container = cluster.containers[WORKERS[1]]
    start = time.monotonic()
    docker("stop", "-t", "30", container, timeout=60)
    assert time.monotonic() - start < 25
    state = json.loads(docker("inspect", container).stdout)[0]["State"]
    logs = docker("logs", container).stdout
    assert state["ExitCode"] == 0, logs[-2000:]
    assert "received SIGTERM" in logs and "munged stopped" in logs
