# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pieces every component renderer shares: labels, metadata, volumes, hashes."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    accounting_db_secret_name,
    database_host,
    jail_claim_name,
    munge_secret_name,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import (
    Resources,
    SlurmCluster,
)

Manifest = Dict[str, Any]

CONFIG_VOLUME = "slurm-config"
MUNGE_VOLUME = "munge-key"
JAIL_VOLUME = "jail"
# An external database's CA (spec.accounting.database.tlsCaSecret): slurmdbd's and the backup's.
DATABASE_CA_VOLUME = "database-ca"
SUBMOUNT_HOST_DIR = "/mnt/slurmkube/submounts"


# Capabilities of the runtime's default set that no Slurm pod uses: raw sockets, device nodes,
# file capabilities. Gone from the container, they are gone from everything in it.
UNUSED_CAPABILITIES = ("NET_RAW", "MKNOD", "SETFCAP")


METRICS_PATH = "/metrics"


def scrape_annotations(port: int) -> Dict[str, str]:
    """What a Prometheus without the prometheus-operator discovers metrics targets by."""
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": METRICS_PATH}


def confined_security_context() -> Dict[str, Any]:
    """Pods that mount nothing (slurmctld, the long checks' submitter): the runtime's default
    seccomp profile, no privilege escalation (no setuid binary raises anyone), fewer capabilities."""
    return {
        "allowPrivilegeEscalation": False,
        "seccompProfile": {"type": "RuntimeDefault"},
        "capabilities": {"drop": list(UNUSED_CAPABILITIES)},
    }


def root_only_with(capabilities: Sequence[str]) -> Dict[str, Any]:
    """Root with CAPABILITIES alone, a read-only root filesystem, no privilege escalation: the
    helpers that must read (or restore) every user's files and nothing more (the backup and
    restore pods, the jail's usage count, SSSD)."""
    return {
        "runAsUser": 0,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        "capabilities": {"drop": ["ALL"], "add": list(capabilities)},
    }


def metadata(cluster: SlurmCluster, name: str, component: str, nodeset: Optional[str] = None) -> Dict[str, Any]:
    """Object metadata; owner references are left to the caller (operator or module)."""
    labels = names.object_labels(cluster.name, component, nodeset)
    return {"name": name, "namespace": cluster.namespace, "labels": labels}


def login_hosts_dns(cluster: SlurmCluster) -> Dict[str, Any]:
    """dnsConfig for pods that must resolve a login pod by the bare name srun reports
    (its hostname): slurmctld answers srun, salloc and interactive steps there."""
    domain = names.service_domain(names.login_hosts(cluster.name), cluster.namespace)
    return {"dnsConfig": {"searches": [domain]}}


def one_up_budget(cluster: SlurmCluster, name: str, component: str, replicas: int) -> Optional[Manifest]:
    """A PodDisruptionBudget that keeps one pod of a component up through node drains; None with
    fewer than two pods (a budget would then block every drain)."""
    if replicas < 2:
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(cluster, name, component),
        "spec": {"minAvailable": 1, "selector": {"matchLabels": names.selector_labels(cluster.name, component)}},
    }


def pod_identity(cluster: SlurmCluster) -> Dict[str, Any]:
    """What every pod of the cluster runs as: the tokenless ServiceAccount, no service env vars."""
    return {
        "serviceAccountName": names.service_account(cluster.name),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
    }


def jail_volume(cluster: SlurmCluster) -> Dict[str, Any]:
    """The pod volume that holds the jail: an NFS export or a ReadWriteMany claim."""
    nfs = cluster.spec.jail.nfs
    if nfs is not None:
        return {"name": JAIL_VOLUME, "nfs": {"server": nfs.server, "path": nfs.path}}
    return {"name": JAIL_VOLUME, "persistentVolumeClaim": {"claimName": jail_claim_name(cluster)}}


def database_env(cluster: SlurmCluster) -> List[Dict[str, Any]]:
    """How slurmdbd, its MariaDB and the backup's dump reach the database (the password from its Secret)."""
    database = cluster.spec.accounting.database
    password = {"secretKeyRef": {"name": accounting_db_secret_name(cluster), "key": C.DB_PASSWORD_SECRET_KEY}}
    return [
        {"name": C.ENV_DB_HOST, "value": database_host(cluster)},
        {"name": C.ENV_DB_PORT, "value": str(database.port)},
        {"name": C.ENV_DB_NAME, "value": database.name},
        {"name": C.ENV_DB_USER, "value": database.user},
        {"name": C.ENV_DB_PASSWORD, "valueFrom": password},
    ]


def config_volume(cluster: SlurmCluster) -> Dict[str, Any]:
    """slurm.conf and friends; mounted as a directory so ConfigMap updates reach the files."""
    return {"name": CONFIG_VOLUME, "configMap": {"name": names.slurm_config(cluster.name)}}


def munge_volume(cluster: SlurmCluster) -> Dict[str, Any]:
    """The munge key Secret; entrypoints copy it (munged refuses symlinks and wrong owners)."""
    return {"name": MUNGE_VOLUME, "secret": {"secretName": munge_secret_name(cluster), "defaultMode": 0o400}}


def common_mounts() -> List[Dict[str, Any]]:
    """Mounts every Slurm daemon container needs."""
    return [
        {"name": CONFIG_VOLUME, "mountPath": C.SLURM_CONFIG_DIR, "readOnly": True},
        {"name": MUNGE_VOLUME, "mountPath": C.MUNGE_KEY_MOUNT_DIR, "readOnly": True},
    ]


def env(cluster: SlurmCluster, role: str) -> List[Dict[str, Any]]:
    """Environment shared by every slurmkube container; SLURMKUBE_NODE_NAME is the pod's name."""
    return [
        {"name": C.ENV_ROLE, "value": role},
        {"name": C.ENV_CLUSTER, "value": cluster.name},
        {"name": C.ENV_CONTROLLER_HOST, "value": names.controller_address(cluster.name, cluster.namespace)},
        {"name": C.ENV_JAIL_PATH, "value": C.JAIL_MOUNT_PATH},
        {"name": C.ENV_NODE_NAME, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]


def resources(res: Resources, gpus: bool = False) -> Dict[str, Any]:
    """Requests equal to limits (Slurm schedules on what the pod is guaranteed) unless cpuRequest overcommits."""
    amounts: Dict[str, Any] = {"cpu": str(res.cpu), "memory": str(res.memory)}
    if gpus and res.gpus:
        amounts[res.gpu_resource_name] = str(res.gpus)
    requests = dict(amounts)
    if res.cpu_request is not None:
        requests["cpu"] = str(res.cpu_request)
    return {"requests": requests, "limits": dict(amounts)}


def init_resources(res: Resources) -> Dict[str, Any]:
    """An init container's: its pod's main container's, GPUs aside. Kubernetes gives a pod the
    Guaranteed QoS class (and the static CPU manager's whole cores) only when every container,
    init containers included, has limits equal to requests; a pod's request is the larger of its
    init containers' and the sum of the others', so this adds nothing to it."""
    return resources(res)


def tcp_probe(port: int, period: int = 10) -> Dict[str, Any]:
    """A TCP readiness probe; `scontrol ping` would go through the not-yet-ready Service."""
    return {"tcpSocket": {"port": port}, "periodSeconds": period, "failureThreshold": 3}


def slurm_ready_probe(port: int, period: int = 10) -> Dict[str, Any]:
    """slurmctld's or slurmd's readiness: Slurm's own GET /readyz on the daemon's port (2xx once
    it serves RPCs; slurmctld only as the primary, not while it reconfigures). The kubelet asks
    itself: an exec probe cost each node a process in the container every period (runc, the shim,
    bash: ~70 CPU-ms each, measured on kind). Not a liveness probe: restarting a worker's
    container ends its jobs, and slurmctld's /livez answers without the locks a stuck slurmctld
    would hold."""
    return {"httpGet": {"path": "/readyz", "port": port}, "periodSeconds": period, "timeoutSeconds": 5,
            "failureThreshold": 3}


def wait_for_controller(cluster: SlurmCluster, image: str, pull_policy: str) -> Dict[str, Any]:
    """Init container that holds slurmd until slurmctld accepts TCP (slurmd's own retry backs off to minutes)."""
    host = names.controller_address(cluster.name, cluster.namespace)
    script = "until timeout 2 bash -c '</dev/tcp/%s/%d'; do echo waiting for %s; sleep 2; done" % (
        host, C.SLURMCTLD_PORT, host)
    return {
        "name": "wait-for-controller",
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": ["bash", "-c", script],
        "securityContext": confined_security_context(),
    }
