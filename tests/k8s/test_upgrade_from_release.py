"""A cluster made by the collection's last release, 0.3.0, upgraded by this tree the way its users
upgrade (issue 34, item 2): site.yml with the same settings, on a Kubernetes of one's own, run
first from 0.3.0's collection with its images (built by its own images/build.sh: Slurm 24.11; its
jail without the user software, RELEASE_JAIL_PACKAGES),
then from this tree with its images, backups turned on. 0.3.0's operator made the
cluster and knew nothing of upgrades: this tree's operator takes it over as it finds it, and Slurm
still changes in Slurm's order (a pre-flight, a backup, slurmdbd, slurmctld, one worker first).
Afterwards the running job finished, the pending one ran, `sacct` lists the history from before,
and slurmctld reports the new release. Real API server, slurmctld, slurmd, slurmdbd, MariaDB and
restic, on a kind cluster of its own (the two releases' CRDs and operators cannot share one).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence

import pytest
import yaml
from kube_helpers import REPO, Cluster, kind, up_kind, wait_for
from slurm_helpers import TINY, TINY_NODES, Operator, SlurmView, cluster_status, controller_log, log_followed

sys.path.insert(0, str(REPO / "tests"))
from collection_path import ensure_importable
from playbook_runner import run_playbook
from slurm_release import images_slurm_series_text

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

pytestmark = [pytest.mark.k8s, pytest.mark.kind]

RELEASE = "0.3.0"
# The commit galaxy.yml said 0.3.0 last (the next one began 0.4.0); read from this repository's history.
RELEASE_COMMIT = "792386e5844086953884e2ee96488cb058e08cdb"
KIND_NAME = "slurmkube-release"
NAMESPACE = "hpc"
OPERATOR_NAMESPACE = "upgrade-system"
CLUSTER = "old"
# The images both releases' clusters run (spec.images keys are their images/build.sh names).
CLUSTER_IMAGES = ("controller", "worker", "login", "jail", "slurmdbd", "mariadb")
BACKUP_CLAIM = "%s-backups" % CLUSTER
BACKUP_PASSWORD_SECRET = "%s-backup-password" % CLUSTER


# 0.3.0's jail Dockerfile installs the user software (compilers, MPI, editors: about 1 GB of its
# 1.26 GB image; 298 MB without) in one list; the upgrade never reads it, and this tree's tests run
# jail-core for the same reason (images/build.sh). The list is left out, as jail-core leaves it
# out, but for python3.
RELEASE_JAIL_PACKAGES = ("      bash-completion bzip2 cmake curl file g++ gcc gfortran git htop iproute2 \\\n"
                         "      iputils-ping less libopenmpi-dev locales make man-db nano openmpi-bin \\\n"
                         "      openssh-client psmisc python3 python3-dev python3-pip python3-venv rsync \\\n"
                         "      screen time tmux unzip vim wget xz-utils zip zstd \\\n")
CORE_JAIL_PACKAGES = "      python3 \\\n"


def release_collection(root: Path) -> Path:
    """ROOT holding ansible_collections/slurmkube/core as release 0.3.0 shipped it (its tree at
    RELEASE_COMMIT) but for its jail's user software (RELEASE_JAIL_PACKAGES), made once."""
    tree = root / "ansible_collections" / "slurmkube" / "core"
    if not (tree / "galaxy.yml").exists():
        has = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", RELEASE_COMMIT + "^{commit}"],
                             capture_output=True, check=False)
        assert has.returncode == 0, ("release %s's tree is read from this repository's history (commit %s): a "
                                     "clone without it (--depth) cannot run this test" % (RELEASE, RELEASE_COMMIT))
        made = tree.with_name("core.partial")
        shutil.rmtree(made, ignore_errors=True)
        made.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", RELEASE_COMMIT], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(made)], input=archive, check=True)
        jail = made / "images" / "jail" / "Dockerfile"
        dockerfile = jail.read_text()
        assert RELEASE_JAIL_PACKAGES in dockerfile, dockerfile
        jail.write_text(dockerfile.replace(RELEASE_JAIL_PACKAGES, CORE_JAIL_PACKAGES))
        made.rename(tree)
    assert yaml.safe_load((tree / "galaxy.yml").read_text())["version"] == RELEASE
    return root


def built(tree: Path, names: Sequence[str], cache: Optional[Path] = None) -> Dict[str, str]:
    """NAMES built by TREE's images/build.sh (or found up to date), by name; with a CACHE of their
    own (SLURMKUBE_CACHE), whose build lock then holds no other build."""
    env = dict(os.environ, **({"SLURMKUBE_CACHE": str(cache)} if cache else {}))
    build = subprocess.run(["bash", str(tree / "images" / "build.sh"), *names], capture_output=True, text=True,
                           timeout=3600, check=False, env=env)
    assert build.returncode == 0, build.stderr[-4000:]
    refs = json.loads(build.stdout)
    return {name: refs[name] for name in names}


def with_debian_roots(cache: Path, release_cache: Path) -> Path:
    """RELEASE_CACHE, with the debootstrap roots of CACHE linked in: both builds name a root by its
    suite, mirror and the mirror's Release date, so 0.3.0's build finds this tree's (made by a
    rename: a name is a whole root) instead of running debootstrap again."""
    roots = release_cache / "rootfs"
    roots.mkdir(parents=True, exist_ok=True)
    for tarball in (cache / "rootfs").glob("trixie-*.tar"):
        if not (roots / tarball.name).exists():
            os.link(tarball, roots / tarball.name)
    return release_cache


@pytest.fixture(scope="module")
def releases(tmp_path_factory) -> Dict[str, Dict[str, Any]]:
    """Each release's collection root and images: 0.3.0's ("old") and this tree's ("new")."""
    cache = Path(os.environ.get("SLURMKUBE_CACHE", "/var/cache/slurmkube"))
    old_root = release_collection(cache / "releases" / ("%s-core-jail" % RELEASE))
    old_tree = old_root / "ansible_collections" / "slurmkube" / "core"
    new = built(REPO, ("controller", "worker", "login", "jail-core", "operator", "slurmdbd", "mariadb", "backup"))
    new["jail"] = new.pop("jail-core")
    # 0.3.0's build in a cache of its own: it holds its build lock for minutes (its full jail among
    # them), and the other pytest process's modules build this tree's images meanwhile.
    old = built(old_tree, (*CLUSTER_IMAGES, "operator"), with_debian_roots(cache, old_root / "cache"))
    return {"old": {"collections": old_root, "images": old},
            "new": {"collections": ensure_importable().parents[2], "images": new}}


@pytest.fixture(scope="module")
def kube(releases: Dict[str, Dict[str, Any]]) -> Iterator[Cluster]:
    """A one-node kind cluster of this module's own, the images of both releases' pods on it (not
    the login images: SPEC makes no login pod)."""
    was_running, env = up_kind(KIND_NAME, "0")
    kind("load", KIND_NAME, *sorted({ref for release in releases.values() for name, ref in release["images"].items()
                                     if name != "login"}))
    cluster = Cluster(env=env, namespace=NAMESPACE)
    yield cluster
    if not was_running and os.environ.get("SLURMKUBE_TEST_KEEP") != "1":
        kind("down", KIND_NAME, check=False)


def site_play(workdir: Path, kube: Cluster, release: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    """RELEASE's site.yml on KUBE (a Kubernetes of one's own: its kubeconfig given), with its images
    and this cluster; the play's output (it must succeed)."""
    settings = {
        "slurmkube_kubeconfig": kube.env["KUBECONFIG"], "slurmkube_images": release["images"],
        "slurmkube_pull_policy": "Never", "slurmkube_operator_namespace": OPERATOR_NAMESPACE,
        "slurmkube_cluster": {"metadata": {"name": CLUSTER, "namespace": NAMESPACE}, "spec": spec},
        "slurmkube_node_sets": [{"metadata": {"name": "cpu"}, "spec": dict(TINY_NODES, replicas=1)}],
    }
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "settings.json").write_text(json.dumps(settings))
    collection = release["collections"] / "ansible_collections" / "slurmkube" / "core"
    proc = run_playbook(collection / "playbooks" / "site.yml", "-e", "@%s" % (workdir / "settings.json"),
                        env=dict(kube.env), collections=release["collections"])
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    return proc.stdout


# What both releases' clusters ask for: small pods, slurmdbd and its database, no login node.
SPEC = {"controller": {"resources": TINY, "stateVolume": {"size": "1Gi"}},
        "login": {"replicas": 0, "resources": TINY},
        "accounting": {"enabled": True, "resources": TINY,
                       "database": {"resources": dict(TINY, memory="512Mi"), "storage": {"size": "1Gi"}}},
        "slurm": {"config": {"AuthInfo": "cred_expire=30"}}}


def sacct_states(slurm: SlurmView, jobs: Sequence[str]) -> Dict[str, str]:
    out = slurm.kube.exec("%s-controller-0" % CLUSTER, "sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j",
                          ",".join(jobs), check=False).stdout
    return dict(line.split("|") for line in out.splitlines() if line.count("|") == 1)


def test_a_cluster_of_release_0_3_0_upgraded_by_this_release_keeps_its_jobs_and_history(
        kube: Cluster, releases: Dict[str, Dict[str, Any]], tmp_path: Path) -> None:
    site_play(tmp_path / "old", kube, releases["old"], SPEC)
    slurm = SlurmView(kube, CLUSTER)
    assert slurm.run("scontrol", "version").split()[-1].startswith("24.11."), "0.3.0 shipped Slurm 24.11"
    wait_for(lambda: CLUSTER in slurm.run("sacctmgr", "-n", "-P", "list", "cluster", "format=Cluster").split(),
             120, 2)
    history = slurm.run("sbatch", "--parsable", "--wait", "-o", "/dev/null", "--wrap", "true").split()[0]
    wait_for(lambda: sacct_states(slurm, [history]).get(history) == "COMPLETED", 120, 2)
    running = slurm.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 120").split()[0]
    slurm.wait_running(running)
    pending = slurm.run("sbatch", "--parsable", "-o", "/dev/null", "--dependency=afterany:" + running,
                        "--wrap", "true").split()[0]  # fmt: skip

    # This release's play, as a user runs it after installing it: the same variables, and a backup
    # (new in this release: the upgrade runs one before slurmdbd changes).
    kube.apply(json.dumps({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": BACKUP_CLAIM},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}) + "\n---\n" +
        json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": BACKUP_PASSWORD_SECRET},
                    "stringData": {C.BACKUP_PASSWORD_SECRET_KEY: "before-the-upgrade"}}))
    new = releases["new"]["images"]
    # What SchedMD's upgrade guide asks a copy of, slurmctld's state and the database; not 0.3.0's
    # jail (its full one, 1.3 GB: test_accounting backs a jail up).
    spec = dict(SPEC, backup={"enabled": True, "claimName": BACKUP_CLAIM, "passwordSecret": BACKUP_PASSWORD_SECRET,
                              "schedule": "0 0 1 1 *", "resources": TINY, "jail": False})
    operator = Operator(kube, OPERATOR_NAMESPACE, new["operator"])
    controller = "%s-controller-0" % CLUSTER
    with log_followed(kube, controller) as old_controller:
        def explain() -> str:
            logs = {"old controller": old_controller(), "controller": controller_log(kube, controller)}
            pods = kube.kubectl("-n", NAMESPACE, "get", "pods", "-o", "wide", check=False).stdout
            told = "\n".join("--- %s\n%s" % (name, log[-3000:]) for name, log in logs.items())
            return "\n".join((json.dumps(cluster_status(kube, CLUSTER)), pods,
                              "sacct: %s" % sacct_states(slurm, [history, running, pending]),
                              operator.logs()[-4000:], told))
        try:
            site_play(tmp_path / "new", kube, releases["new"], spec)
        except AssertionError as failed:
            raise AssertionError("%s\n%s" % (failed, explain())) from None
        status = cluster_status(kube, CLUSTER).get("slurm") or {}
        assert status.get("images", {}).get("controller") == new["controller"], explain()
        assert status["version"].startswith(images_slurm_series_text() + "."), status
        config = slurm.run("scontrol", "show", "config")
        assert "SLURM_VERSION           = %s" % status["version"] in config, config[:2000]

        def all_ended() -> Dict[str, str]:
            states = sacct_states(slurm, [history, running, pending])
            return states if states.get(running) == states.get(pending) == "COMPLETED" else {}

        states = wait_for(all_ended, 600, 5, explain=explain)
    assert states[history] == "COMPLETED", states
    for pod, image in (("%s-cpu-0" % CLUSTER, new["worker"]), (controller, new["controller"]),
                       ("%s-slurmdbd-0" % CLUSTER, new["slurmdbd"])):
        assert kube.get_json("pod", pod)["spec"]["containers"][0]["image"] == image, pod
    # The backup before the upgrade: both parts saved, and done before slurmdbd's new pod was made.
    snapshot = upgrade_backup_job(kube)
    log = kube.kubectl("-n", NAMESPACE, "logs", "job/" + snapshot).stdout
    assert "backup done: %s %s" % (C.BACKUP_PART_CONTROLLER_STATE, C.BACKUP_PART_DATABASE) in log, log[-3000:]
    slurmdbd = kube.get_json("pod", "%s-slurmdbd-0" % CLUSTER)
    done = kube.get_json("job", snapshot)["status"]["completionTime"]
    assert done <= slurmdbd["metadata"]["creationTimestamp"], (done, slurmdbd["metadata"])
    # Slurm's order, as the Events told it: the pre-flight, the backup, then slurmdbd before slurmctld.
    said = [(e["reason"], e["message"]) for e in sorted(
        kube.get_json("events", "--field-selector", "involvedObject.name=" + CLUSTER)["items"],
        key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")]
    reasons = [event[0] for event in said]
    assert reasons.index("PreFlight") < reasons.index("UpgradeSnapshot") < reasons.index("UpgradeStage"), said
    stages = [message for reason, message in said if reason == "UpgradeStage"]
    slurmdbd_first = [i for i, m in enumerate(stages) if m.startswith("slurmdbd serves")]
    controller_next = [i for i, m in enumerate(stages) if m.startswith("slurmctld runs")]
    assert slurmdbd_first and controller_next and slurmdbd_first[0] < controller_next[0], stages


def upgrade_backup_job(kube: Cluster) -> str:
    """The backup Job the upgrade ran first: the only one of the cluster's backup Jobs (none is
    run by its schedule, the first of January)."""
    selector = "%s=%s,%s=%s" % (C.LABEL_CLUSTER, CLUSTER, C.LABEL_COMPONENT, C.COMPONENT_BACKUP)
    names = [job["metadata"]["name"] for job in kube.get_json("jobs", "-l", selector)["items"]]
    assert len(names) == 1 and "-backup-upgrade-" in names[0], names
    return names[0]
