# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The jail: its ReadWriteMany claim and the Job that fills it once from the jail image.

The operator renders them from a SlurmCluster (``render_jail_claim``,
``render_jail_populate_job``); the jail_volume module renders the same objects from its
options through the value-taking builders below, so both fill a jail the same way.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import jail_claim_name
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.render import common, pods

# The populate program leaves a jail alone when its marker holds the version, takes the
# update path (image's /usr replaced, missing files added, nothing else touched) when the
# marker holds anything else, and copies everything when there is no marker. Repopulating
# an existing jail therefore rewrites the marker first: it must never take the full-copy
# path, which would overwrite the users' /etc/passwd.
REPOPULATE_MARKER = "slurmkube-repopulate"


def jail_claim(metadata: Mapping[str, Any], size: str, storage_class_name: Optional[str],
               volume_name: Optional[str] = None) -> common.Manifest:
    """A ReadWriteMany claim; bound to a given PersistentVolume when volume_name is set."""
    spec: Dict[str, Any] = {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": size}},
    }
    if storage_class_name is not None:
        spec["storageClassName"] = storage_class_name
    if volume_name is not None:
        spec["volumeName"] = volume_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": dict(metadata), "spec": spec}


def nfs_volume(metadata: Mapping[str, Any], size: str, server: str, path: str, claim_namespace: str,
               claim_name: str) -> common.Manifest:
    """A PersistentVolume for an NFS export, reserved for one claim; deleting it keeps the export's files."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": dict(metadata),
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": claim_namespace, "name": claim_name},
            "nfs": {"server": server, "path": path},
        },
    }


def render_jail_claim(cluster: SlurmCluster) -> Optional[common.Manifest]:
    """The jail's PVC, or None when the spec brings its own claim or an NFS export.

    Deleting the cluster keeps it: owner references are not set on this object.
    """
    jail = cluster.spec.jail
    if jail.existing_claim or jail.nfs:
        return None
    return jail_claim(common.metadata(cluster, jail_claim_name(cluster), C.COMPONENT_JAIL),
                      str(jail.size), jail.storage_class_name)


def jail_version(cluster: SlurmCluster) -> str:
    """What the jail's marker records: the image it was filled from."""
    return cluster.spec.images.jail


def populate_job_suffix(version: str) -> str:
    """The part of a populate Job's name that changes with the version (a new image, a new Job)."""
    return content_hash([version])[:8]


def populate_job_name(cluster: SlurmCluster) -> str:
    """The populate Job's name carries the version: a new jail image gets a new Job."""
    return names.jail_populate_job(cluster.name, populate_job_suffix(jail_version(cluster)))


def populate_command(repopulate: bool = False) -> List[str]:
    """The populate program; for a repopulation, behind a marker rewrite that forces its update path."""
    if not repopulate:
        return [C.JAIL_POPULATE_PROGRAM]
    script = 'marker="$%s/%s"; if [ -e "$marker" ]; then echo %s >"$marker"; fi; exec %s' % (
        C.ENV_JAIL_PATH, C.JAIL_MARKER_FILE, REPOPULATE_MARKER, C.JAIL_POPULATE_PROGRAM)
    return ["/bin/sh", "-c", script]


def populate_job(metadata: Mapping[str, Any], pod_labels: Mapping[str, str], image: str, pull_policy: str,
                 version: str, volume: Mapping[str, Any], pod_settings: Mapping[str, Any],
                 cluster_name: Optional[str] = None, command: Optional[List[str]] = None) -> common.Manifest:
    """Job that copies the jail image's root into the volume; a no-op when the marker holds the version."""
    env = [{"name": C.ENV_ROLE, "value": C.ROLE_JAIL_POPULATE}]
    if cluster_name is not None:
        env.append({"name": C.ENV_CLUSTER, "value": cluster_name})
    env += [
        {"name": C.ENV_JAIL_PATH, "value": C.JAIL_MOUNT_PATH},
        {"name": C.ENV_JAIL_VERSION, "value": version},
    ]
    container = {
        "name": "populate",
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": list(command or populate_command()),
        "env": env,
        # It copies the jail image's files with their owners, modes and device nodes: root with
        # the default capabilities, under the runtime's default seccomp profile.
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}, "capabilities": {"drop": ["NET_RAW"]}},
        "volumeMounts": [{"name": volume["name"], "mountPath": C.JAIL_MOUNT_PATH}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": dict(metadata),
        "spec": {
            "backoffLimit": 3,
            "template": {
                "metadata": {"labels": dict(pod_labels)},
                "spec": {
                    **pod_settings,
                    "restartPolicy": "OnFailure",
                    "containers": [container],
                    "volumes": [dict(volume)],
                },
            },
        },
    }


def render_jail_populate_job(cluster: SlurmCluster) -> common.Manifest:
    """The cluster's populate Job, run as the cluster's tokenless ServiceAccount, with spec.pods."""
    images = cluster.spec.images
    job = populate_job(
        common.metadata(cluster, populate_job_name(cluster), C.COMPONENT_JAIL),
        names.object_labels(cluster.name, C.COMPONENT_JAIL), images.jail, images.pull_policy, jail_version(cluster),
        common.jail_volume(cluster), common.pod_identity(cluster), cluster_name=cluster.name)
    job["spec"]["template"] = pods.customised(job["spec"]["template"], pods.component_options(cluster))
    return job
