# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pre-flight of a Slurm upgrade: a Job that runs the new controller image on the
configuration rendered for it (its own ConfigMap) before anything of the running cluster
changes. What it does is the image's `preflight` role (images/common/roles/preflight)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.render import common, pods
from ansible_collections.slurmkube.core.plugins.module_utils.render.jwt_auth import with_jwks

# slurmctld starts in seconds; a pull of a new image may take minutes.
PREFLIGHT_DEADLINE_SECONDS = 900


def preflight_name(cluster: SlurmCluster, files: Mapping[str, str]) -> str:
    """The Job's (and its ConfigMap's) name: another image or configuration, another Job."""
    parts = [cluster.spec.images.controller, *("%s\0%s" % item for item in sorted(files.items()))]
    return names.preflight(cluster.name, content_hash(parts)[:8])


def render_preflight(cluster: SlurmCluster, files: Mapping[str, str]) -> List[common.Manifest]:
    """The ConfigMap with the new configuration, and the Job that tries the controller image on it."""
    name = preflight_name(cluster, files)
    images = cluster.spec.images
    container: Dict[str, Any] = {
        "name": C.COMPONENT_PREFLIGHT,
        "image": images.controller,
        "imagePullPolicy": images.pull_policy,
        "env": common.env(cluster, C.ROLE_PREFLIGHT),
        "resources": common.resources(cluster.spec.controller.resources),
        "securityContext": common.confined_security_context(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [{"name": common.CONFIG_VOLUME, "mountPath": C.SLURM_CONFIG_DIR, "readOnly": True}],
    }
    volumes: List[Dict[str, Any]] = [{"name": common.CONFIG_VOLUME, "configMap": {"name": name}}]
    # The REST API's key set, which the new slurmctld loads like the running one (public keys only).
    with_jwks(cluster, container["volumeMounts"], volumes)
    pod_spec: Dict[str, Any] = {
        **common.pod_identity(cluster),
        # slurmctld starts only on a host SlurmctldHost names.
        "hostname": names.controller_pod(cluster.name),
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": volumes,
    }
    config_map: common.Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": common.metadata(cluster, name, C.COMPONENT_PREFLIGHT),
        "data": dict(files),
    }
    job: common.Manifest = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": common.metadata(cluster, name, C.COMPONENT_PREFLIGHT),
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": PREFLIGHT_DEADLINE_SECONDS,
            "template": pods.customised(
                {"metadata": {"labels": names.object_labels(cluster.name, C.COMPONENT_PREFLIGHT)}, "spec": pod_spec},
                pods.component_options(cluster, cluster.spec.controller.pod, cluster.spec.controller.placement)),
        },
    }
    return [config_map, job]
