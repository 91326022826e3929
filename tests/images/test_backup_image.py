"""The backup image's roles as spec.backup's CronJob and a restore's Job run them: the pod the
renderer writes (its environment, mounts and security context) run by docker against a real
MariaDB (the mariadb image, as the in-cluster database runs) and directories standing for the
jail and the state claim. Each run saves one restic snapshot per part that restores what was
there; a failing dump saves no database snapshot (the others still saved) and fails the run; the
retention forgets the rest. A restore writes back a user's home (exactly, or leaving what is new),
the state and the database, and refuses a snapshot of another part or a path it does not hold."""

from __future__ import annotations

import json
import uuid
from typing import Dict, Iterator, List

import pytest
from docker_cluster import docker, remove_as_root, run, wait_for

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.render.backup import (
    render_backup_cronjob,
    render_restore_job,
)

pytestmark = pytest.mark.slurm

CLUSTER, NAMESPACE = "demo", "hpc"
DB_PASSWORD = "db-%s" % uuid.uuid4().hex[:12]
REPOSITORY_PASSWORD = "repo-%s" % uuid.uuid4().hex[:12]
# A file only its owner may read: the backup reads it with CAP_DAC_READ_SEARCH alone.
SECRET_TEXT = "alice's notes\n"


def backup_model(keep_last: int = 3):
    return parse_cluster({"metadata": {"name": CLUSTER, "namespace": NAMESPACE}, "spec": {
        "accounting": {"enabled": True},
        "backup": {"enabled": True, "claimName": "backups", "passwordSecret": "backup-password",
                   "retention": {"last": keep_last, "daily": 0, "weekly": 0, "monthly": 0}}}})


def rendered_container(model) -> Dict:
    return render_backup_cronjob(model)["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]


def env_words(container: Dict, db_password: str) -> List[str]:
    """The container's env as docker's -e words: the two Secrets' values put in."""
    secrets = {"backup-password": REPOSITORY_PASSWORD, names.accounting_db_secret(CLUSTER): db_password}
    words = []
    for var in container["env"]:
        value = var["value"] if "value" in var else secrets[var["valueFrom"]["secretKeyRef"]["name"]]
        words += ["-e", "%s=%s" % (var["name"], value)]
    return words


def security_words(context: Dict) -> List[str]:
    words = ["--user", str(context["runAsUser"]), "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
    words += [w for cap in context["capabilities"]["add"] for w in ("--cap-add", cap)]
    return words + (["--read-only"] if context["readOnlyRootFilesystem"] else [])


@pytest.fixture(scope="module")
def site(images, tmp_path_factory) -> Iterator[Dict]:
    """A docker network with the database answering as the cluster's MariaDB Service, its table
    holding a row; the jail and state directories; an empty repository directory."""
    root = tmp_path_factory.mktemp("backup")
    network = "slurmkube-backup-%s" % uuid.uuid4().hex[:8]
    database = "%s-db" % network
    docker("network", "create", network)
    try:
        docker("run", "-d", "--name", database, "--network", network, "--network-alias", names.database(CLUSTER),
               "-e", "%s=%s" % (C.ENV_DB_PASSWORD, DB_PASSWORD), "-e", "%s=slurm_acct_db" % C.ENV_DB_NAME,
               "-e", "%s=slurm" % C.ENV_DB_USER, "--tmpfs", C.DATABASE_RUN_DIR, images["mariadb"])
        wait_for("the database answers", lambda: sql(database, "SELECT 1").returncode == 0, timeout=120)
        sql(database, "CREATE TABLE slurm_acct_db.history (job INT, name TEXT); "
                      "INSERT INTO slurm_acct_db.history VALUES (26, 'kept-job');", check=True)
        jail, state, repository = root / "jail", root / "state", root / "repository"
        (jail / "home" / "alice").mkdir(parents=True)
        notes = jail / "home" / "alice" / "notes"
        notes.write_text(SECRET_TEXT)
        notes.chmod(0o600)
        run("chown", "-R", "2000:2000", str(jail / "home" / "alice"))
        (jail / "home" / "alice").chmod(0o700)
        state.mkdir()
        (state / "job_state").write_bytes(b"\x00job state\x01")
        repository.mkdir()
        yield {"network": network, "database": database, "jail": jail, "state": state, "repository": repository,
               "root": root}
    finally:
        docker("rm", "-f", database, check=False)
        docker("network", "rm", network, check=False)
        remove_as_root(root / "repository")


def sql(container: str, statement: str, check: bool = False):
    return docker("exec", container, "mariadb", "--socket=%s/mysqld.sock" % C.DATABASE_RUN_DIR, "-e", statement,
                  check=check)


def run_backup(images, site, model, db_password: str = DB_PASSWORD, without_capability: bool = False):
    """The rendered container, its mounts on the site's directories, as the kubelet would run it
    (or without the capability it is given)."""
    container = rendered_container(model)
    if without_capability:
        container["securityContext"]["capabilities"]["add"] = []
    return run_container(images, site, container, db_password)


def run_container(images, site, container: Dict, db_password: str = DB_PASSWORD):
    """A rendered container run by docker as the kubelet would: its env with the Secrets' values,
    its security context, its claims on the site's directories and its emptyDirs as tmpfs."""
    host_dirs = {C.BACKUP_JAIL_DIR: site["jail"], C.BACKUP_STATE_DIR: site["state"],
                 C.BACKUP_REPOSITORY_DIR: site["repository"]}
    mounts = []
    for mount in container["volumeMounts"]:
        if mount["mountPath"] in host_dirs:
            mode = ":ro" if mount.get("readOnly") else ""
            mounts += ["-v", "%s:%s%s" % (host_dirs[mount["mountPath"]], mount["mountPath"], mode)]
        else:  # the emptyDirs
            mounts += ["--tmpfs", mount["mountPath"]]
    # The kubelet runs the container's command in the image's entrypoint's stead.
    return docker("run", "--rm", "--network", site["network"], *security_words(container["securityContext"]),
                  *env_words(container, db_password), *mounts, "--entrypoint", container["command"][0],
                  images["backup"], *container["command"][1:], check=False, timeout=300)


def restic(images, site, *args: str) -> str:
    return docker("run", "--rm", "-e", "RESTIC_PASSWORD=" + REPOSITORY_PASSWORD, "-e", "RESTIC_REPOSITORY=/repo",
                  "-v", "%s:/repo" % site["repository"], "-v", "%s:/out" % site["root"], "--entrypoint", "restic",
                  images["backup"], "--no-cache", *args).stdout


def snapshots(images, site) -> List[Dict]:
    return json.loads(restic(images, site, "snapshots", "--json"))


def test_a_run_saves_one_snapshot_per_part_which_restores_what_was_there(images, site):
    model = backup_model()
    first = run_backup(images, site, model)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "making it" in first.stdout  # the repository was made on the first run
    assert REPOSITORY_PASSWORD not in first.stdout + first.stderr and DB_PASSWORD not in first.stdout + first.stderr
    saved = snapshots(images, site)
    host = names.backup_host(CLUSTER, NAMESPACE)
    assert sorted(s["tags"][0] for s in saved) == sorted([C.BACKUP_PART_JAIL, C.BACKUP_PART_CONTROLLER_STATE,
                                                          C.BACKUP_PART_DATABASE]), saved
    assert {s["hostname"] for s in saved} == {host}
    # A user's file, restored where restic is told, has its content and its owner.
    restic(images, site, "restore", "latest", "--tag", C.BACKUP_PART_JAIL, "--target", "/out/restored",
           "--include", C.BACKUP_JAIL_DIR + "/home/alice/notes")
    restored = site["root"] / "restored" / C.BACKUP_JAIL_DIR.lstrip("/") / "home" / "alice" / "notes"
    assert restored.read_text() == SECRET_TEXT and restored.stat().st_uid == 2000
    state = restic(images, site, "dump", "latest", "--tag", C.BACKUP_PART_CONTROLLER_STATE,
                   C.BACKUP_STATE_DIR + "/job_state")
    assert state.encode("latin-1") == b"\x00job state\x01"
    dump = restic(images, site, "dump", "latest", "--tag", C.BACKUP_PART_DATABASE, "/slurm_acct_db.sql")
    assert "CREATE DATABASE" in dump and "kept-job" in dump, dump[:2000]


def test_a_failing_dump_saves_no_database_snapshot_and_fails_the_run_the_other_parts_saved(images, site):
    before = snapshots(images, site)
    failed = run_backup(images, site, backup_model(), db_password="not-the-password")
    assert failed.returncode != 0, failed.stdout[-3000:]
    assert "failed: %s" % C.BACKUP_PART_DATABASE in failed.stdout, failed.stdout[-3000:]
    new = [s for s in snapshots(images, site) if s["id"] not in {b["id"] for b in before}]
    assert sorted(s["tags"][0] for s in new) == sorted([C.BACKUP_PART_JAIL, C.BACKUP_PART_CONTROLLER_STATE]), new


def test_without_its_capability_the_jail_is_saved_short_of_a_users_files_and_the_run_fails(images, site):
    """CAP_DAC_READ_SEARCH is what lets root read a user's 0600 file: without it restic saves the
    jail without them, and the run says so and fails."""
    short = run_backup(images, site, backup_model(), without_capability=True)
    assert short.returncode != 0, short.stdout[-3000:]
    assert "%s: snapshot saved without the files restic could not read" % C.BACKUP_PART_JAIL in short.stdout, \
        short.stdout[-3000:]
    assert "failed: %s" % C.BACKUP_PART_JAIL in short.stdout, short.stdout[-3000:]


def test_the_retention_keeps_the_newest_of_each_part(images, site):
    for _run in range(2):
        done = run_backup(images, site, backup_model(keep_last=2))
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    by_part: Dict[str, int] = {}
    for snapshot in snapshots(images, site):
        by_part[snapshot["tags"][0]] = by_part.get(snapshot["tags"][0], 0) + 1
    assert by_part == {C.BACKUP_PART_JAIL: 2, C.BACKUP_PART_CONTROLLER_STATE: 2, C.BACKUP_PART_DATABASE: 2}, by_part


def test_the_role_refuses_to_run_without_its_repository_or_password(images):
    out = docker("run", "--rm", "-e", "%s=%s/%s" % (C.ENV_BACKUP_HOST, NAMESPACE, CLUSTER),
                 "-e", "%s=%s" % (C.ENV_BACKUP_PARTS, C.BACKUP_PART_JAIL), images["backup"], check=False)
    assert out.returncode != 0 and C.ENV_BACKUP_PASSWORD in out.stdout, out.stdout + out.stderr


# --------------------------------------------------------------------------- restores


def restore_container(**restore) -> Dict:
    model = parse_cluster({"metadata": {"name": CLUSTER, "namespace": NAMESPACE}, "spec": {
        "accounting": {"enabled": True},
        "backup": {"claimName": "backups", "passwordSecret": "backup-password",
                   "restore": dict(name="r1", **restore)}}})
    return render_restore_job(model, model.spec.backup.restore)["spec"]["template"]["spec"]["containers"][0]


def test_a_users_home_comes_back_with_its_owner_exactly_and_what_is_new_elsewhere_stays(images, site):
    jail = site["jail"]
    notes, extra, elsewhere = jail / "home" / "alice" / "notes", jail / "home" / "alice" / "extra", jail / "new-file"
    run("rm", "-f", str(notes))
    for path in (extra, elsewhere):
        run("sh", "-c", "echo new > %s" % path)
    done = run_container(images, site, restore_container(jail=True, jailPaths=["/home/alice"], exact=True))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "restore done: %s" % C.BACKUP_PART_JAIL in done.stdout and REPOSITORY_PASSWORD not in done.stdout
    stat = run("stat", "-c", "%u %a", str(notes)).stdout.split()
    assert run("cat", str(notes)).stdout == SECRET_TEXT and stat == ["2000", "600"], stat
    assert not extra.exists() and elsewhere.exists()  # exact below the path only
    # The whole jail, exactly: what is new anywhere goes, what the snapshot holds stays.
    whole = run_container(images, site, restore_container(jail=True, exact=True))
    assert whole.returncode == 0, whole.stdout[-3000:] + whole.stderr[-3000:]
    assert not elsewhere.exists() and run("cat", str(notes)).stdout == SECRET_TEXT


def test_the_state_comes_back_exactly_and_the_database_as_dumped(images, site):
    state = site["state"]
    run("sh", "-c", "printf changed > %s/job_state && echo x > %s/newer" % (state, state))
    sql(site["database"], "DELETE FROM slurm_acct_db.history; CREATE TABLE slurm_acct_db.since (x INT);", check=True)
    done = run_container(images, site, restore_container(controllerState=True, accountingDatabase=True))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert DB_PASSWORD not in done.stdout + done.stderr
    assert (state / "job_state").read_bytes() == b"\x00job state\x01" and not (state / "newer").exists()
    rows = sql(site["database"], "SELECT name FROM slurm_acct_db.history", check=True).stdout
    assert "kept-job" in rows, rows
    tables = sql(site["database"], "SHOW TABLES FROM slurm_acct_db", check=True).stdout
    assert "since" not in tables.split(), tables  # dropped first: the database is the dump's


def test_a_snapshot_of_another_part_and_a_path_it_does_not_hold_are_refused_changing_nothing(images, site):
    state_snapshot = next(s["id"] for s in snapshots(images, site) if s["tags"] == [C.BACKUP_PART_CONTROLLER_STATE])
    other = run_container(images, site, restore_container(jail=True, snapshot=state_snapshot[:8]))
    assert other.returncode != 0, other.stdout[-3000:]
    assert "no snapshot %s of jail for %s/%s" % (state_snapshot[:8], NAMESPACE, CLUSTER) in other.stdout, other.stdout
    missing = run_container(images, site, restore_container(jail=True, jailPaths=["/home/bob"]))
    assert missing.returncode != 0 and "the snapshot holds no /home/bob" in missing.stdout, missing.stdout[-3000:]
    assert "restored before it: nothing" in missing.stdout, missing.stdout[-3000:]
    container = restore_container(jail=True)
    wrong_password = {"name": C.ENV_BACKUP_PASSWORD, "value": "not-the-password"}
    container["env"] = [wrong_password if e["name"] == C.ENV_BACKUP_PASSWORD else e for e in container["env"]]
    wrong = run_container(images, site, container)
    assert wrong.returncode != 0, wrong.stdout[-3000:]
    assert "cannot open the restic repository (restic exit status 12)" in wrong.stdout, wrong.stdout[-3000:]
