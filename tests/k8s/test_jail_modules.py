"""The day-two modules against a real cluster: users in the jail, the jail volume, cluster facts,
and directory users (spec.directory) beside the jail's own.

jail_user runs against a small SlurmCluster (controller, one login, two workers, accounting) made by
the operator in the test namespace; the user is proven by logging in over ssh with the key the
module wrote and running a job on the worker as that user. The same cluster takes its other users
from a real OpenLDAP server (Debian's slapd, in a pod of the namespace, over ldaps:// with a CA of
the test's own): they resolve in every daemon's container, log in with their directory password,
get a home made at first login, run jobs as themselves on two nodes, and slurmdbd knows them (an
accounting operator among them runs sacctmgr); one removed from the directory can no longer log in.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from directory_server import (
    CA,
    DANA,
    ELI,
    FAY,
    GIL,
    PEOPLE,
    READER_DN,
    SUFFIX,
    egress_to_server,
    server_hostnames,
    server_manifests,
    users,
    write_server_files,
)
from kube_helpers import REPO, SHARED_STORAGE_CLASS, Cluster, wait_for
from slurm_helpers import (
    ACCOUNTING_IMAGES,
    SLURM_IMAGES,
    TINY,
    Operator,
    built_images,
    running_cluster,
    with_accounting_images,
)

sys.path.insert(0, str(REPO / "tests"))
from manual_blocks import run_commands
from playbook_runner import run_module
from slurm_release import images_slurm_series_text

pytestmark = pytest.mark.k8s

CLUSTER = "jt"
LOGIN_POD = CLUSTER + "-login-0"
CONTROLLER_POD = CLUSTER + "-controller-0"
WORKER_POD = CLUSTER + "-cpu-0"
# Two workers: a directory user's job runs on two nodes.
WORKER_PODS = (WORKER_POD, CLUSTER + "-cpu-1")
SLURMDBD_POD = CLUSTER + "-slurmdbd-0"
BIND_SECRET, CA_SECRET = "directory-bind", "directory-ca"
PASSWORDS = {name: secrets.token_urlsafe(12) for name in (DANA, ELI, FAY, GIL, "reader", "admin")}
KEY_IN_POD = "/tmp/jail-user-test-key"
JAIL_DATA = "jt-jail-data"
# The jails' claims: the jail-core image and the users' homes fit; a test writes past it.
JAIL_SIZE_MIB = 1024


def volume_args(images: dict, name: str, **extra) -> dict:
    return dict({"name": name, "size": "%dMi" % JAIL_SIZE_MIB, "image": images["jail"], "image_pull_policy": "Never",
                 "wait_timeout": 600}, **extra)


@pytest.fixture(scope="module")
def jail_claim(kube_cluster: Cluster, slurm_images, tmp_path_factory) -> str:
    """The cluster's jail, made and filled by jail_volume before the cluster exists."""
    proc, result = module(kube_cluster, tmp_path_factory.mktemp("jail-volume"), "jail_volume",
                          volume_args(slurm_images, JAIL_DATA))
    assert proc.returncode == 0, proc.stdout[-3000:]
    return result["claim"]


@pytest.fixture(scope="module")
def directory(kube_cluster: Cluster, tmp_path_factory) -> str:
    """The site's directory, up and Ready, and the two Secrets a site makes for it (the password
    SSSD binds with, the CA that signed the server's certificate); its ldaps:// URI."""
    kube = kube_cluster
    image = built_images("directory")["directory"]
    work = tmp_path_factory.mktemp("directory")
    files = write_server_files(work, server_hostnames(kube.namespace), users(PASSWORDS), PASSWORDS["reader"],
                               PASSWORDS["admin"])
    kube.apply(yaml.safe_dump_all(server_manifests(kube.namespace, image, files)))
    # The Secrets as the guide makes them.
    run_commands("directory-secrets", dict(kube.env, LDAP_BIND_PASSWORD=PASSWORDS["reader"],
                                           LDAP_CA_FILE=str(work / CA)), CLUSTER, kube.namespace)
    kube.kubectl("-n", kube.namespace, "wait", "--for=condition=Ready", "pod/directory", "--timeout=180s")
    return "ldaps://%s" % server_hostnames(kube.namespace)[0]


@pytest.fixture(scope="module")
def slurm_cluster(kube_cluster: Cluster, slurm_images, operator: Operator, jail_claim: str, directory: str) -> Cluster:
    """Controller, one login, two workers and accounting, on the jail jail_volume made
    (spec.jail.existingClaim), with the directory's users beside the jail's."""
    images = dict(with_accounting_images(slurm_images), **built_images("sssd"))
    spec = {"jail": {"existingClaim": jail_claim}, "partitions": [{"name": "main", "default": True}],
            "images": dict({n: images[n] for n in (*SLURM_IMAGES, *ACCOUNTING_IMAGES, "sssd")}, pullPolicy="Never"),
            "accounting": {"enabled": True, "resources": TINY, "database": {
                "resources": dict(TINY, memory="512Mi"), "storage": {"size": "1Gi"}}},
            "directory": {"ldap": {"uris": [directory], "searchBase": SUFFIX, "bindDn": READER_DN,
                                   "bindPasswordSecret": BIND_SECRET, "caSecret": CA_SECRET},
                          "passwordLogin": True},
            "egress": {"to": [egress_to_server()]}}
    with running_cluster(kube_cluster, operator, CLUSTER, images, spec, [("cpu", len(WORKER_PODS))], ready_timeout=900):
        yield kube_cluster


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


def test_a_user_writing_past_the_jails_size_is_stopped_and_can_write_again_once_they_removed_it(
        slurm_cluster: Cluster, tmp_path: Path, ssh_key):
    """The jail's claim, on the quickstart's class (kind.sh's slurmkube-shared, the session cluster's
    default): a job writing more than the claim's size gets "Disk quota exceeded" at the size, not
    the host's disk; what the user removes they can write again."""
    kube = slurm_cluster
    module(kube, tmp_path, "jail_user", alice(ssh_key[1]))
    script = ("dd if=/dev/zero of=fill bs=1M count=%d 2>&1; stat -c 'size %%s' fill; rm fill; "
              "echo again >small && cat small && rm small" % (JAIL_SIZE_MIB + 100))
    job = ssh_in_login_pod(kube, ssh_key[0], "alice", "srun -N1 -w %s sh -c %s" % (WORKER_POD, shlex.quote(script)))
    assert "Disk quota exceeded" in job.stdout, job.stdout + job.stderr
    written = int(re.search(r"^size (\d+)$", job.stdout, re.M).group(1))
    assert 0 < written <= JAIL_SIZE_MIB * 2**20, job.stdout
    assert job.stdout.rstrip().endswith("again"), job.stdout + job.stderr


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


def test_jail_volume_made_for_the_cluster_is_not_fought_by_the_operator(slurm_cluster: Cluster, slurm_images,
                                                                        tmp_path: Path):
    kube = slurm_cluster
    claim = kube.get_json("pvc", JAIL_DATA)
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"] and "slurmkube.io/cluster" not in claim["metadata"][
        "labels"]
    # The operator made no claim of its own and its populate Job found the marker at the version.
    assert kube.kubectl("-n", kube.namespace, "get", "pvc", CLUSTER + "-jail", check=False).returncode != 0
    marker = kube.exec(LOGIN_POD, "head", "-n1", "/mnt/jail/.slurmkube-jail").stdout.strip()
    assert marker == slurm_images["jail"]
    proc, result = module(kube, tmp_path, "jail_volume", volume_args(slurm_images, JAIL_DATA))
    assert proc.returncode == 0 and result["changed"] is False, proc.stdout[-3000:]


def helper_pod(kube: Cluster, images: dict, claim: str) -> str:
    """A pod that mounts the claim, to look into the jail from outside."""
    name = "look-" + claim
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": kube.namespace},
           "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "look", "image": images["jail"], "imagePullPolicy": "Never",
                                    "command": ["sleep", "infinity"],
                                    "volumeMounts": [{"name": "jail", "mountPath": "/mnt/jail"}]}],
                    "volumes": [{"name": "jail", "persistentVolumeClaim": {"claimName": claim}}]}}
    kube.apply(yaml.safe_dump(pod))
    kube.wait_pod_ready(name, timeout=180)
    return name


def test_jail_volume_check_create_rerun_repopulate_keeps_user_data(kube_cluster: Cluster, slurm_images,
                                                                   tmp_path: Path):
    kube = kube_cluster
    args = volume_args(slurm_images, "scratch-jail", storage_class=SHARED_STORAGE_CLASS)
    proc, result = module(kube, tmp_path, "jail_volume", args, "--check", "--diff")
    assert proc.returncode == 0 and result["changed"] is True, proc.stdout[-3000:]
    assert "ReadWriteMany" in proc.stdout
    assert kube.kubectl("-n", kube.namespace, "get", "pvc", "scratch-jail", check=False).returncode != 0
    assert not kube.get_json("jobs", "-l", "app.kubernetes.io/instance=scratch-jail")["items"]

    proc, result = module(kube, tmp_path, "jail_volume", args, "--diff")
    assert proc.returncode == 0 and result["changed"] is True, proc.stdout[-3000:]
    assert result["claim"] == "scratch-jail" and "populate" in proc.stdout
    job = kube.get_json("job", result["populate_job"])
    assert job["status"].get("succeeded") == 1
    assert module(kube, tmp_path, "jail_volume", args)[1]["changed"] is False

    look = helper_pod(kube, slurm_images, "scratch-jail")
    assert kube.exec(look, "head", "-n1", "/mnt/jail/.slurmkube-jail").stdout.strip() == slurm_images["jail"]
    kube.exec(look, "sh", "-c", "echo mine >/mnt/jail/etc/users-file; echo 'u:x:3000:3000::/:/bin/sh' "
              ">>/mnt/jail/etc/passwd")
    proc, result = module(kube, tmp_path, "jail_volume", dict(args, repopulate=True))
    assert proc.returncode == 0 and result["changed"] is True, proc.stdout[-3000:]
    assert kube.exec(look, "cat", "/mnt/jail/etc/users-file").stdout == "mine\n"
    assert "u:x:3000:3000::/:/bin/sh" in kube.exec(look, "cat", "/mnt/jail/etc/passwd").stdout
    assert kube.exec(look, "head", "-n1", "/mnt/jail/.slurmkube-jail").stdout.strip() == slurm_images["jail"]

    # absent keeps the data; purge is refused while a pod mounts the claim.
    proc, result = module(kube, tmp_path, "jail_volume", dict(args, state="absent"))
    assert result["changed"] is True and kube.get_json("pvc", "scratch-jail")["metadata"]["name"] == "scratch-jail"
    proc, result = module(kube, tmp_path, "jail_volume", dict(args, state="absent", purge=True))
    assert result is None and "purge: claim scratch-jail is still mounted by pod %s" % look in proc.stdout
    kube.kubectl("-n", kube.namespace, "delete", "pod", look, "--wait=true")
    proc, result = module(kube, tmp_path, "jail_volume", dict(args, state="absent", purge=True))
    assert result["changed"] is True, proc.stdout[-3000:]
    assert kube.kubectl("-n", kube.namespace, "get", "pvc", "scratch-jail", check=False).returncode != 0


@pytest.mark.parametrize(("extra", "message"), [
    ({"storage_class": "no-such-class"}, "storage_class: no StorageClass named no-such-class"),
    ({"size": "ten gigs"}, "size: 'ten gigs' is not a Kubernetes quantity"),
    ({"existing_claim": "nobody-has-this"}, "existing_claim: no PersistentVolumeClaim nobody-has-this"),
])
def test_jail_volume_bad_options_fail_before_writing(kube_cluster: Cluster, slurm_images, tmp_path: Path,
                                                     extra, message):
    kube = kube_cluster
    proc, result = module(kube, tmp_path, "jail_volume", volume_args(slurm_images, "bad-jail", **extra))
    assert result is None and message in proc.stdout, proc.stdout[-3000:]
    assert kube.kubectl("-n", kube.namespace, "get", "pvc", "bad-jail", check=False).returncode != 0
    assert not kube.get_json("jobs", "-l", "app.kubernetes.io/instance=bad-jail")["items"]


def test_slurm_cluster_info_reports_nodes_partitions_and_a_users_job(slurm_cluster: Cluster, tmp_path: Path,
                                                                     ssh_key):
    kube = slurm_cluster
    module(kube, tmp_path, "jail_user", alice(ssh_key[1]))
    submitted = ssh_in_login_pod(kube, ssh_key[0], "alice", "sbatch --parsable -w %s --wrap 'sleep 120'" % WORKER_POD)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    job_id = int(submitted.stdout.strip())
    try:
        proc, info = module(kube, tmp_path, "slurm_cluster_info", {"name": CLUSTER}, "--check")
        assert proc.returncode == 0 and info["changed"] is False, proc.stdout[-3000:]
        assert info["slurm_reachable"] is True, info.get("slurm_error")
        assert info["slurm_version"].startswith(images_slurm_series_text() + "."), info["slurm_version"]
        # The SlurmCluster's own status, as the API server has it (a busy node may make it Provisioning).
        live = kube.get_json("slurmcluster", CLUSTER)["status"]
        assert info["status"]["observedGeneration"] == live["observedGeneration"]
        assert {c["type"] for c in info["status"]["conditions"]} >= {"ControllerReady", "JailReady", "NodesReady"}
        nodes = {n["name"]: n for n in info["nodes"]}
        assert set(nodes) == set(WORKER_PODS)
        for node in nodes.values():
            assert node["partitions"] == ["main"] and node["cpus"] >= 1 and "cpu" in node["features"], node
            assert "DRAIN" not in node["state"], (node, info["status"].get("message"))
        assert [(p["name"], p["default"], p["total_nodes"]) for p in info["partitions"]] == [("main", True, 2)]
        job = next(j for j in info["jobs"] if j["job_id"] == job_id)
        assert job["user"] == "alice" and job["state"][0] in ("RUNNING", "PENDING", "CONFIGURING")
    finally:
        kube.exec(CONTROLLER_POD, "scancel", str(job_id), check=False)


def test_slurm_cluster_info_unknown_cluster_names_the_option(slurm_cluster: Cluster, tmp_path: Path):
    proc, result = module(slurm_cluster, tmp_path, "slurm_cluster_info", {"name": "nosuch"})
    assert result is None and "name: no SlurmCluster nosuch in namespace %s" % slurm_cluster.namespace in proc.stdout
    # Without a name: the namespace's clusters, as the API server lists them.
    proc, result = module(slurm_cluster, tmp_path, "slurm_cluster_info", {})
    assert proc.returncode == 0, proc.stdout[-3000:]
    live = slurm_cluster.get_json("slurmclusters.slurmkube.io")["items"]
    assert [c["name"] for c in result["clusters"]] == sorted(o["metadata"]["name"] for o in live) != []
    assert "nodes" not in result and result["clusters"][0]["namespace"] == slurm_cluster.namespace


def pod_lives(kube: Cluster) -> dict:
    """Each Slurm pod's uid and restart count: what a rollout without restarts leaves alone."""
    out = {}
    for pod in (CONTROLLER_POD, LOGIN_POD, *WORKER_PODS):
        obj = kube.get_json("pod", pod)
        out[pod] = (obj["metadata"]["uid"], [c["restartCount"] for c in obj["status"]["containerStatuses"]])
    return out


def test_munge_key_rotation_rolls_out_under_a_running_job(slurm_cluster: Cluster, tmp_path: Path):
    kube = slurm_cluster
    before = pod_lives(kube)
    old_fp = kube.get_json("slurmcluster", CLUSTER)["status"]["mungeKey"]
    job = kube.exec(CONTROLLER_POD, "sbatch", "--parsable", "-o", "/dev/null", "-w", WORKER_POD, "--wrap",
                    "sleep 60").stdout.strip()
    wait_for(lambda: job_state(kube, job) == "RUNNING", timeout=120, explain=lambda: job_state(kube, job))

    rotate = {"cluster": CLUSTER, "rotate": True, "wait_timeout": 400}
    proc, result = module(kube, tmp_path, "munge_key", rotate, "-vvv")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert result["changed"] is True and result["rolled_out"] is True
    assert result["fingerprint"].startswith("sha256:") and result["fingerprint"] != old_fp
    secret = kube.get_json("secret", CLUSTER + "-munge-key")["data"]["munge.key"]
    assert secret not in proc.stdout and secret[:40] not in proc.stdout

    status = kube.get_json("slurmcluster", CLUSTER)["status"]
    assert status["mungeKey"] == result["fingerprint"]
    for pod, container in ((CONTROLLER_POD, "slurmctld"), (LOGIN_POD, "sshd"), *((w, "slurmd") for w in WORKER_PODS)):
        keys = kube.kubectl("-n", kube.namespace, "exec", pod, "-c", container, "--", "slurmkube-munge-key",
                            "status").stdout.strip()
        assert keys == "running=%s mounted=%s" % (result["fingerprint"], result["fingerprint"]), pod
    wait_for(lambda: job_state(kube, job) == "COMPLETED", timeout=180, explain=lambda: job_state(kube, job))
    assert pod_lives(kube) == before
    # Users' commands on the login node reach slurmctld and both workers with the new key.
    run = kube.kubectl("-n", kube.namespace, "exec", LOGIN_POD, "--", "srun", "--immediate=100", "-N2", "hostname",
                       check=False)
    assert sorted(run.stdout.split()) == sorted(WORKER_PODS), (
        run.stderr, kube.exec(CONTROLLER_POD, "scontrol", "show", "node").stdout)
    events = kube.kubectl("-n", kube.namespace, "get", "events", "--field-selector",
                          "involvedObject.name=%s,reason=MungeKeyRotated" % CLUSTER, "-o", "name").stdout
    assert events.strip()


def job_state(kube: Cluster, job: str) -> str:
    out = kube.exec(CONTROLLER_POD, "scontrol", "show", "job", job, "--json").stdout
    return json.loads(out)["jobs"][0]["job_state"][0]


# ---------------------------------------------------------------------------- directory users


@pytest.mark.parametrize(("pod", "container"), [(LOGIN_POD, "sshd"), (CONTROLLER_POD, "slurmctld"),
                                                (WORKER_POD, "slurmd"), (SLURMDBD_POD, "slurmdbd")])
def test_directory_users_resolve_in_every_daemons_container_and_a_uid_below_min_id_never(slurm_cluster: Cluster,
                                                                                         pod: str, container: str):
    dana = slurm_cluster.exec(pod, "getent", "passwd", DANA, container=container, check=False)
    assert dana.stdout.split(":")[2:4] == ["5001", "5000"], (dana.stdout, dana.stderr)
    groups = slurm_cluster.exec(pod, "id", "-Gn", DANA, container=container).stdout.split()
    assert set(groups) == {"physics", "chemistry"}, groups
    assert slurm_cluster.exec(pod, "getent", "passwd", FAY, container=container, check=False).returncode == 2


def test_the_guides_check_shows_a_directory_user_as_login_and_slurmctld_see_them(slurm_cluster: Cluster):
    out = run_commands("directory-check", slurm_cluster.env, CLUSTER, slurm_cluster.namespace)
    assert "%s:*:5001:5000:" % DANA in out and "uid=5001(%s) gid=5000(physics)" % DANA in out, out


def ssh_with_password(kube: Cluster, user: str, password: str, command: str) -> subprocess.CompletedProcess:
    """ssh from the login pod to its own sshd with a password, as a user types it (ssh asks the
    askpass program: no terminal here)."""
    askpass = "/tmp/directory-test-askpass"
    kube.kubectl("-n", kube.namespace, "exec", "-i", LOGIN_POD, "-c", "sshd", "--", "sh", "-c",
                 "umask 077; cat >%s; chmod 700 %s" % (askpass, askpass),
                 input="#!/bin/sh\nprintf '%%s\\n' %s\n" % shlex.quote(password))
    return kube.exec(LOGIN_POD, "env", "SSH_ASKPASS=" + askpass, "SSH_ASKPASS_REQUIRE=force", "setsid", "-w",
                     "ssh", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                     "-o", "PreferredAuthentications=password,keyboard-interactive",
                     "-o", "NumberOfPasswordPrompts=1",
                     "%s@127.0.0.1" % user, command, container="sshd", check=False)


def test_a_directory_user_logs_in_with_their_password_gets_a_home_and_runs_jobs_as_themselves(slurm_cluster: Cluster):
    """Their job's tasks run under their directory uid on both workers, and slurmdbd records the
    job as theirs."""
    kube = slurm_cluster
    session = ssh_with_password(kube, DANA, PASSWORDS[DANA], "id -u; id -Gn; pwd; stat -c '%U %a' .; "
                                "srun -N2 -l -J directory-two-nodes id -u")
    assert session.returncode == 0, session.stdout + session.stderr
    lines = session.stdout.strip().split("\n")
    uid, groups, home, owner = lines[-6:-2]
    assert (uid, home, owner) == ("5001", "/home/" + DANA, DANA + " 700"), session.stdout
    assert sorted(lines[-2:]) == ["0: 5001", "1: 5001"], session.stdout
    assert set(groups.split()) == {"physics", "chemistry"}
    # The home is in the jail, where every node sees it.
    assert kube.exec(LOGIN_POD, "stat", "-c", "%u %a", "/mnt/jail/home/" + DANA).stdout.strip() == "5001 700"

    def recorded() -> list:
        return kube.exec(CONTROLLER_POD, "sacct", "-n", "-P", "-X", "-u", DANA, "--name", "directory-two-nodes",
                         "-o", "user,nnodes,state", check=False).stdout.split()
    wait_for(lambda: "%s|2|COMPLETED" % DANA in recorded(), timeout=120, explain=recorded)


def test_a_link_planted_by_a_new_users_name_in_the_jails_home_is_left_alone_at_their_first_login(
        slurm_cluster: Cluster):
    """Root in a job can write the jail's /home: a link planted by the name of a user who has not
    logged in yet, to a directory of the login container, is neither followed nor replaced
    (pam_mkhomedir makes a home only where nothing is, in the jail's /home bound at the pod's start)."""
    kube = slurm_cluster
    outside, planted = "/tmp/make-home-outside", "/mnt/jail/home/" + GIL
    kube.exec(LOGIN_POD, "sh", "-c", "mkdir -p %s && ln -s %s %s" % (outside, outside, planted))
    try:
        session = ssh_with_password(kube, GIL, PASSWORDS[GIL], "id -u")
        assert session.returncode == 0 and session.stdout.split()[-1] == "5003", session.stdout + session.stderr
        assert kube.exec(LOGIN_POD, "ls", "-A", outside).stdout == ""
        assert kube.exec(LOGIN_POD, "readlink", planted).stdout.strip() == outside
    finally:
        kube.exec(LOGIN_POD, "rm", "-rf", planted, outside, check=False)


def test_a_user_removed_from_the_directory_can_no_longer_log_in(slurm_cluster: Cluster):
    kube = slurm_cluster
    before = ssh_with_password(kube, GIL, PASSWORDS[GIL], "id -u")
    assert before.returncode == 0 and before.stdout.split()[-1] == "5003", before.stdout + before.stderr
    kube.exec("directory", "ldapdelete", "-x", "-H", "ldap://127.0.0.1", "-D", "cn=admin," + SUFFIX,
              "-w", PASSWORDS["admin"], "uid=%s,%s" % (GIL, PEOPLE), container="slapd")
    after = ssh_with_password(kube, GIL, PASSWORDS[GIL], "id -u")
    assert after.returncode == 255 and "Permission denied" in after.stderr, after.stdout + after.stderr


def test_a_wrong_password_and_a_user_below_min_id_are_refused(slurm_cluster: Cluster):
    wrong = ssh_with_password(slurm_cluster, ELI, PASSWORDS[DANA], "true")
    assert wrong.returncode == 255 and "Permission denied" in wrong.stderr, wrong.stderr
    low = ssh_with_password(slurm_cluster, FAY, PASSWORDS[FAY], "true")
    assert low.returncode == 255 and "Permission denied" in low.stderr, low.stderr


def test_slurmdbd_knows_directory_users_an_accounting_operator_among_them_runs_sacctmgr(slurm_cluster: Cluster):
    """slurmdbd maps a request's uid to its user (AdminLevel): only a slurmdbd that resolves the
    directory lets a directory user it made an operator add an account."""
    kube = slurm_cluster
    kube.exec(CONTROLLER_POD, "sacctmgr", "-i", "add", "user", ELI, "account=root", "adminlevel=operator")
    try:
        added = ssh_with_password(kube, ELI, PASSWORDS[ELI], "sacctmgr -i add account physics-lab")
        assert added.returncode == 0, added.stdout + added.stderr
        listed = kube.exec(CONTROLLER_POD, "sacctmgr", "-n", "-P", "show", "account", "physics-lab", "format=account")
        assert listed.stdout.split() == ["physics-lab"]
    finally:
        kube.exec(CONTROLLER_POD, "sacctmgr", "-i", "delete", "account", "physics-lab", check=False)
        kube.exec(CONTROLLER_POD, "sacctmgr", "-i", "delete", "user", ELI, check=False)
