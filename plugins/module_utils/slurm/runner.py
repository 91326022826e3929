# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where Slurm's commands run: in a ready controller pod, or a worker's own check in its pod.

The one way the operator and the modules reach slurmctld: through the exec API into the
controller container, which has munge, the config and the client tools.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import last_ready_pod, pods_by_name
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import Runner, SlurmControl
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.sacctmgr import Sacctmgr

# A node's health check, run through the exec API, may wait on a hung jail or GPU driver.
NODE_REPORT_TIMEOUT_SECONDS = 180


def controller_pod(kube: Kube, cluster: str, namespace: str) -> Optional[str]:
    """The serving controller pod of the cluster (the Ready one; of two, the one Ready last), or
    None while there is none."""
    pod = last_ready_pod(pods_by_name(kube, namespace, names.selector_labels(cluster, C.COMPONENT_CONTROLLER)))
    return pod["metadata"]["name"] if pod else None


def exec_runner(kube: Kube, namespace: str, pod: str, container: str) -> Runner:
    """Commands run in one container of one pod."""
    def run(argv: Sequence[str]) -> Tuple[int, str, str]:
        return kube.exec(namespace, pod, container, argv)
    return run


def controller_control(kube: Kube, cluster: str, namespace: str) -> Optional[SlurmControl]:
    """Slurm's tools in a ready controller pod of the cluster; None while there is none."""
    pod = controller_pod(kube, cluster, namespace)
    if pod is None:
        return None
    return SlurmControl(exec_runner(kube, namespace, pod, C.CONTAINER_CONTROLLER))


def controller_sacctmgr(kube: Kube, cluster: str, namespace: str) -> Optional[Sacctmgr]:
    """sacctmgr in a ready controller pod (it reaches slurmdbd as root, Slurm's administrator);
    None while there is none."""
    pod = controller_pod(kube, cluster, namespace)
    if pod is None:
        return None
    return Sacctmgr(exec_runner(kube, namespace, pod, C.CONTAINER_CONTROLLER))


def node_report(kube: Kube, namespace: str, pod: str) -> Tuple[int, str, str]:
    """The worker's fast health check in report mode (one problem per line, exit 1 when unhealthy)."""
    return kube.exec(namespace, pod, C.CONTAINER_WORKER, [C.HEALTHCHECK_PROGRAM, "--report"],
                     timeout=NODE_REPORT_TIMEOUT_SECONDS)
