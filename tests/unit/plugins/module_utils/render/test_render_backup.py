"""spec.backup: the CronJob's pod reads what it backs up read-only as root with one capability,
takes its repository from a claim or a restic URL (with the site's credentials), dumps the
database only where slurmkube runs slurmdbd (the database's NetworkPolicy then admits it), and the
spec is refused naming the field when a backup could not run."""

from __future__ import annotations

import re
from typing import Any, Dict

import pytest

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.render.backup import (
    RESTORE_CAPABILITIES,
    render_backup_cronjob,
    render_restore_job,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.policy import render_network_policies

ON = {"enabled": True, "claimName": "backups", "passwordSecret": "backup-password"}


def cluster(backup: Dict[str, Any], **spec: Any):
    return parse_cluster({"metadata": {"name": "c1", "namespace": "hpc"}, "spec": dict(spec, backup=backup)})


def pod_of(cronjob: Dict[str, Any]) -> Dict[str, Any]:
    return cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def env_of(container: Dict[str, Any]) -> Dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_nothing_without_backups():
    assert render_backup_cronjob(cluster({})) is None
    assert render_backup_cronjob(cluster(dict(ON, enabled=False))) is None


def test_the_pod_reads_the_jail_and_the_state_read_only_and_writes_only_its_repository():
    cronjob = render_backup_cronjob(cluster(dict(ON, schedule="15 1 * * *")))
    assert cronjob["metadata"]["name"] == names.backup("c1")
    assert cronjob["spec"]["schedule"] == "15 1 * * *" and cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    pod = pod_of(cronjob)
    (container,) = pod["containers"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts[C.BACKUP_JAIL_DIR]["readOnly"] and mounts[C.BACKUP_STATE_DIR]["readOnly"]
    writable = {path for path, m in mounts.items() if not m.get("readOnly")}
    assert writable == {C.BACKUP_REPOSITORY_DIR, C.BACKUP_CACHE_DIR, "/tmp"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts[C.BACKUP_REPOSITORY_DIR]["name"]]["persistentVolumeClaim"] == {"claimName": "backups"}
    assert volumes[mounts[C.BACKUP_STATE_DIR]["name"]]["persistentVolumeClaim"]["claimName"] == \
        names.controller_state_claim("c1")
    context = container["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"], "add": ["DAC_READ_SEARCH"]}
    assert context["readOnlyRootFilesystem"] and not context["allowPrivilegeEscalation"]
    env = env_of(container)
    assert env[C.ENV_ROLE] == C.ROLE_BACKUP and env[C.ENV_BACKUP_HOST] == "hpc/c1"
    assert env[C.ENV_BACKUP_PARTS] == "%s %s" % (C.BACKUP_PART_JAIL, C.BACKUP_PART_CONTROLLER_STATE)
    assert env[C.ENV_BACKUP_REPOSITORY] == C.BACKUP_REPOSITORY_DIR
    assert env[C.ENV_BACKUP_PASSWORD] == {"secretKeyRef": {"name": "backup-password", "key": "password"}}
    assert env[C.ENV_BACKUP_KEEP] == "--keep-last 3 --keep-daily 7 --keep-weekly 4 --keep-monthly 6"
    assert pod["automountServiceAccountToken"] is False
    # Beside a controller: a 0.3 cluster's ReadWriteOnce state claim is mounted only there.
    (term,) = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["labelSelector"]["matchLabels"] == names.selector_labels("c1", C.COMPONENT_CONTROLLER)


def test_a_remote_repository_takes_the_sites_credentials_and_mounts_no_claim():
    backup = {"enabled": True, "repository": "s3:https://s3.example.org/hpc-backups/c1",
              "credentialsSecret": "s3-login", "passwordSecret": "backup-password", "controllerState": False,
              "retention": {"last": 0, "weekly": 0}}
    pod = pod_of(render_backup_cronjob(cluster(backup)))
    (container,) = pod["containers"]
    env = env_of(container)
    assert env[C.ENV_BACKUP_REPOSITORY] == "s3:https://s3.example.org/hpc-backups/c1"
    assert env[C.ENV_BACKUP_PARTS] == C.BACKUP_PART_JAIL and env[C.ENV_BACKUP_KEEP] == \
        "--keep-daily 7 --keep-monthly 6"
    assert container["envFrom"] == [{"secretRef": {"name": "s3-login"}}]
    assert C.BACKUP_REPOSITORY_DIR not in {m["mountPath"] for m in container["volumeMounts"]}
    assert "affinity" not in pod  # no state claim mounted


def test_the_database_is_dumped_where_slurmkube_runs_slurmdbd_and_its_policy_admits_the_dump():
    with_db = cluster(ON, accounting={"enabled": True})
    env = env_of(pod_of(render_backup_cronjob(with_db))["containers"][0])
    assert env[C.ENV_BACKUP_PARTS].split()[-1] == C.BACKUP_PART_DATABASE
    assert env[C.ENV_DB_HOST] == names.database("c1") and env[C.ENV_DB_PASSWORD]["secretKeyRef"]["name"] == \
        names.accounting_db_secret("c1")
    (policy,) = [p for p in render_network_policies(with_db) if p["metadata"]["name"].endswith("-database")]
    admitted = [peer["podSelector"]["matchLabels"][C.LABEL_COMPONENT] for peer in policy["spec"]["ingress"][0]["from"]]
    assert admitted == [C.COMPONENT_SLURMDBD, C.COMPONENT_BACKUP]
    # No backup, or no database part: the database admits slurmdbd alone.
    for other in (cluster({}, accounting={"enabled": True}),
                  cluster(dict(ON, accountingDatabase=False), accounting={"enabled": True})):
        (policy,) = [p for p in render_network_policies(other) if p["metadata"]["name"].endswith("-database")]
        assert len(policy["spec"]["ingress"][0]["from"]) == 1
    # An external slurmdbd: its database is not ours to dump.
    external = cluster(ON, accounting={"enabled": True, "host": "slurmdbd.example.org"})
    env = env_of(pod_of(render_backup_cronjob(external))["containers"][0])
    assert C.BACKUP_PART_DATABASE not in env[C.ENV_BACKUP_PARTS] and C.ENV_DB_HOST not in env


def test_an_external_database_over_tls_is_dumped_checking_its_certificate():
    accounting = {"enabled": True, "database": {"host": "db.example.org", "passwordSecret": "db-login",
                                                "tlsCaSecret": "db-ca"}}
    pod = pod_of(render_backup_cronjob(cluster(ON, accounting=accounting)))
    (container,) = pod["containers"]
    env = env_of(container)
    assert env[C.ENV_DB_HOST] == "db.example.org"
    assert env[C.ENV_DB_CA_FILE] == "%s/%s" % (C.SLURMDBD_DATABASE_CA_DIR, C.DB_CA_SECRET_KEY)
    ca = next(m for m in container["volumeMounts"] if m["mountPath"] == C.SLURMDBD_DATABASE_CA_DIR)
    assert ca["readOnly"] and {"name": ca["name"], "secret": {"secretName": "db-ca"}} in pod["volumes"]


def test_the_sites_pod_options_reach_the_backup_pod():
    backup = dict(ON, pod={"labels": {"example.org/team": "hpc"}, "env": [{"name": "HTTPS_PROXY", "value": "p"}]})
    pod = render_backup_cronjob(cluster(backup))["spec"]["jobTemplate"]["spec"]["template"]
    assert pod["metadata"]["labels"]["example.org/team"] == "hpc"
    assert {"name": "HTTPS_PROXY", "value": "p"} in pod["spec"]["containers"][0]["env"]


REFUSED = [
    ({"enabled": True, "passwordSecret": "p"}, "spec.backup", "claimName or repository"),
    ({"enabled": True, "claimName": "b"}, "spec.backup.passwordSecret", "required"),
    ({"claimName": "b", "repository": "s3:https://x/y"}, "spec.backup", "not both"),
    ({"claimName": "b", "credentialsSecret": "s"}, "spec.backup.credentialsSecret", "remote repository"),
    (dict(ON, jail=False, controllerState=False, accountingDatabase=False), "spec.backup", "at least one"),
    ({"repository": "sftp:backup@host:/srv"}, "spec.backup.repository", "must match"),
    ({"repository": "/srv/backups"}, "spec.backup.repository", "must match"),
    ({"schedule": "daily"}, "spec.backup.schedule", "must match"),
    ({"passwordSecret": "Not_A_Name"}, "spec.backup.passwordSecret", "must match"),
    ({"env": []}, "spec.backup.env", ""),
]


@pytest.mark.parametrize("backup,field,words", REFUSED, ids=[r[1] + ":" + (r[2] or "unknown") for r in REFUSED])
def test_a_backup_that_could_not_run_is_refused_naming_the_field(backup, field, words):
    with pytest.raises(SpecError) as refused:
        cluster(backup)
    assert field in str(refused.value) and words in str(refused.value), str(refused.value)


# --------------------------------------------------------------------------- restores

REPOSITORY = {"claimName": "backups", "passwordSecret": "backup-password"}


def restore_cluster(**restore: Any):
    return cluster(dict(REPOSITORY, restore=dict({"name": "r1"}, **restore)), accounting={"enabled": True})


def test_a_restore_writes_only_the_parts_it_restores_as_root_with_the_capabilities_restic_restore_needs():
    model = restore_cluster(jail=True, jailPaths=["/home/alice", "/opt/site"], exact=True, accountingDatabase=True)
    job = render_restore_job(model, model.spec.backup.restore)
    assert job["kind"] == "Job" and job["metadata"]["name"] == names.restore("c1", "r1") == "c1-restore-r1"
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and "affinity" not in pod  # slurmctld is down: no pod to be beside
    assert job["spec"]["template"]["metadata"]["labels"][C.LABEL_COMPONENT] == C.COMPONENT_RESTORE
    (container,) = pod["containers"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert not mounts[C.BACKUP_JAIL_DIR].get("readOnly") and C.BACKUP_STATE_DIR not in mounts
    context = container["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"], "add": list(RESTORE_CAPABILITIES)}
    assert context["runAsUser"] == 0 and context["readOnlyRootFilesystem"] and not context["allowPrivilegeEscalation"]
    env = env_of(container)
    assert env[C.ENV_ROLE] == C.ROLE_RESTORE and env[C.ENV_BACKUP_HOST] == "hpc/c1"
    assert env[C.ENV_RESTORE_PARTS] == "%s %s" % (C.BACKUP_PART_JAIL, C.BACKUP_PART_DATABASE)
    assert env[C.ENV_RESTORE_SNAPSHOT] == C.RESTORE_LATEST and env[C.ENV_RESTORE_EXACT] == "true"
    assert env[C.ENV_RESTORE_JAIL_PATHS] == "/home/alice\n/opt/site"
    assert env[C.ENV_DB_PASSWORD] == {"secretKeyRef": {"name": names.accounting_db_secret("c1"), "key": "password"}}
    state = render_restore_job(model, restore_cluster(controllerState=True).spec.backup.restore)
    mounts = {m["mountPath"]: m for m in state["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert not mounts[C.BACKUP_STATE_DIR].get("readOnly") and C.BACKUP_JAIL_DIR not in mounts


def test_the_database_admits_a_restore_pod_only_while_a_restore_of_it_is_asked_for():
    def readers(model):
        (database,) = [p for p in render_network_policies(model) if p["metadata"]["name"].endswith("-database")]
        return [r["podSelector"]["matchLabels"][C.LABEL_COMPONENT] for r in database["spec"]["ingress"][0]["from"]]

    assert readers(restore_cluster(accountingDatabase=True)) == [C.COMPONENT_SLURMDBD, C.COMPONENT_RESTORE]
    assert readers(restore_cluster(jail=True)) == [C.COMPONENT_SLURMDBD]


def test_a_long_name_makes_a_job_name_of_63_characters_told_apart_by_a_digest():
    long_cluster, request = "c" * 40, "r" * 40
    name = names.restore(long_cluster, request)
    assert len(name) == 63 and name != names.restore(long_cluster, "r" * 39 + "s")


RESTORE_REFUSED = [
    ({}, "spec.backup.restore", "name what is restored"),
    ({"jail": True, "controllerState": True, "snapshot": "0123abcd"}, "spec.backup.restore.snapshot", "one part"),
    ({"jail": True, "jailPaths": ["/home/../etc"]}, "spec.backup.restore.jailPaths[0]", "'..'"),
    ({"jail": True, "jailPaths": ["/home/*"]}, "spec.backup.restore.jailPaths", "without"),
    ({"jail": True, "jailPaths": ["home"]}, "spec.backup.restore.jailPaths", "absolute"),
    ({"jail": True, "snapshot": "yesterday"}, "spec.backup.restore.snapshot", "must match"),
    ({"name": "R1", "jail": True}, "spec.backup.restore.name", "must match"),
]


@pytest.mark.parametrize("restore,field,words", RESTORE_REFUSED, ids=[r[1] + ":" + r[2] for r in RESTORE_REFUSED])
def test_a_restore_that_could_not_run_is_refused_naming_the_field(restore, field, words):
    with pytest.raises(SpecError) as refused:
        restore_cluster(**restore)
    assert field in str(refused.value) and words in str(refused.value), str(refused.value)


def test_a_restore_needs_the_repository_and_the_database_of_a_slurmdbd_slurmkube_runs():
    restore = {"name": "r1", "accountingDatabase": True}
    with pytest.raises(SpecError, match=re.escape("spec.backup.passwordSecret: is required for a restore")):
        cluster({"claimName": "b", "restore": restore}, accounting={"enabled": True})
    with pytest.raises(SpecError, match=re.escape("spec.backup: a restore reads the repository")):
        cluster({"passwordSecret": "p", "restore": restore}, accounting={"enabled": True})
    with pytest.raises(SpecError, match=re.escape("spec.backup.restore.accountingDatabase: is for the database")):
        cluster(dict(REPOSITORY, restore=restore), accounting={"enabled": True, "host": "dbd.example.org"})
    assert cluster({"restore": {"accountingDatabase": True}}).spec.backup.restore.name is None  # no name: no restore
