# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The jail: its ReadWriteMany claim and the Job that fills it once from the jail image."""

from __future__ import annotations

from typing import Any, Dict, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model import SlurmCluster, object_name
from ansible_collections.slurmkube.core.plugins.module_utils.render import common


def render_jail_claim(cluster: SlurmCluster) -> Optional[common.Manifest]:
    """The jail's PVC, or None when the spec brings its own claim or an NFS export.

    Deleting the cluster keeps it: owner references are not set on this object.
    """
    jail = cluster.spec.jail
    if jail.existing_claim or jail.nfs:
        return None
    spec: Dict[str, Any] = {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": str(jail.size)}},
    }
    if jail.storage_class_name:
        spec["storageClassName"] = jail.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": common.metadata(cluster, common.jail_claim_name(cluster), C.COMPONENT_JAIL),
        "spec": spec,
    }


def jail_version(cluster: SlurmCluster) -> str:
    """What the jail's marker records: the image it was filled from."""
    return cluster.spec.images.jail


def populate_job_name(cluster: SlurmCluster) -> str:
    """The populate Job's name carries the version: a new jail image gets a new Job."""
    return "%s-%s" % (object_name(cluster, "jail-populate"), common.content_hash([jail_version(cluster)])[:8])


def render_jail_populate_job(cluster: SlurmCluster) -> common.Manifest:
    """Job that copies the jail image's root into the volume; a no-op when the marker matches."""
    images = cluster.spec.images
    container = {
        "name": "populate",
        "image": images.jail,
        "imagePullPolicy": images.pull_policy,
        "command": [C.JAIL_POPULATE_PROGRAM],
        "env": [
            {"name": C.ENV_ROLE, "value": C.ROLE_JAIL_POPULATE},
            {"name": C.ENV_CLUSTER, "value": cluster.name},
            {"name": C.ENV_JAIL_PATH, "value": C.JAIL_MOUNT_PATH},
            {"name": C.ENV_JAIL_VERSION, "value": jail_version(cluster)},
        ],
        "volumeMounts": [{"name": common.JAIL_VOLUME, "mountPath": C.JAIL_MOUNT_PATH}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": common.metadata(cluster, populate_job_name(cluster), C.COMPONENT_JAIL),
        "spec": {
            "backoffLimit": 3,
            "template": {
                "metadata": {"labels": common.labels(cluster, C.COMPONENT_JAIL)},
                "spec": {
                    **common.pod_identity(cluster),
                    "restartPolicy": "OnFailure",
                    "containers": [container],
                    "volumes": [common.jail_volume(cluster)],
                },
            },
        },
    }
