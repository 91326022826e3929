# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurmctld's pod leaves its Service as soon as it is being deleted.

A terminating pod keeps its Ready condition (the kubelet does not reflect its readiness probe
then), and kube-proxy sends new connections to a terminating endpoint while no other is ready.
Connections slurmctld accepted but did not answer before it stopped are reset, and Slurm's
clients do not retry a reset. Out of the Service, the pod gets no new connection: clients retry
until the next pod serves. The pod's preStop hook (slurmkube-controller-stop) waits for that.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import pod_terminating


def stopping_pod_patch(pod: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The merge patch that takes a slurmctld pod being deleted out of its Service; None otherwise."""
    serving = ((pod.get("metadata") or {}).get("labels") or {}).get(C.LABEL_SERVING) == "true"
    if serving and pod_terminating(pod):
        return {"metadata": {"labels": {C.LABEL_SERVING: "false"}}}
    return None
