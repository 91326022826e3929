# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Long health checks: a CronJob that submits them as ordinary Slurm jobs."""

from __future__ import annotations

from typing import Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.render import common, pods

# The long-checks role gives up after 300 s; the Job must not outlive it by much.
LONG_CHECKS_DEADLINE_SECONDS = 600


def render_healthcheck_cronjob(cluster: SlurmCluster) -> Optional[common.Manifest]:
    """The CronJob, or None when long checks are off.

    It runs in the login image (Slurm clients + munge) and only submits jobs, so it needs
    no Kubernetes API rights.
    """
    checks = cluster.spec.health_checks
    if not checks.long_checks.enabled:
        return None
    images = cluster.spec.images
    container = {
        "name": "submit",
        "image": images.login,
        "imagePullPolicy": images.pull_policy,
        "command": [C.ENTRYPOINT_PROGRAM],
        "env": common.env(cluster, C.ROLE_LONG_CHECKS),
        "securityContext": common.confined_security_context(),
        "volumeMounts": common.common_mounts(),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": common.metadata(cluster, names.healthcheck(cluster.name), C.COMPONENT_HEALTHCHECK),
        "spec": {
            "schedule": checks.long_checks.schedule,
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 1,
                    "activeDeadlineSeconds": LONG_CHECKS_DEADLINE_SECONDS,
                    "template": pods.customised({
                        "metadata": {"labels": names.object_labels(cluster.name, C.COMPONENT_HEALTHCHECK)},
                        "spec": {
                            **common.pod_identity(cluster),
                            "restartPolicy": "Never",
                            "containers": [container],
                            "volumes": [common.config_volume(cluster), common.munge_volume(cluster)],
                        },
                    }, pods.component_options(cluster)),
                },
            },
        },
    }
