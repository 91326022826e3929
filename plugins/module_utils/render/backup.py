# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Backups (spec.backup): a CronJob whose pod, in the backup image, takes restic snapshots of the
jail, StateSaveLocation and the accounting database (images/common/roles/backup); and a restore's
Job (spec.backup.restore), the same image and repository, which writes them back
(images/common/roles/restore) while the operator holds the daemons that write them down."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import backup_parts
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import BackupRetention, Restore, SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.render import common, pods

STATE_VOLUME = "state"
REPOSITORY_VOLUME = "repository"
CACHE_VOLUME = "restic-cache"
TMP_VOLUME = "tmp"
# A run that misses its time (the controller-manager down) still starts within the hour.
STARTING_DEADLINE_SECONDS = 3600


def keep_options(retention: BackupRetention) -> str:
    """restic forget's --keep-* options; a count of 0 is left out (restic keeps none by it)."""
    counts = (("last", retention.last), ("daily", retention.daily), ("weekly", retention.weekly),
              ("monthly", retention.monthly))
    return " ".join("--keep-%s %d" % (unit, count) for unit, count in counts if count)


def repository_env(cluster: SlurmCluster) -> List[Dict[str, Any]]:
    """Where the repository is and its password (from the Secret)."""
    backup = cluster.spec.backup
    password = {"secretKeyRef": {"name": backup.password_secret, "key": C.BACKUP_PASSWORD_SECRET_KEY}}
    return [
        {"name": C.ENV_BACKUP_REPOSITORY, "value": backup.repository or C.BACKUP_REPOSITORY_DIR},
        {"name": C.ENV_BACKUP_PASSWORD, "valueFrom": password},
    ]


def database_parts(cluster: SlurmCluster) -> List[Dict[str, Any]]:
    """The dump's connection (slurmdbd's), and its CA file for an external database over TLS."""
    env = common.database_env(cluster)
    if cluster.spec.accounting.database.tls_ca_secret:
        env.append({"name": C.ENV_DB_CA_FILE, "value": "%s/%s" % (C.SLURMDBD_DATABASE_CA_DIR, C.DB_CA_SECRET_KEY)})
    return env


def backup_storage(cluster: SlurmCluster, parts: List[str],
                   writes: bool = False) -> List[Tuple[Dict[str, Any], Dict[str, Any]]]:
    """(volume, where the container mounts it) of each volume the pod needs. What is backed up is
    mounted read-only, unless the pod WRITES it (a restore): a backup never changes it."""
    backup, database = cluster.spec.backup, cluster.spec.accounting.database
    storage = [({"name": CACHE_VOLUME, "emptyDir": {}}, {"mountPath": C.BACKUP_CACHE_DIR}),
               ({"name": TMP_VOLUME, "emptyDir": {}}, {"mountPath": "/tmp"})]
    if C.BACKUP_PART_JAIL in parts:
        storage.append((common.jail_volume(cluster), {"mountPath": C.BACKUP_JAIL_DIR, "readOnly": not writes}))
    if C.BACKUP_PART_CONTROLLER_STATE in parts:
        claim = {"claimName": names.controller_state_claim(cluster.name)}
        storage.append(({"name": STATE_VOLUME, "persistentVolumeClaim": claim},
                        {"mountPath": C.BACKUP_STATE_DIR, "readOnly": not writes}))
    if backup.claim_name:
        storage.append(({"name": REPOSITORY_VOLUME, "persistentVolumeClaim": {"claimName": backup.claim_name}},
                        {"mountPath": C.BACKUP_REPOSITORY_DIR}))
    if C.BACKUP_PART_DATABASE in parts and database.tls_ca_secret:
        storage.append(({"name": common.DATABASE_CA_VOLUME, "secret": {"secretName": database.tls_ca_secret}},
                        {"mountPath": C.SLURMDBD_DATABASE_CA_DIR, "readOnly": True}))
    return [(volume, dict({"name": volume["name"]}, **mount)) for volume, mount in storage]


# A backup reads every user's files in the jail (and nothing else root may do: it writes only its
# repository, cache and /tmp).
BACKUP_CAPABILITIES = ("DAC_READ_SEARCH",)


# What a restore needs beyond reading: write into users' directories (DAC_OVERRIDE), give files
# their owners (CHOWN), modes and times (FOWNER), keep set-user-ID bits (FSETID) and restore file
# capabilities (SETFCAP), as restic restore does as root.
RESTORE_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETFCAP")


def controller_affinity(cluster: SlurmCluster) -> Dict[str, Any]:
    """On a controller's Kubernetes node: a cluster made by 0.3 keeps its ReadWriteOnce state claim,
    which only pods of that node can mount."""
    selector = {"matchLabels": names.selector_labels(cluster.name, C.COMPONENT_CONTROLLER)}
    term = {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def restic_pod(cluster: SlurmCluster, component: str, env: List[Dict[str, Any]], parts: List[str],
               writes: bool, capabilities: Tuple[str, ...],
               affinity: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The pod template of the backup image for COMPONENT (the backup's or a restore's): ENV, then
    the repository's and, for the database, its connection; the volumes PARTS need (WRITES: a
    restore's); AFFINITY; then the site's spec.backup.pod options (its affinity terms after ours)."""
    backup = cluster.spec.backup
    storage = backup_storage(cluster, parts, writes=writes)
    container: Dict[str, Any] = {
        "name": component,
        "image": cluster.spec.images.backup,
        "imagePullPolicy": cluster.spec.images.pull_policy,
        "command": [C.ENTRYPOINT_PROGRAM],
        "env": [*env, *repository_env(cluster),
                *(database_parts(cluster) if C.BACKUP_PART_DATABASE in parts else [])],
        "resources": common.resources(backup.resources),
        "securityContext": common.root_only_with(capabilities),
        "volumeMounts": [mount for _volume, mount in storage],
    }
    if backup.credentials_secret:
        container["envFrom"] = [{"secretRef": {"name": backup.credentials_secret}}]
    template = {"metadata": {"labels": names.object_labels(cluster.name, component)}, "spec": {
        **common.pod_identity(cluster),
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": [volume for volume, _mount in storage],
    }}
    if affinity:
        template["spec"]["affinity"] = affinity
    return pods.customised(template, pods.component_options(cluster, backup.pod))


def render_backup_cronjob(cluster: SlurmCluster) -> Optional[common.Manifest]:
    """The CronJob, or None when backups are off."""
    backup = cluster.spec.backup
    if not backup.enabled:
        return None
    parts = backup_parts(cluster)
    env = [
        {"name": C.ENV_ROLE, "value": C.ROLE_BACKUP},
        {"name": C.ENV_BACKUP_HOST, "value": names.backup_host(cluster.name, cluster.namespace)},
        {"name": C.ENV_BACKUP_PARTS, "value": " ".join(parts)},
        {"name": C.ENV_BACKUP_KEEP, "value": keep_options(backup.retention)},
    ]
    affinity = controller_affinity(cluster) if C.BACKUP_PART_CONTROLLER_STATE in parts else None
    template = restic_pod(cluster, C.COMPONENT_BACKUP, env, parts, False, BACKUP_CAPABILITIES, affinity)
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": common.metadata(cluster, names.backup(cluster.name), C.COMPONENT_BACKUP),
        "spec": {
            "schedule": backup.schedule,
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": STARTING_DEADLINE_SECONDS,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "metadata": {"labels": names.object_labels(cluster.name, C.COMPONENT_BACKUP)},
                "spec": {
                    # One retry: a repository that was briefly unreachable.
                    "backoffLimit": 1,
                    "template": template,
                },
            },
        },
    }


def render_backup_run(cluster: SlurmCluster, name: str) -> Optional[common.Manifest]:
    """One run of the CronJob's Job now, as `kubectl create job --from=cronjob` makes one (the
    operator's, before an upgrade); None when backups are off."""
    cronjob = render_backup_cronjob(cluster)
    if cronjob is None:
        return None
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": common.metadata(cluster, name, C.COMPONENT_BACKUP),
            "spec": cronjob["spec"]["jobTemplate"]["spec"]}


def restore_parts(restore: Restore) -> List[str]:
    """The parts a restore writes back, in the order its pod restores them."""
    parts = ((restore.jail, C.BACKUP_PART_JAIL), (restore.controller_state, C.BACKUP_PART_CONTROLLER_STATE),
             (restore.accounting_database, C.BACKUP_PART_DATABASE))
    return [part for wanted, part in parts if wanted]


def render_restore_job(cluster: SlurmCluster, restore: Restore) -> common.Manifest:
    """The Job that restores RESTORE's parts (the operator makes it once the daemons that write
    them are down). It runs once; a failed one is looked at and a restore of a new name asked for."""
    parts = restore_parts(restore)
    env = [
        {"name": C.ENV_ROLE, "value": C.ROLE_RESTORE},
        {"name": C.ENV_BACKUP_HOST, "value": names.backup_host(cluster.name, cluster.namespace)},
        {"name": C.ENV_RESTORE_PARTS, "value": " ".join(parts)},
        {"name": C.ENV_RESTORE_SNAPSHOT, "value": restore.snapshot},
        {"name": C.ENV_RESTORE_JAIL_PATHS, "value": "\n".join(restore.jail_paths)},
        {"name": C.ENV_RESTORE_EXACT, "value": "true" if restore.exact else "false"},
    ]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": common.metadata(cluster, names.restore(cluster.name, restore.name or ""), C.COMPONENT_RESTORE),
        # No retry: what a failed restore did is looked at before another is asked for.
        "spec": {"backoffLimit": 0,
                 "template": restic_pod(cluster, C.COMPONENT_RESTORE, env, parts, True, RESTORE_CAPABILITIES)},
    }
