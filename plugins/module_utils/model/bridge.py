# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster model's bridge part: the Kubernetes pods the cluster's Slurm schedules, beside
types.py, which holds it in SlurmClusterSpec.bridge."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import DNS1123_LABEL, SLURM_NAME, spec_field


@dataclass(frozen=True)
class BridgeAccounts:
    """The Slurm accounts the pods of one bridge namespace may charge."""

    namespace: str = spec_field("A namespace of spec.bridge.namespaces.", pattern=DNS1123_LABEL, max_length=63)
    accounts: List[str] = spec_field(
        "Accounts its pods may name (annotation slurmkube.io/account).", factory=list, pattern=SLURM_NAME,
        max_length=64, max_items=16, unique=True)


@dataclass(frozen=True)
class Bridge:
    """Kubernetes pods scheduled by Slurm (the bridge): each pod, or each gang of pods (a Job's
    parallel pods, a PodGroup, a JobSet replicated job, a LeaderWorkerSet group), becomes one Slurm
    job that holds the pods' CPUs and memory on the cluster's worker nodes, beside native jobs; the
    pods are bound to the Kubernetes nodes of the Slurm nodes the job got."""

    namespaces: List[str] = spec_field(
        "Namespaces whose pods this cluster's Slurm schedules: the pods that name the scheduler "
        "slurmkube-bridge, which the slurm_operator module's bridge_namespaces sets at admission on "
        "every pod of those namespaces that names the default scheduler. None when empty.",
        factory=list, pattern=DNS1123_LABEL, max_length=63, max_items=64, unique=True)
    partition: Optional[str] = spec_field(
        "Partition of the pods' jobs when a pod names none (annotation slurmkube.io/partition); "
        "Slurm's default partition when unset.", None, pattern=SLURM_NAME, max_length=64)
    exclusive: bool = spec_field(
        "Whole nodes for each pod's job (sbatch --exclusive): no native job and no other pod beside "
        "it. When false, pods and native jobs share a node core by core, Slurm allocating both.",
        False)
    accounts: List[BridgeAccounts] = spec_field(
        "Which Slurm accounts the pods of each namespace may charge. The pods' jobs are root's: a pod "
        "naming an account its namespace is not given here stays Pending with an Event, and a pod "
        "naming none is charged to root's default account. Root needs an association with each.",
        factory=list, max_items=16)
    lost_node_timeout_seconds: int = spec_field(
        "When the Kubernetes node under a pod the bridge bound stops reporting (NotReady), how long "
        "to wait for it before the pod is deleted by force (Kubernetes never removes a pod whose "
        "kubelet cannot confirm it stopped) and its Slurm job is cancelled, so that its CPUs, memory "
        "and GPUs go back to Slurm. A node only cut off from the control plane may still run the "
        "pod's containers until it reports again. 0: never.",
        300,
        minimum=0,
    )
