# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurmctld: a StatefulSet of a primary and its backups (SlurmctldHost in ordinal order) on one
shared state volume, the Service that reaches the one that serves, and the headless Service that
names each pod.

Only the controller that serves is Ready: Slurm's /readyz answers 2xx on the primary, or on the
backup that took over, and 5xx on a standby. So the Service (SlurmctldAddr, where every client
goes) follows the serving controller by itself, without the operator, which may be down with the
node that failed. The StatefulSet therefore cannot roll its pods (it waits for each to be Ready):
its update strategy is OnDelete and the operator replaces them (operator/controller.py).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import slurmdbd_host
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.render import common, directory, pods
from ansible_collections.slurmkube.core.plugins.module_utils.render.jwt_auth import with_jwks

STATE_VOLUME = "state"


def serving_labels(cluster: SlurmCluster) -> Dict[str, str]:
    """The Service's selector: the slurmctld pods (of which only the serving one is Ready) until
    the operator marks one stopping."""
    return {**names.selector_labels(cluster.name, C.COMPONENT_CONTROLLER), C.LABEL_SERVING: "true"}


def wait_for_slurmdbd(cluster: SlurmCluster) -> Optional[Dict[str, Any]]:
    """Init container of slurmctld: start once slurmdbd accepts TCP, so the cluster registers
    and the association lists load at once instead of at slurmctld's next retry."""
    if not cluster.spec.accounting.enabled:
        return None
    host, port = slurmdbd_host(cluster), cluster.spec.accounting.port
    script = "until timeout 2 bash -c '</dev/tcp/%s/%d'; do echo waiting for slurmdbd %s:%d; sleep 2; done" % (
        host, port, host, port)
    images = cluster.spec.images
    return {
        "name": "wait-for-slurmdbd",
        "image": images.controller,
        "imagePullPolicy": images.pull_policy,
        "command": ["bash", "-c", script],
        "securityContext": common.confined_security_context(),
    }


def render_controller_service(cluster: SlurmCluster) -> common.Manifest:
    """ClusterIP Service on 6817 (SlurmctldAddr): the Ready controller, the one that serves."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": common.metadata(cluster, names.controller(cluster.name), C.COMPONENT_CONTROLLER),
        "spec": {
            "type": "ClusterIP",
            "selector": serving_labels(cluster),
            "ports": [{"name": "slurmctld", "port": C.SLURMCTLD_PORT, "targetPort": C.SLURMCTLD_PORT,
                       "protocol": "TCP"}],
        },
    }


def render_controller_hosts_service(cluster: SlurmCluster) -> common.Manifest:
    """Headless Service that names every slurmctld pod, Ready or not (SlurmctldHost addresses):
    a backup pings the primary there, and a primary that starts asks the backups to give control
    back there."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": common.metadata(cluster, names.controller_hosts(cluster.name), C.COMPONENT_CONTROLLER),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": names.selector_labels(cluster.name, C.COMPONENT_CONTROLLER),
            "ports": [{"name": "slurmctld", "port": C.SLURMCTLD_PORT, "targetPort": C.SLURMCTLD_PORT,
                       "protocol": "TCP"}],
        },
    }


def render_controller_state_claim(cluster: SlurmCluster) -> common.Manifest:
    """StateSaveLocation's claim, ReadWriteMany: every controller mounts it (a backup reads the
    primary's heartbeat and state there). The operator makes it once and never changes it (a
    claim's access modes are fixed when made). Its class: the one named for it, else the jail's
    (which offers ReadWriteMany already), else the cluster's default."""
    volume = cluster.spec.controller.state_volume
    spec: Dict[str, Any] = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": str(volume.size)}}}
    storage_class = volume.storage_class_name or cluster.spec.jail.storage_class_name
    if storage_class:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": common.metadata(cluster, names.controller_state_claim(cluster.name), C.COMPONENT_CONTROLLER),
        "spec": spec,
    }


def one_per_host(cluster: SlurmCluster) -> Dict[str, Any]:
    """Controllers on different Kubernetes nodes (required: a backup beside its primary fails with
    it); none for a single controller."""
    if cluster.spec.controller.replicas < 2:
        return {}
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": names.selector_labels(cluster.name, C.COMPONENT_CONTROLLER)},
        "topologyKey": C.HOSTNAME_LABEL,
    }]}}}


# The preStop hook's MIN, QUIET and MAX seconds. The operator takes a stopping pod out of the
# Service (C.LABEL_SERVING); the hook lets slurmctld serve at least MIN seconds, then until no
# connection came in for QUIET (the Service has dropped the pod), at most MAX: slurmctld then has
# the rest of the grace period to save its state. A serving controller with a backup up hands
# control to it after MIN seconds instead (the hook's header says why).
CONTROLLER_STOP_WAIT = (4, 3, 40)
CONTROLLER_GRACE_SECONDS = 60


def _controller_container(cluster: SlurmCluster) -> Dict[str, Any]:
    images = cluster.spec.images
    mounts: List[Dict[str, Any]] = common.common_mounts() + [
        {"name": STATE_VOLUME, "mountPath": C.SLURMCTLD_STATE_DIR},
        # Users and groups live in the jail; slurmctld must resolve the job's user.
        {"name": common.JAIL_VOLUME, "mountPath": C.JAIL_MOUNT_PATH, "readOnly": True},
    ]
    return {
        "name": "slurmctld",
        "image": images.controller,
        "imagePullPolicy": images.pull_policy,
        "env": common.env(cluster, C.ROLE_CONTROLLER),
        "ports": [{"name": "slurmctld", "containerPort": C.SLURMCTLD_PORT, "protocol": "TCP"}],
        # A backup that took over is in the Service within 4 s (see the module's header). Not 3:
        # the stop hook waits for 3 s without a connection, and the probe's count as ones.
        "readinessProbe": common.slurm_ready_probe(C.SLURMCTLD_PORT, period=4),
        # Signalled once the Service has dropped the pod (see the hook's header).
        "lifecycle": {"preStop": {"exec": {"command": [
            C.CONTROLLER_STOP_PROGRAM, *map(str, CONTROLLER_STOP_WAIT), str(C.SLURMCTLD_PORT)]}}},
        "resources": common.resources(cluster.spec.controller.resources),
        "securityContext": common.confined_security_context(),
        "volumeMounts": mounts,
    }


def render_controller_statefulset(cluster: SlurmCluster, config_hash: str) -> common.Manifest:
    """The slurmctld StatefulSet; its pods are replaced only for settings `scontrol reconfigure`
    cannot apply (`config_hash`: slurm_config.controller_config_hash, and SSSD's configuration with a
    directory), by the operator (OnDelete)."""
    spec = cluster.spec.controller
    selector = names.selector_labels(cluster.name, C.COMPONENT_CONTROLLER)
    container = _controller_container(cluster)
    state = {"name": STATE_VOLUME, "persistentVolumeClaim": {"claimName": names.controller_state_claim(cluster.name)}}
    volumes = [common.config_volume(cluster), common.munge_volume(cluster), common.jail_volume(cluster), state]
    with_jwks(cluster, container["volumeMounts"], volumes)
    pod_spec: Dict[str, Any] = {
        **common.pod_identity(cluster),
        # A force-deleted pod could leave two slurmctld on one state dir: give it time to stop.
        "terminationGracePeriodSeconds": CONTROLLER_GRACE_SECONDS,
        "containers": [container],
        "volumes": volumes,
    }
    waiting = wait_for_slurmdbd(cluster)
    if waiting is not None:
        pod_spec["initContainers"] = [dict(waiting, resources=common.init_resources(spec.resources))]
    pod_spec.update(common.login_hosts_dns(cluster))
    pod_spec.update(one_per_host(cluster))
    pod_spec = directory.with_directory(cluster, pod_spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": common.metadata(cluster, names.controller(cluster.name), C.COMPONENT_CONTROLLER),
        "spec": {
            "replicas": spec.replicas,
            "serviceName": names.controller_hosts(cluster.name),
            "selector": {"matchLabels": selector},
            # A standby is never Ready: with OrderedReady, the pods after it would never be made.
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "template": pods.customised({
                "metadata": {
                    "labels": {**names.object_labels(cluster.name, C.COMPONENT_CONTROLLER), **serving_labels(cluster)},
                    "annotations": {
                        C.ANNOTATION_CONFIG_HASH: config_hash,
                    },
                },
                "spec": pod_spec,
            }, pods.component_options(cluster, spec.pod, spec.placement)),
        },
    }
