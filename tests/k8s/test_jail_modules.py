"""The day-two modules against a real cluster: users in the jail, the jail volume, cluster facts.

jail_user runs against a small SlurmCluster (controller, one login, one worker) made by the
operator in the test namespace; the user is proven by logging in over ssh with the key the
module wrote and running a job on the worker as that user.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from localkube_helpers import REPO, Cluster, wait_for

sys.path.insert(0, str(REPO / "tests"))
from playbook_runner import run_module

with contextlib.suppress(ImportError):  # the shared fixtures, until they live in tests/k8s/conftest.py
    from test_operator import crds, operator, slurm_images  # noqa: F401

pytestmark = pytest.mark.k8s

CLUSTER = "jt"
LOGIN_POD = CLUSTER + "-login-0"
CONTROLLER_POD = CLUSTER + "-controller-0"
WORKER_POD = CLUSTER + "-cpu-0"
KEY_IN_POD = "/tmp/jail-user-test-key"


def small_cluster(namespace: str, images: dict) -> str:
    small = {"cpu": "100m", "memory": "256Mi"}
    cluster = {
        "apiVersion": "slurmkube.io/v1alpha1", "kind": "SlurmCluster",
        "metadata": {"name": CLUSTER, "namespace": namespace},
        "spec": {
            "images": dict({n: images[n] for n in ("controller", "worker", "login", "jail")}, pullPolicy="Never"),
            "controller": {"resources": small, "stateVolume": {"size": "1Gi"}},
            "login": {"resources": small},
            "jail": {"size": "5Gi"},
            "partitions": [{"name": "main", "default": True}],
        },
    }
    nodeset = {"apiVersion": "slurmkube.io/v1alpha1", "kind": "NodeSet",
               "metadata": {"name": "cpu", "namespace": namespace},
               "spec": {"clusterName": CLUSTER, "replicas": 1,
                        "resources": {"cpu": 1, "cpuRequest": "100m", "memory": "1Gi"}}}
    return yaml.safe_dump_all([cluster, nodeset])


@pytest.fixture(scope="module")
def slurm_cluster(localkube_cluster: Cluster, slurm_images, operator) -> Cluster:
    kube = localkube_cluster
    kube.apply(small_cluster(kube.namespace, slurm_images))

    def ready():
        status = kube.get_json("slurmcluster", CLUSTER).get("status") or {}
        return status.get("phase") == "Ready"

    try:
        wait_for(ready, timeout=900, interval=5)
    except AssertionError:
        pods = kube.kubectl("-n", kube.namespace, "get", "pods", "-o", "wide", check=False).stdout
        raise AssertionError("cluster %s not Ready:\n%s\noperator log:\n%s"
                             % (CLUSTER, pods, Path(operator).read_text()[-4000:])) from None
    return kube


def module(kube: Cluster, tmp_path: Path, name: str, args: dict, *flags: str):
    full = dict(args, namespace=kube.namespace, kubeconfig=kube.env["KUBECONFIG"])
    return run_module(tmp_path, name, full, *flags, env=kube.env)


def jail_passwd(kube: Cluster) -> str:
    return kube.exec(LOGIN_POD, "cat", "/mnt/jail/etc/passwd").stdout


@pytest.fixture(scope="module")
def ssh_key(tmp_path_factory) -> tuple:
    """(private key path on this machine, public key line)."""
    path = tmp_path_factory.mktemp("ssh") / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "jail-user-test", "-f", str(path)],
                   check=True)
    return path, path.with_suffix(".pub").read_text().strip()


def ssh_in_login_pod(kube: Cluster, key: Path, user: str, command: str) -> subprocess.CompletedProcess:
    """ssh from the login pod to its own sshd: the path a user takes, without a NodePort."""
    kube.kubectl("-n", kube.namespace, "exec", "-i", LOGIN_POD, "--", "sh", "-c",
                 "umask 077; cat >%s" % KEY_IN_POD, input=key.read_text())
    return kube.exec(LOGIN_POD, "ssh", "-i", KEY_IN_POD, "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes",
                     "-o", "UserKnownHostsFile=/dev/null", "%s@127.0.0.1" % user, command, check=False)


def alice(key: str, **extra) -> dict:
    return dict({"cluster": CLUSTER, "name": "alice", "uid": 2101, "gid": 2101, "ssh_authorized_keys": [key]},
                **extra)


def test_jail_user_check_mode_writes_nothing(slurm_cluster: Cluster, tmp_path: Path, ssh_key):
    proc, result = module(slurm_cluster, tmp_path, "jail_user", alice(ssh_key[1]), "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert result["changed"] is True and result["user"]["passwd"] == "alice:x:2101:2101::/home/alice:/bin/bash"
    assert "alice:x:2101:2101::/home/alice:/bin/bash" in proc.stdout
    assert "alice:" not in jail_passwd(slurm_cluster)


def test_jail_user_created_then_idempotent(slurm_cluster: Cluster, tmp_path: Path, ssh_key):
    proc, result = module(slurm_cluster, tmp_path, "jail_user", alice(ssh_key[1]), "--diff")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert result["changed"] is True and result["pod"] == LOGIN_POD
    assert result["user"]["uid"] == 2101 and result["user"]["ssh_authorized_keys"] == [ssh_key[1]]
    assert "alice:x:2101:2101::/home/alice:/bin/bash" in jail_passwd(slurm_cluster)
    stat = slurm_cluster.exec(LOGIN_POD, "stat", "-c", "%u:%g %a", "/mnt/jail/home/alice/.ssh",
                              "/mnt/jail/home/alice/.ssh/authorized_keys").stdout.split("\n")
    assert stat[:2] == ["2101:2101 700", "2101:2101 600"]
    proc, result = module(slurm_cluster, tmp_path, "jail_user", alice(ssh_key[1]))
    assert proc.returncode == 0 and result["changed"] is False, proc.stdout[-3000:]


def test_jail_user_logs_in_over_ssh_and_runs_a_job_on_the_worker(slurm_cluster: Cluster, tmp_path: Path, ssh_key):
    module(slurm_cluster, tmp_path, "jail_user", alice(ssh_key[1]))
    # nss-extrausers on the controller reads the jail: slurmctld puts the name in the credential.
    assert slurm_cluster.exec(CONTROLLER_POD, "getent", "passwd", "alice").stdout.startswith("alice:x:2101:")
    session = ssh_in_login_pod(slurm_cluster, ssh_key[0], "alice", "id -un; srun -N1 -w %s id" % WORKER_POD)
    assert session.returncode == 0, session.stdout + session.stderr
    lines = session.stdout.split("\n")
    assert lines[0] == "alice"
    assert lines[1].startswith("uid=2101(alice) gid=2101(alice)"), session.stdout


def test_jail_user_diff_shows_the_change_and_check_mode_keeps_it_out(slurm_cluster: Cluster, tmp_path: Path,
                                                                     ssh_key):
    module(slurm_cluster, tmp_path, "jail_user", alice(ssh_key[1]))
    proc, result = module(slurm_cluster, tmp_path, "jail_user", alice(ssh_key[1], shell="/bin/sh"),
                          "--check", "--diff")
    assert result["changed"] is True
    assert '-    "passwd": "alice:x:2101:2101::/home/alice:/bin/bash"' in proc.stdout, proc.stdout[-3000:]
    assert '+    "passwd": "alice:x:2101:2101::/home/alice:/bin/sh"' in proc.stdout, proc.stdout[-3000:]
    assert "alice:x:2101:2101::/home/alice:/bin/bash" in jail_passwd(slurm_cluster)


@pytest.mark.parametrize(("args", "message"), [
    ({"name": "mallory", "uid": 2101}, "uid: 2101 is already the uid of user alice"),
    ({"name": "mallory", "groups": ["no-such-group"]}, "groups: no group no-such-group in the jail"),
    ({"name": "Mallory"}, "name: 'Mallory' is not a valid account name"),
])
def test_jail_user_bad_options_fail_before_writing(slurm_cluster: Cluster, tmp_path: Path, ssh_key, args, message):
    module(slurm_cluster, tmp_path, "jail_user", alice(ssh_key[1]))
    before = jail_passwd(slurm_cluster)
    proc, result = module(slurm_cluster, tmp_path, "jail_user", dict(args, cluster=CLUSTER))
    assert result is None and message in proc.stdout, proc.stdout[-3000:]
    assert jail_passwd(slurm_cluster) == before


def test_jail_user_without_a_cluster_pod_says_so(slurm_cluster: Cluster, tmp_path: Path):
    proc, result = module(slurm_cluster, tmp_path, "jail_user", {"cluster": "nosuch", "name": "bob"})
    assert result is None and "no ready login or worker pod of SlurmCluster nosuch" in proc.stdout


def test_jail_user_absent_keeps_the_home_unless_asked(slurm_cluster: Cluster, tmp_path: Path):
    args = {"cluster": CLUSTER, "name": "dave", "uid": 2102}
    assert module(slurm_cluster, tmp_path, "jail_user", args)[1]["changed"] is True
    proc, result = module(slurm_cluster, tmp_path, "jail_user", dict(args, state="absent"))
    assert result["changed"] is True and result["user"] == {}, proc.stdout[-3000:]
    assert "dave:" not in jail_passwd(slurm_cluster)
    assert slurm_cluster.exec(LOGIN_POD, "test", "-d", "/mnt/jail/home/dave", check=False).returncode == 0
    assert module(slurm_cluster, tmp_path, "jail_user", dict(args, state="absent"))[1]["changed"] is False
    module(slurm_cluster, tmp_path, "jail_user", args)
    module(slurm_cluster, tmp_path, "jail_user", dict(args, state="absent", remove_home=True))
    assert slurm_cluster.exec(LOGIN_POD, "test", "-d", "/mnt/jail/home/dave", check=False).returncode != 0
