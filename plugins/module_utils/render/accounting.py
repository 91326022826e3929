# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Accounting: slurmdbd (a one-pod StatefulSet and its Service) and, unless the spec names an
external database, a MariaDB StatefulSet whose claim outlives the cluster, like the jail's.

slurmdbd.conf carries no password: it sits in a ConfigMap of its own, and the slurmdbd
entrypoint adds StoragePass from the database Secret into a 0600 copy only SlurmUser reads.
The database schema belongs to slurmdbd (it creates and upgrades it); nothing here drops it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    database_host,
    runs_database,
    runs_slurmdbd,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.quantity import quantity_to_mebibytes
from ansible_collections.slurmkube.core.plugins.module_utils.render import common, directory, pods
from ansible_collections.slurmkube.core.plugins.module_utils.render.jwt_auth import jwt_auth_settings, with_jwks
from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import (
    header,
    key_value_lines,
    merge_settings,
)

SLURMDBD_CONFIG_VOLUME = "slurmdbd-config"
DATA_VOLUME = "data"
# Where the entrypoints write the password (slurmdbd.conf, MariaDB's init file): memory, never
# the node's disk under the container's writable layer.
SECRETS_VOLUME = "run-secrets"
MEMORY_VOLUME = {"name": SECRETS_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}


def render_slurmdbd_conf(cluster: SlurmCluster) -> str:
    """slurmdbd.conf without StoragePass. DbdHost=localhost: slurmdbd runs where it is read
    (it refuses a DbdHost that is not its own name), and listens on every address."""
    database = cluster.spec.accounting.database
    settings: Dict[str, Any] = {
        "AuthType": "auth/munge",
        "DbdHost": "localhost",
        "DbdPort": cluster.spec.accounting.port,
        "SlurmUser": "slurm",
        "PidFile": "%s/slurmdbd.pid" % C.SLURMDBD_RUN_DIR,
        "DebugLevel": "info",
        "LogTimeFormat": "iso8601_ms,format_stderr",
        "StorageType": "accounting_storage/mysql",
        "StorageHost": database_host(cluster),
        "StoragePort": database.port,
        "StorageLoc": database.name,
        "StorageUser": database.user,
        # The REST API's accounting requests carry its users' tokens here too.
        **jwt_auth_settings(cluster),
    }
    if database.tls_ca_secret:
        settings["StorageParameters"] = "SSL_CA=%s/%s" % (C.SLURMDBD_DATABASE_CA_DIR, C.DB_CA_SECRET_KEY)
    settings = merge_settings(settings, cluster.spec.accounting.config)
    return header(cluster, C.SLURMDBD_CONFIG_FILE) + "\n".join(key_value_lines(settings)) + "\n"


def render_slurmdbd_config_map(cluster: SlurmCluster) -> Optional[common.Manifest]:
    if not runs_slurmdbd(cluster):
        return None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": common.metadata(cluster, names.slurmdbd(cluster.name), C.COMPONENT_SLURMDBD),
        "data": {C.SLURMDBD_CONFIG_FILE: render_slurmdbd_conf(cluster)},
    }


def _service(cluster: SlurmCluster, name: str, component: str, port_name: str, port: int) -> common.Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": common.metadata(cluster, name, component),
        "spec": {
            "type": "ClusterIP",
            "selector": names.selector_labels(cluster.name, component),
            "ports": [{"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def render_slurmdbd_service(cluster: SlurmCluster) -> Optional[common.Manifest]:
    if not runs_slurmdbd(cluster):
        return None
    return _service(cluster, names.slurmdbd(cluster.name), C.COMPONENT_SLURMDBD, "slurmdbd",
                    cluster.spec.accounting.port)


def render_database_service(cluster: SlurmCluster) -> Optional[common.Manifest]:
    if not runs_database(cluster):
        return None
    return _service(cluster, names.database(cluster.name), C.COMPONENT_DATABASE, "mysql", C.DATABASE_PORT)


def _statefulset(cluster: SlurmCluster, name: str, component: str, pod_spec: Dict[str, Any],
                 annotations: Dict[str, str], claims: List[Dict[str, Any]]) -> common.Manifest:
    spec: Dict[str, Any] = {
        "replicas": 1,
        "serviceName": name,
        "selector": {"matchLabels": names.selector_labels(cluster.name, component)},
        "updateStrategy": {"type": "RollingUpdate"},
        "template": pods.customised(
            {"metadata": {"labels": names.object_labels(cluster.name, component), "annotations": annotations},
             "spec": {**common.pod_identity(cluster), **pod_spec}},
            pods.component_options(cluster, cluster.spec.accounting.pod)),
    }
    if claims:
        # Deleting the cluster keeps the database, as it keeps the jail.
        spec["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": "Retain", "whenScaled": "Retain"}
        spec["volumeClaimTemplates"] = claims
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": common.metadata(cluster, name, component), "spec": spec}


def render_slurmdbd_statefulset(cluster: SlurmCluster, jwt_key_ids: Sequence[str] = ()) -> Optional[common.Manifest]:
    """slurmdbd: munged, the cluster's users (the jail's /etc, read-only), slurmdbd.conf. It reads
    both, and the REST API's key set, only at start: it is replaced when slurmdbd.conf changes or
    the keys it must hold do (`jwt_key_ids`: jwt.loaded_at_start)."""
    if not runs_slurmdbd(cluster):
        return None
    accounting = cluster.spec.accounting
    images = cluster.spec.images
    container = {
        "name": C.CONTAINER_SLURMDBD,
        "image": images.slurmdbd,
        "imagePullPolicy": images.pull_policy,
        "env": common.env(cluster, C.ROLE_SLURMDBD) + common.database_env(cluster),
        "ports": [{"name": "slurmdbd", "containerPort": accounting.port, "protocol": "TCP"}],
        "readinessProbe": common.tcp_probe(accounting.port, period=5),
        "resources": common.resources(accounting.resources),
        "securityContext": common.confined_security_context(),
        "volumeMounts": [
            {"name": SLURMDBD_CONFIG_VOLUME, "mountPath": C.SLURM_CONFIG_DIR, "readOnly": True},
            {"name": common.MUNGE_VOLUME, "mountPath": C.MUNGE_KEY_MOUNT_DIR, "readOnly": True},
            {"name": common.JAIL_VOLUME, "mountPath": C.JAIL_MOUNT_PATH, "readOnly": True},
            {"name": SECRETS_VOLUME, "mountPath": C.SLURMDBD_RUN_DIR},
        ],
    }
    volumes = [
        {"name": SLURMDBD_CONFIG_VOLUME, "configMap": {"name": names.slurmdbd(cluster.name)}},
        common.munge_volume(cluster),
        common.jail_volume(cluster),
        MEMORY_VOLUME,
    ]
    with_jwks(cluster, container["volumeMounts"], volumes)
    ca_secret = accounting.database.tls_ca_secret
    if ca_secret:
        container["volumeMounts"].append({"name": common.DATABASE_CA_VOLUME, "mountPath": C.SLURMDBD_DATABASE_CA_DIR,
                                          "readOnly": True})
        volumes.append({"name": common.DATABASE_CA_VOLUME, "secret": {
            "secretName": ca_secret, "items": [{"key": C.DB_CA_SECRET_KEY, "path": C.DB_CA_SECRET_KEY}]}})
    pod_spec = directory.with_directory(cluster, {"containers": [container], "volumes": volumes})
    annotations = {C.ANNOTATION_CONFIG_HASH: content_hash([render_slurmdbd_conf(cluster), *jwt_key_ids]
                                                          + [d for d in [directory.config_digest(cluster)] if d])}
    return _statefulset(cluster, names.slurmdbd(cluster.name), C.COMPONENT_SLURMDBD, pod_spec, annotations, [])


def buffer_pool_mib(cluster: SlurmCluster) -> int:
    """InnoDB's buffer pool: half the pod's memory (SchedMD's guide asks for a large one; the
    rest is MariaDB's own and its connections')."""
    return max(32, quantity_to_mebibytes(cluster.spec.accounting.database.resources.memory) // 2)


def render_database_statefulset(cluster: SlurmCluster) -> Optional[common.Manifest]:
    """MariaDB on a claim of its own; the database, its user and password made at each start."""
    if not runs_database(cluster):
        return None
    database = cluster.spec.accounting.database
    images = cluster.spec.images
    container = {
        "name": "mariadb",
        "image": images.mariadb,
        "imagePullPolicy": images.pull_policy,
        "env": [{"name": C.ENV_ROLE, "value": C.ROLE_DATABASE},
                {"name": C.ENV_DB_BUFFER_POOL, "value": "%dM" % buffer_pool_mib(cluster)},
                *common.database_env(cluster)],
        "ports": [{"name": "mysql", "containerPort": C.DATABASE_PORT, "protocol": "TCP"}],
        # Asked through its socket as root (socket authentication): a bare TCP probe would log
        # an aborted connection every few seconds.
        "readinessProbe": {"exec": {"command": ["mariadb-admin", "--socket=%s/mysqld.sock" % C.DATABASE_RUN_DIR,
                                                "ping"]},
                           "periodSeconds": 5, "failureThreshold": 3},
        "resources": common.resources(database.resources),
        "securityContext": common.confined_security_context(),
        "volumeMounts": [{"name": DATA_VOLUME, "mountPath": C.DATABASE_DATA_DIR},
                         {"name": SECRETS_VOLUME, "mountPath": C.DATABASE_RUN_DIR}],
    }
    claim: Dict[str, Any] = {
        "metadata": {"name": DATA_VOLUME, "labels": names.object_labels(cluster.name, C.COMPONENT_DATABASE)},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": str(database.storage.size)}}},
    }
    if database.storage.storage_class_name:
        claim["spec"]["storageClassName"] = database.storage.storage_class_name
    # A clean InnoDB shutdown takes a while under load: more than the default 30 s.
    pod_spec = {"terminationGracePeriodSeconds": 120, "containers": [container], "volumes": [MEMORY_VOLUME]}
    return _statefulset(cluster, names.database(cluster.name), C.COMPONENT_DATABASE, pod_spec, {}, [claim])


def render_accounting(cluster: SlurmCluster, jwt_key_ids: Sequence[str] = ()) -> List[common.Manifest]:
    """The accounting objects this cluster deploys, in apply order (`jwt_key_ids`: see
    render_slurmdbd_statefulset)."""
    maybe = [
        render_database_service(cluster),
        render_database_statefulset(cluster),
        render_slurmdbd_config_map(cluster),
        render_slurmdbd_service(cluster),
        render_slurmdbd_statefulset(cluster, jwt_key_ids),
    ]
    return [m for m in maybe if m is not None]
