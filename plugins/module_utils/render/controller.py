# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurmctld: a one-pod StatefulSet with its state on a volume, and the Service in front."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import slurmdbd_host
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.render import common
from ansible_collections.slurmkube.core.plugins.module_utils.render.jwt_auth import with_jwks

STATE_VOLUME = "state"


def serving_labels(cluster: SlurmCluster) -> Dict[str, str]:
    """The Service's selector: slurmctld's pod until the operator marks it stopping."""
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
    """ClusterIP Service on 6817: the stable address in SlurmctldHost."""
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


# The preStop hook's MIN, QUIET and MAX seconds. The operator takes a stopping pod out of the
# Service (C.LABEL_SERVING); the hook lets slurmctld serve at least MIN seconds, then until no
# connection came in for QUIET (the Service has dropped the pod), at most MAX: slurmctld then has
# the rest of the grace period to save its state.
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
        "readinessProbe": common.slurm_ready_probe(C.SLURMCTLD_PORT, period=5),
        # Signalled once the Service has dropped the pod (see the hook's header).
        "lifecycle": {"preStop": {"exec": {"command": [C.CONTROLLER_STOP_PROGRAM, *map(str, CONTROLLER_STOP_WAIT)]}}},
        "resources": common.resources(cluster.spec.controller.resources),
        "securityContext": common.confined_security_context(),
        "volumeMounts": mounts,
    }


def render_controller_statefulset(cluster: SlurmCluster, config_hash: str) -> common.Manifest:
    """The slurmctld StatefulSet; it restarts only for settings `scontrol reconfigure` cannot apply
    (`config_hash`: slurm_config.controller_config_hash)."""
    spec = cluster.spec.controller
    selector = names.selector_labels(cluster.name, C.COMPONENT_CONTROLLER)
    claim: Dict[str, Any] = {
        "metadata": {"name": STATE_VOLUME, "labels": names.object_labels(cluster.name, C.COMPONENT_CONTROLLER)},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": str(spec.state_volume.size)}}},
    }
    if spec.state_volume.storage_class_name:
        claim["spec"]["storageClassName"] = spec.state_volume.storage_class_name
    container = _controller_container(cluster)
    volumes = [common.config_volume(cluster), common.munge_volume(cluster), common.jail_volume(cluster)]
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
        pod_spec["initContainers"] = [waiting]
    pod_spec.update(common.login_hosts_dns(cluster))
    pod_spec.update(common.placement(spec.placement))
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": common.metadata(cluster, names.controller(cluster.name), C.COMPONENT_CONTROLLER),
        "spec": {
            "replicas": 1,
            "serviceName": names.controller(cluster.name),
            "selector": {"matchLabels": selector},
            "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate"},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "template": {
                "metadata": {
                    "labels": {**names.object_labels(cluster.name, C.COMPONENT_CONTROLLER), **serving_labels(cluster)},
                    "annotations": {
                        C.ANNOTATION_CONFIG_HASH: config_hash,
                    },
                },
                "spec": pod_spec,
            },
            "volumeClaimTemplates": [claim],
        },
    }
