"""Smoke tests of the images with real daemons in docker (no Kubernetes).

The images come from ``images/build.sh`` (content-tagged: a no-op when nothing changed).
The cluster below is a controller, three workers and a login node on a docker network,
named the way the pods are (``demo-controller-0`` behind the Service name
``demo-controller.hpc.svc.cluster.local``, workers ``demo-cpu-0``..``demo-cpu-2``). Its
slurm.conf, cgroup.conf, gres.conf, plugstack.conf and sshd_config are the product's
renderers' output for one SlurmCluster and one NodeSet, written unchanged; the containers
get what the rendered pods get (environment, mounts, capabilities, seccomp).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import time
import uuid
from pathlib import Path
from typing import Sequence

import pytest
from slurm_output import key_values, mpi_ranks, size_kib

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.keys import key_fingerprint
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    nodeset_object_name,
    slurm_cpus,
    slurm_job_memory_mib,
    slurm_node_names,
    slurm_real_memory_mib,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.render import common as render_common
from ansible_collections.slurmkube.core.plugins.module_utils.render.login import render_sshd_config
from ansible_collections.slurmkube.core.plugins.module_utils.render.seccomp import worker_seccomp_profile_text
from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import (
    render_config_files,
    render_health_conf,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.worker import WRITABLE_PATHS, _worker_env
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.drain import PURPOSE_SCALE_DOWN, drain_reason

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "images" / "build.sh"

CLUSTER = "demo"
NAMESPACE = "hpc"
NODESET = "cpu"
# Below the spec's minimum of 10 s: set as a slurm.conf override, so the health-check tests
# take seconds. Everything else is the product's default.
HEALTHCHECK_INTERVAL = 5
WORKER_MEMORY_MB = 768
CLUSTER_MODEL = parse_cluster(
    {
        "metadata": {"name": CLUSTER, "namespace": NAMESPACE},
        "spec": {"slurm": {"maxNodeCount": 16, "config": {"HealthCheckInterval": HEALTHCHECK_INTERVAL}}},
    }
)
NODESET_MODEL = parse_nodeset({
    "metadata": {"name": NODESET, "namespace": NAMESPACE},
    "spec": {"clusterName": CLUSTER, "replicas": 3,
             "resources": {"cpu": "1", "memory": "%dMi" % WORKER_MEMORY_MB}},
})  # fmt: skip
# A second node set, started only by the enforcement tests: two 1-CPU jobs share one of its nodes.
WIDE_MODEL = parse_nodeset({
    "metadata": {"name": "wide", "namespace": NAMESPACE},
    "spec": {"clusterName": CLUSTER, "replicas": 1, "resources": {"cpu": "2", "memory": "1280Mi"}},
})  # fmt: skip
CONTROLLER_POD = "%s-controller-0" % CLUSTER
WORKERS = tuple(slurm_node_names(NODESET_MODEL))
LOGIN_POD = "%s-login-0" % CLUSTER
JAIL_USER = "alice"
JAIL_UID = 2000


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


def built_images() -> dict:
    """name -> name:tag of every image, built (or found up to date) by images/build.sh, once a
    session (tests/images/conftest.py makes it the `images` fixture)."""
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
        "from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile;"
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


def write_slurm_config(conf_dir: Path, model=CLUSTER_MODEL, nodesets=(NODESET_MODEL, WIDE_MODEL)) -> None:
    """The ConfigMap mounted at /etc/slurm: the renderer's files, unchanged."""
    for name, text in render_config_files(model, list(nodesets)).items():
        (conf_dir / name).write_text(text)


def write_sshd_config(config_dir: Path, model=CLUSTER_MODEL) -> None:
    """The login pods' sshd_config ConfigMap: the renderer's text, unchanged."""
    (config_dir / C.SSHD_CONFIG_FILE).write_text(render_sshd_config(model))


def env_args(env: list, pod: str) -> list:
    """A rendered container's env as `docker run -e` words; fieldRef metadata.name is the pod's name."""
    args = []
    for var in env:
        if "value" in var:
            value = var["value"]
        elif var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
            value = pod
        else:
            raise AssertionError("no docker equivalent for env %r" % var)
        args += ["-e", "%s=%s" % (var["name"], value)]
    return args


def write_secret(directory: Path, files: dict) -> None:
    """Files laid out the way the kubelet mounts our Secrets: symlinks into a data dir, mode 0400
    (the rendered volumes' defaultMode)."""
    data = directory / "..2026_01_01_00_00_00.000000001"
    data.mkdir(parents=True)
    for name, content in files.items():
        (data / name).write_bytes(content)
        (data / name).chmod(0o400)
        (directory / name).symlink_to("..data/" + name)
    (directory / "..data").symlink_to(data.name)


def ssh_keygen(images: dict, directory: Path, name: str, kind: str = "ed25519") -> Path:
    """A new key pair directory/name(.pub), made with the login image's ssh-keygen."""
    docker("run", "--rm", "--entrypoint", "ssh-keygen", "-v", "%s:/keys" % directory, images["login"],
           "-q", "-t", kind, "-N", "", "-f", "/keys/" + name)  # fmt: skip
    return directory / name


class Cluster:
    """Containers named and configured as the pods of one SlurmCluster and its node sets are
    (by default the module's: demo, with node sets cpu and wide)."""

    def __init__(self, images: dict, root: Path, model=CLUSTER_MODEL, nodesets=(NODESET_MODEL, WIDE_MODEL)):
        self.model, self.nodesets = model, tuple(nodesets)
        self.controller_pod = "%s-controller-0" % model.name
        self.login_pod = "%s-login-0" % model.name
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
        write_slurm_config(self.root / "slurm", self.model, self.nodesets)
        write_sshd_config(self.root / "sshd", self.model)
        (self.root / "seccomp.json").write_text(worker_seccomp_profile_text())
        # The host-keys Secret holds one key of every type the rendered sshd_config names.
        host_keys = [ssh_keygen(self.images, self.root / "keygen", "ssh_host_%s_key" % kind, kind)
                     for kind in ("ed25519", "ecdsa", "rsa")]  # fmt: skip
        write_secret(
            self.root / "host-keys",
            {p.name: p.read_bytes() for key in host_keys for p in (key, key.with_suffix(".pub"))},
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
        ]

    def start_controller(self, extra: Sequence[str] = ()) -> None:
        args = [
            *extra,
            *self.common_args(self.controller_pod),
            "--network-alias",
            names.controller_address(self.model.name, self.model.namespace),
            "-v",
            "%s:%s" % (self.root / "state", C.SLURMCTLD_STATE_DIR),
            "-v",
            "%s:%s:ro" % (self.root / "jail", C.JAIL_MOUNT_PATH),
            *env_args(render_common.env(self.model, C.ROLE_CONTROLLER), self.controller_pod),
        ]
        docker("run", *args, self.images["controller"])
        self.containers[self.controller_pod] = self.name(self.controller_pod)

    def start_worker(self, host: str, extra: list = (), env_from_limits: bool = False, nodeset=NODESET_MODEL) -> None:
        """A worker as render/worker.py makes its pod: env, emptyDirs, SYS_ADMIN, the workers' seccomp profile.

        env_from_limits: leave SLURMKUBE_CPUS/MEMORY_MB out, so the entrypoint reads the
        container's cgroup limits instead.
        """
        env = _worker_env(self.model, nodeset)
        if env_from_limits:
            env = [v for v in env if v["name"] not in (C.ENV_CPUS, C.ENV_MEMORY_MB)]
        # emptyDirs are directories of the node, mode 0777.
        empty_dirs = {C.SLURMD_SPOOL_DIR: "spool", C.NODE_TMP_DIR: "tmp"}
        volumes = []
        for path, name in empty_dirs.items():
            node_dir = self.root / "nodes" / host / name
            node_dir.mkdir(parents=True)
            node_dir.chmod(0o777)
            volumes += ["-v", "%s:%s" % (node_dir, path)]
        # A read-only root, with the render's writable places (memory-backed ones as tmpfs).
        for where in WRITABLE_PATHS.values():
            volumes += ["--tmpfs", "%s:rw,exec,mode=0755" % where[0]]
        args = [
            *self.common_args(host),
            "--read-only",
            "-v",
            "%s:%s" % (self.root / "jail", C.JAIL_MOUNT_PATH),
            *volumes,
            "--cpus",
            str(slurm_cpus(nodeset)),
            "--memory",
            "%dm" % slurm_real_memory_mib(nodeset),
            # What the jail plugin needs: mounts, and pivot_root (refused by the default seccomp,
            # allowed by ours); what slurmstepd needs to bind tasks to their CPUs.
            "--cap-add",
            "SYS_ADMIN",
            "--cap-add",
            "SYS_NICE",
            "--security-opt",
            "seccomp=%s" % (self.root / "seccomp.json"),
            *env_args(env, host),
            *extra,
        ]
        docker("run", *args, self.images["worker"])
        self.containers[host] = self.name(host)

    def start_login(self) -> None:
        args = [
            *self.common_args(self.login_pod),
            "-v",
            "%s:%s" % (self.root / "jail", C.JAIL_MOUNT_PATH),
            "-v",
            "%s:%s:ro" % (self.root / "host-keys", C.SSH_HOST_KEYS_MOUNT_DIR),
            "-v",
            "%s:%s:ro" % (self.root / "sshd", C.SSHD_CONFIG_MOUNT_DIR),
            "--cap-add",
            "SYS_ADMIN",  # binds /proc, /dev, Slurm's config and munge's socket into the jail
            *env_args(render_common.env(self.model, C.ROLE_LOGIN), self.login_pod),
        ]
        docker("run", *args, self.images["login"])
        self.containers[self.login_pod] = self.name(self.login_pod)

    def exec(self, host: str, *cmd: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        return docker("exec", self.containers[host], *cmd, check=check, timeout=timeout)

    def node(self, node: str) -> dict:
        out = self.exec(self.controller_pod, "scontrol", "show", "node", node, "--json").stdout
        return json.loads(out)["nodes"][0]

    def idle_nodes(self) -> set:
        out = self.exec(self.controller_pod, "sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout
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
        for d in ("state", "jail", "nodes"):
            remove_as_root(self.root / d)


@pytest.fixture(scope="module")
def cluster(images, tmp_path_factory):
    c = Cluster(images, tmp_path_factory.mktemp("cluster"))
    c.prepare()
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
        c.destroy()


def test_rendered_config_is_what_the_daemons_run_with(cluster):
    conf = cluster.exec(CONTROLLER_POD, "scontrol", "show", "config").stdout
    assert "HealthCheckProgram      = %s" % C.HEALTHCHECK_PROGRAM in conf
    assert "PlugStackConfig         = %s/plugstack.conf" % C.SLURM_CONFIG_DIR in conf
    plugstack = (cluster.root / "slurm/plugstack.conf").read_text()
    assert "submounts=%s:/tmp" % C.NODE_TMP_DIR in plugstack


def test_srun_runs_on_all_three_workers(cluster):
    out = cluster.exec(CONTROLLER_POD, "srun", "-N%d" % len(WORKERS), "hostname", timeout=60).stdout
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


def jail_home(cluster: Cluster) -> Path:
    return cluster.root / "jail" / "home" / JAIL_USER


@needs_plugin
def test_mpi_ranks_find_each_other_with_srun_pmix_and_with_mpirun_in_sbatch(cluster):
    """The PMIx server is slurmstepd's, on the node; the ranks run in the jail and must reach it."""
    (jail_home(cluster) / "mpi_hello.c").write_text((REPO / "tests/data/mpi_hello.c").read_text())
    srun = ssh_to_login(cluster, "cd ~ && mpicc -o mpi_hello mpi_hello.c && srun -N2 -n2 --mpi=pmix ./mpi_hello")
    ranks = mpi_ranks(srun.stdout)
    assert sorted(ranks) == [0, 1], srun.stdout + srun.stderr
    assert {r["size"] for r in ranks.values()} == {2} and {r["sum"] for r in ranks.values()} == {1}
    assert len({r["host"] for r in ranks.values()}) == 2  # one rank per node
    batch = ssh_to_login(cluster, "cd ~ && sbatch --wait -N2 -n2 -o mpirun.out --wrap 'mpirun ./mpi_hello'"
                                  " >/dev/null; cat mpirun.out")  # fmt: skip
    ranks = mpi_ranks(batch.stdout)
    assert sorted(ranks) == [0, 1], batch.stdout + batch.stderr
    assert {r["sum"] for r in ranks.values()} == {1}


@needs_plugin
def test_sbatch_from_login_writes_default_output_into_the_jail_home(cluster):
    job = ssh_to_login(cluster, "cd ~ && sbatch --parsable --wait --wrap 'id -un; cat /%s'" % C.JAIL_MARKER_FILE)
    job_id = job.stdout.split()[0]
    out = jail_home(cluster) / ("slurm-%s.out" % job_id)
    assert out.read_text().split() == [JAIL_USER, "test"]
    for worker in WORKERS:  # written into the jail, not into a worker's own /home
        assert cluster.exec(worker, "test", "-e", "/home/%s" % JAIL_USER, check=False).returncode != 0


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
def test_file_written_by_a_users_job_on_one_node_is_read_by_a_job_on_another(cluster):
    session = (
        "cd ~ && sbatch --wait -w {w0} -o /dev/null --wrap 'echo from-{w0} > ~/handoff.txt' >/dev/null"
        " && sbatch --wait -w {w1} -o handoff-read.out --wrap 'hostname; cat ~/handoff.txt' >/dev/null"
        " && cat handoff-read.out"
    ).format(w0=WORKERS[0], w1=WORKERS[2])
    assert ssh_to_login(cluster, session).stdout.split() == [WORKERS[2], "from-" + WORKERS[0]]


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


@pytest.fixture(scope="module")
def root_batch_jobs_run(cluster) -> None:
    """The attacks below pass when a root job's output never appears: first prove a root batch
    job does run and writes its output where they write theirs."""
    job = root_sbatch(cluster, "-o", "/root/control-%j.out", "--wrap", "echo ran as $(id -u)")
    out = cluster.root / "jail" / "root" / ("control-%s.out" % job)
    assert out.exists() and out.read_text() == "ran as 0\n"


def root_sbatch(cluster: Cluster, *args: str) -> str:
    """Submit a job as root from the controller, wait for it; its id (it may fail)."""
    out = cluster.exec(CONTROLLER_POD, "sbatch", "--parsable", "--wait", "-w", WORKERS[0], *args,
                       check=False, timeout=90)  # fmt: skip
    assert out.stdout.strip(), out.stderr
    return out.stdout.split()[0]


SECRET_KEY = C.MUNGE_KEY_MOUNT_DIR + "/" + C.MUNGE_KEY_SECRET_KEY


def daemon_ids(cluster: Cluster, host: str) -> dict:
    """pids of munged and slurmd in the container, munged's uid and gid."""
    words = cluster.exec(host, "sh", "-c", "pidof -s munged; pidof -s slurmd; id -u munge; id -g munge").stdout.split()
    return dict(zip(("munged", "slurmd", "munge_uid", "munge_gid"), words))


AS_MUNGE = ("setpriv", "--reuid=munge", "--regid=munge", "--clear-groups", "--")


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


def test_munged_keeps_no_key_file_its_own_uid_could_read(cluster):
    """Once munged runs, the copy it read is gone; the Secret's file is root's: a process that
    became munged's uid (root in a job cannot: it has no setuid) would find no key on disk."""
    ids = daemon_ids(cluster, WORKERS[0])
    assert cluster.exec(WORKERS[0], "test", "-e", "/etc/munge/munge.key", check=False).returncode != 0
    for path in (SECRET_KEY, "/proc/%s/root%s" % (ids["munged"], SECRET_KEY)):
        out = cluster.exec(WORKERS[0], *AS_MUNGE, "cat", path, check=False)
        assert out.returncode != 0 and "Permission denied" in out.stderr, (path, out.stdout, out.stderr)


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


def test_workers_register_with_their_size_and_nodeset(cluster):
    told = cluster.node(WORKERS[0])
    # Slurm sees the pod's whole memory and keeps the daemons' share from jobs.
    assert (told["cpus"], told["real_memory"], told["specialized_memory"]) == (1, WORKER_MEMORY_MB, 256)
    derived = cluster.node(WORKERS[1])
    assert (derived["cpus"], derived["real_memory"]) == (1, WORKER_MEMORY_MB)
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


def test_fast_check_leaves_the_operators_planned_drains(cluster):
    worker = WORKERS[2]
    reason = drain_reason(PURPOSE_SCALE_DOWN, datetime.datetime.now(datetime.timezone.utc))
    cluster.exec(CONTROLLER_POD, "scontrol", "update", "nodename=" + worker, "state=drain", "reason=" + reason)
    try:
        time.sleep(2 * HEALTHCHECK_INTERVAL + 1)
        node = cluster.node(worker)
        assert "DRAIN" in node["state"] and node["reason"] == reason
    finally:
        cluster.exec(CONTROLLER_POD, "scontrol", "update", "nodename=" + worker, "state=resume")


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


def job_state(cluster: Cluster, job: str) -> str:
    out = cluster.exec(CONTROLLER_POD, "scontrol", "show", "job", job, "--json").stdout
    return json.loads(out)["jobs"][0]["job_state"][0]


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
        time.sleep(2 * HEALTHCHECK_INTERVAL + 1)  # the fast check passes, and must not resume
        assert all("DRAIN" in cluster.node(w)["state"] for w in WORKERS)
    finally:
        for worker in WORKERS:
            cluster.exec(CONTROLLER_POD, "scontrol", "update", "nodename=" + worker, "state=resume", check=False)


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
    job = cluster.exec(CONTROLLER_POD, "sbatch", "--parsable", "-w", WORKERS[0], "-o", "/dev/null", "--wrap",
                       "sleep 25").stdout.strip()  # fmt: skip
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


# ---------------------------------------------------------------------------- enforcement

WIDE_NODE = slurm_node_names(WIDE_MODEL)[0]


def scontrol_job(cluster: Cluster, job: str) -> dict:
    """scontrol's one-line record of a job (MinJobAge keeps finished ones)."""
    return key_values(cluster.exec(CONTROLLER_POD, "scontrol", "show", "job", "-o", job).stdout)


def remove_worker(cluster: Cluster, node: str) -> None:
    """Scale-down as the operator does it: drain, stop the pod, delete the node."""
    cluster.exec(CONTROLLER_POD, "scontrol", "update", "nodename=" + node, "state=drain", "reason=scale down")
    docker("stop", "-t", "30", cluster.containers[node], timeout=60)
    cluster.exec(CONTROLLER_POD, "scontrol", "delete", "nodename=" + node)


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
                 " cat /sys/fs/cgroup/cpuset/slurm_*/uid_0/job_$SLURM_JOB_ID/cpuset.cpus")  # fmt: skip
        out = cluster.exec(CONTROLLER_POD, "srun", "-w", WIDE_NODE, "-n1", "-c1", "sh", "-c", probe, timeout=60)
        nproc, allowed, cpuset = out.stdout.splitlines()
        assert nproc == "1"
        assert re.fullmatch(r"Cpus_allowed_list:\s*\d+", allowed), allowed
        assert re.fullmatch(r"\d+", cpuset), cpuset

    def test_root_job_cannot_raise_its_own_memory_limit(self, cluster):
        """Jobs see the pod's cgroups through the jail's /sys, read-only; slurmd's writable tree is elsewhere."""
        probe = ("f=$(echo /sys/fs/cgroup/memory/slurm_*/uid_0/job_$SLURM_JOB_ID/memory.limit_in_bytes);"
                 " cat $f; echo -1 > $f && echo RAISED; cat $f; ls %s || echo HIDDEN" % C.CGROUP_MOUNT_DIR)
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


def test_node_added_at_run_time_joins_and_leaves_no_ghost_when_removed(cluster):
    extra = "%s-%d" % (nodeset_object_name(NODESET_MODEL), len(WORKERS))
    cluster.start_worker(extra)
    wait_for(extra + " idle", lambda: extra in cluster.idle_nodes(), timeout=60)
    remove_worker(cluster, extra)
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
