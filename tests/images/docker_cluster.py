"""The docker tier's cluster: a controller, three workers and a login node on a docker network,
named the way the pods are (``demo-controller-0`` behind the Service name
``demo-controller.hpc.svc.cluster.local``, workers ``demo-cpu-0``..``demo-cpu-2``). Its slurm.conf,
cgroup.conf, gres.conf, plugstack.conf and sshd_config are the product's renderers' output for one
SlurmCluster and one NodeSet, written unchanged; the containers get what the rendered pods get
(environment, mounts, capabilities, seccomp). The images come from ``images/build.sh``
(content-tagged: a no-op when nothing changed). conftest.py starts it once for the tier.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Sequence

import pytest
import waiting
from slurm_output import key_values

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import jwks_text, new_key_set
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    slurm_cpus,
    slurm_node_names,
    slurm_real_memory_mib,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.render import common as render_common
from ansible_collections.slurmkube.core.plugins.module_utils.render.login import render_sshd_config
from ansible_collections.slurmkube.core.plugins.module_utils.render.rest import render_rest_deployment
from ansible_collections.slurmkube.core.plugins.module_utils.render.seccomp import worker_seccomp_profile_text
from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import (
    render_config_files,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.worker import WRITABLE_PATHS, _worker_env

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "images" / "build.sh"

CLUSTER = "demo"
NAMESPACE = "hpc"
NODESET = "cpu"
# Below the spec's minimum of 10 s: set as a slurm.conf override, so the health-check tests
# take seconds. Everything else is the product's default.
HEALTHCHECK_INTERVAL = 5
WORKER_MEMORY_MB = 768
CLUSTER_SPEC = {"slurm": {"maxNodeCount": 16, "config": {"HealthCheckInterval": HEALTHCHECK_INTERVAL}}}
# The docker cluster serves the REST API too (test_rest_image.py): its slurmctld checks tokens
# against the key set mounted from the cluster's root.
CLUSTER_MODEL = parse_cluster(
    {"metadata": {"name": CLUSTER, "namespace": NAMESPACE}, "spec": dict(CLUSTER_SPEC, rest={"enabled": True})})
# The same cluster without it, for a slurmctld started where no key set is mounted (the cgroup v2 guest).
CLUSTER_MODEL_WITHOUT_REST = parse_cluster(
    {"metadata": {"name": CLUSTER, "namespace": NAMESPACE}, "spec": CLUSTER_SPEC})
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


def wait_for(what: str, predicate, timeout: float = 120, interval: float = 1.0, explain=None):
    """tests/waiting.py's loop, WHAT first as these tests name it."""
    return waiting.wait_for(predicate, timeout, interval, explain=explain, what=what)


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


needs_plugin = pytest.mark.skipif(not spank_plugin_expected(), reason="spank/Makefile does not exist yet")


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
        # The REST API's keys, as the operator makes them.
        self.jwt_keys = new_key_set()

    def name(self, host: str) -> str:
        return "%s-%s" % (host, self.suffix)

    def prepare(self) -> None:
        for d in ("slurm", "sshd", "jail", "state", "client", "keygen", "jwt"):
            (self.root / d).mkdir(parents=True)
        write_secret(self.root / "munge", {C.MUNGE_KEY_SECRET_KEY: os.urandom(1024)})
        # The JWT key Secret's public half, as its volume shows it (0444).
        (self.root / "jwt" / C.JWKS_SECRET_KEY).write_text(jwks_text(self.jwt_keys))
        (self.root / "jwt" / C.JWKS_SECRET_KEY).chmod(0o444)
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
            "--network-alias",
            names.controller_host_address(self.model.name, self.model.namespace, 0),
            "-v",
            "%s:%s" % (self.root / "state", C.SLURMCTLD_STATE_DIR),
            "-v",
            "%s:%s:ro" % (self.root / "jail", C.JAIL_MOUNT_PATH),
            "-v",
            "%s:%s:ro" % (self.root / "jwt", C.JWT_KEYS_MOUNT_DIR),
            *env_args(render_common.env(self.model, C.ROLE_CONTROLLER), self.controller_pod),
        ]
        docker("run", *args, self.images["controller"])
        self.containers[self.controller_pod] = self.name(self.controller_pod)

    def start_rest(self) -> None:
        """slurmrestd as render/rest.py makes its pod: the controller image, its uid, a read-only
        root, no capability, slurm.conf alone (no munge key, no JWT key)."""
        host = names.rest(self.model.name)
        (container,) = render_rest_deployment(self.model, "")["spec"]["template"]["spec"]["containers"]
        security = container["securityContext"]
        args = [
            "-d", "--name", self.name(host), "--hostname", host, "--network", self.network, "--network-alias", host,
            "-v", "%s:%s:ro" % (self.root / "slurm", C.SLURM_CONFIG_DIR),
            "--user", "%d:%d" % (security["runAsUser"], security["runAsGroup"]),
            "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            *env_args(container["env"], host),
        ]  # fmt: skip
        docker("run", *args, self.images["controller"])
        self.containers[host] = self.name(host)

    def start_worker(self, host: str, extra: list = (), env_from_limits: bool = False, nodeset=NODESET_MODEL) -> None:
        """A worker as render/worker.py makes its pod: env, emptyDirs, SYS_ADMIN, the workers' seccomp profile.

        env_from_limits: leave SLURMKUBE_CPUS/MEMORY_MB out, so the entrypoint reads the
        container's cgroup limits instead.
        """
        if host in self.containers:  # a removed node's pod made again: a new container, fresh emptyDirs
            docker("rm", "-f", self.containers.pop(host), check=False)
            remove_as_root(self.root / "nodes" / host)
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
            # allowed by ours); what slurmstepd needs to bind tasks to their CPUs and to read the
            # /proc files of users' tasks that job accounting samples.
            "--cap-add",
            "SYS_ADMIN",
            "--cap-add",
            "SYS_NICE",
            "--cap-add",
            "SYS_PTRACE",
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


def jail_home(cluster: Cluster) -> Path:
    return cluster.root / "jail" / "home" / JAIL_USER


def root_sbatch(cluster: Cluster, *args: str) -> str:
    """Submit a job as root from the controller, wait for it; its id (it may fail)."""
    out = cluster.exec(CONTROLLER_POD, "sbatch", "--parsable", "-w", WORKERS[0], *args, check=False, timeout=90)
    assert out.stdout.strip(), out.stderr
    job = out.stdout.split()[0]
    wait_job_ended(cluster, job)
    return job


# A job's base states before it ends (a job still COMPLETING has its end state).
UNENDED_JOB_STATES = ("PENDING", "RUNNING", "SUSPENDED")


def wait_job_ended(cluster: Cluster, job: str, timeout: float = 90) -> None:
    """What sbatch --wait waits for, looked at every half second: sbatch looks 2 s after the
    submission, then 8 s later, then 32 s later, so a job of 3 s took it 10 s."""
    wait_for("job %s to end" % job, lambda: job_state(cluster, job) not in UNENDED_JOB_STATES, timeout=timeout,
             interval=0.5)  # fmt: skip


SECRET_KEY = C.MUNGE_KEY_MOUNT_DIR + "/" + C.MUNGE_KEY_SECRET_KEY


def daemon_ids(cluster: Cluster, host: str) -> dict:
    """pids of munged and slurmd in the container, munged's uid and gid."""
    words = cluster.exec(host, "sh", "-c", "pidof -s munged; pidof -s slurmd; id -u munge; id -g munge").stdout.split()
    return dict(zip(("munged", "slurmd", "munge_uid", "munge_gid"), words))


AS_MUNGE = ("setpriv", "--reuid=munge", "--regid=munge", "--clear-groups", "--")


def ssh_to_login(cluster: Cluster, command: str, check: bool = True,
                 timeout: float = 120) -> subprocess.CompletedProcess:
    """Run command in an ssh session of the jail user on the login node, from another container."""
    return docker(
        "run", "--rm", "--network", cluster.network, "-v", "%s:/keys:ro" % (cluster.root / "client"),
        "--entrypoint", "ssh", cluster.images["jail"], "-i", "/keys/id_ed25519", "-o", "BatchMode=yes",
        "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
        "%s@%s" % (JAIL_USER, LOGIN_POD), command, timeout=timeout, check=check,
    )  # fmt: skip


WIDE_NODE = slurm_node_names(WIDE_MODEL)[0]


def scontrol_job(cluster: Cluster, job: str) -> dict:
    """scontrol's one-line record of a job (MinJobAge keeps finished ones)."""
    return key_values(cluster.exec(CONTROLLER_POD, "scontrol", "show", "job", "-o", job).stdout)


def remove_worker(cluster: Cluster, node: str) -> None:
    """Scale-down as the operator does it: drain, stop the pod, delete the node."""
    cluster.exec(CONTROLLER_POD, "scontrol", "update", "nodename=" + node, "state=drain", "reason=scale down")
    docker("stop", "-t", "30", cluster.containers[node], timeout=60)
    cluster.exec(CONTROLLER_POD, "scontrol", "delete", "nodename=" + node)


def job_state(cluster: Cluster, job: str) -> str:
    out = cluster.exec(CONTROLLER_POD, "scontrol", "show", "job", job, "--json").stdout
    return json.loads(out)["jobs"][0]["job_state"][0]
