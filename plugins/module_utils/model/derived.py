# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Facts derived from a validated model: what Slurm is told about a node set's nodes, the
partitions, and the names a spec may override (names.py builds them; here the spec's override
is passed, so no caller forgets it).
"""

from __future__ import annotations

from typing import List, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import WORKER_DAEMON_RESERVE_MIB
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import (
    DEFAULT_PARTITION_NAME,
    NodeSet,
    Partition,
    SlurmCluster,
)
from ansible_collections.slurmkube.core.plugins.module_utils.quantity import parse_quantity, quantity_to_mebibytes

# --------------------------------------------------------------------------- names with overrides


def munge_secret_name(cluster: SlurmCluster) -> str:
    """The Secret holding the munge key."""
    return names.munge_key_secret(cluster.name, cluster.spec.munge.secret_name)


def accounting_db_secret_name(cluster: SlurmCluster) -> str:
    """The Secret holding the accounting database user's password."""
    return names.accounting_db_secret(cluster.name, cluster.spec.accounting.database.password_secret)


def jail_claim_name(cluster: SlurmCluster) -> str:
    """The PersistentVolumeClaim of the jail (the user's own claim when given)."""
    return names.jail_claim(cluster.name, cluster.spec.jail.existing_claim)


def slurmdbd_host(cluster: SlurmCluster) -> str:
    """Where slurmctld and the clients (sacct, sacctmgr) reach slurmdbd."""
    return names.slurmdbd_host(cluster.name, cluster.spec.accounting.host)


def database_host(cluster: SlurmCluster) -> str:
    """Where slurmdbd reaches its database."""
    return names.database_host(cluster.name, cluster.spec.accounting.database.host)


def nodeset_object_name(nodeset: NodeSet) -> str:
    """A node set's StatefulSet, headless Service and budget; its pods are its Slurm nodes."""
    return names.nodeset(nodeset.spec.cluster_name, nodeset.name)


def slurm_node_names(nodeset: NodeSet) -> List[str]:
    """The Slurm node names of a node set: its pods' names."""
    base = nodeset_object_name(nodeset)
    return [names.pod(base, i) for i in range(nodeset.spec.replicas)]


def on_demand(nodeset: NodeSet) -> bool:
    """Its nodes beyond replicas come and go with Slurm's power saving (spec.maxReplicas)."""
    return nodeset.spec.max_replicas is not None


def nodes_at_most(nodeset: NodeSet) -> int:
    """How many Slurm nodes the node set may have."""
    return nodeset.spec.replicas if nodeset.spec.max_replicas is None else nodeset.spec.max_replicas


def node_range(base: str, count: int) -> str:
    """The hostlist expression of the nodes '<base>-0' to '<base>-<count - 1>' (count >= 1)."""
    return names.pod(base, 0) if count == 1 else "%s-[0-%d]" % (base, count - 1)


# --------------------------------------------------------------------------- what runs

def runs_slurmdbd(cluster: SlurmCluster) -> bool:
    """Whether this cluster deploys its own slurmdbd (accounting on, no external one named)."""
    accounting = cluster.spec.accounting
    return accounting.enabled and not accounting.host


def runs_database(cluster: SlurmCluster) -> bool:
    """Whether this cluster deploys its own MariaDB for its slurmdbd."""
    return runs_slurmdbd(cluster) and not cluster.spec.accounting.database.host


def backup_parts(cluster: SlurmCluster) -> List[str]:
    """What each backup run takes a snapshot of: the accounting database only where slurmkube runs
    slurmdbd (it knows the database and its password)."""
    backup = cluster.spec.backup
    parts = [(backup.jail, C.BACKUP_PART_JAIL), (backup.controller_state, C.BACKUP_PART_CONTROLLER_STATE),
             (backup.accounting_database and runs_slurmdbd(cluster), C.BACKUP_PART_DATABASE)]
    return [part for wanted, part in parts if wanted]


# --------------------------------------------------------------------------- Slurm's view


def has_topology(cluster: SlurmCluster) -> bool:
    """The cluster runs topology/tree: switches in the spec, or from a node label."""
    return bool(cluster.spec.slurm.topology or cluster.spec.slurm.switch_label)


def slurm_cpus(nodeset: NodeSet) -> int:
    """CPUs= of the node set's Slurm nodes (validated to be whole)."""
    return int(parse_quantity(nodeset.spec.resources.cpu))


def slurm_real_memory_mib(nodeset: NodeSet) -> int:
    """RealMemory= of the node set's Slurm nodes: the pod's memory limit."""
    return quantity_to_mebibytes(nodeset.spec.resources.memory)


def slurm_mem_spec_limit_mib(nodeset: NodeSet) -> int:
    """MemSpecLimit= of the node set's Slurm nodes: what slurmd and munged keep (5%, at least 256 MiB)."""
    return max(WORKER_DAEMON_RESERVE_MIB, slurm_real_memory_mib(nodeset) // 20)


def slurm_job_memory_mib(nodeset: NodeSet) -> int:
    """Memory jobs may be given on one node of the set: RealMemory minus MemSpecLimit."""
    return slurm_real_memory_mib(nodeset) - slurm_mem_spec_limit_mib(nodeset)


def node_conf(nodeset: NodeSet) -> str:
    """The Feature=, MemSpecLimit= and Gres= words of `slurmd -Z --conf` for this node set."""
    features = [nodeset.name] + [f for f in nodeset.spec.features if f != nodeset.name]
    words = ["Feature=%s" % ",".join(features), "MemSpecLimit=%d" % slurm_mem_spec_limit_mib(nodeset)]
    gres: List[str] = []
    gpus = nodeset.spec.resources.gpus
    if gpus:
        gres.append("gpu:%s:%d" % (nodeset.spec.gpu_type, gpus) if nodeset.spec.gpu_type else "gpu:%d" % gpus)
    gres.extend(nodeset.spec.gres)
    if gres:
        words.append("Gres=%s" % ",".join(gres))
    return " ".join(words)


def partitions_of(cluster: SlurmCluster) -> List[Partition]:
    """The partitions to render: the spec's, or one default 'main' over every node set."""
    return list(cluster.spec.partitions) or [Partition(name=DEFAULT_PARTITION_NAME, default=True)]


def nodesets_in_partition(partition: Partition, nodesets: Sequence[NodeSet]) -> List[NodeSet]:
    """Node sets a partition covers, in name order."""
    if partition.node_sets:
        chosen = [ns for ns in nodesets if ns.name in partition.node_sets]
    else:
        chosen = [ns for ns in nodesets if ns.spec.catch_all]
    return sorted(chosen, key=lambda ns: ns.name)
