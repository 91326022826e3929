# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every object of one Slurm cluster, in the order they should be applied, rendered once."""

from __future__ import annotations

from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import on_demand
from ansible_collections.slurmkube.core.plugins.module_utils.model.rules import check_references
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import NodeSet, SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.render import (
    accounting,
    controller,
    directory,
    exporter,
    jail,
    login,
    policy,
    rest,
    worker,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.backup import render_backup_cronjob
from ansible_collections.slurmkube.core.plugins.module_utils.render.common import Manifest
from ansible_collections.slurmkube.core.plugins.module_utils.render.healthcheck import render_healthcheck_cronjob
from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import (
    controller_config_hash,
    render_config_map,
    render_slurm_config,
    worker_config_hash,
)


class RenderedCluster(NamedTuple):
    """A cluster's objects, and the config files its ConfigMap carries (what slurmctld must read)."""

    objects: List[Manifest]
    config_files: Dict[str, str]


def render_cluster(cluster: SlurmCluster, nodesets: Sequence[NodeSet],
                   placement: Optional[Mapping[str, str]] = None,
                   replicas: Optional[Mapping[str, int]] = None,
                   jwt_key_ids: Sequence[str] = (),
                   leaving: Optional[Mapping[str, Tuple[int, str]]] = None) -> RenderedCluster:
    """All manifests of a cluster and its node sets (the munge, host-key and database Secrets
    excluded: they hold generated secrets, made by the munge_key module and the operator).
    `placement`, each worker's switch label value, feeds topology.conf (spec.slurm.switchLabel);
    `replicas`, by node set name, the pods each worker StatefulSet keeps, or the CLOUD nodes an
    on-demand set declares (the operator's scale plan: a node leaves only once Slurm let it go); a
    node set not named gets its spec's count;
    `jwt_key_ids`, the REST API's keys slurmdbd must have loaded (jwt.loaded_at_start);
    `leaving`, a deleted on-demand set's nodes still declared, by base name: (count, words).
    The Slurm settings are merged once, and the restart hashes are taken from that result."""
    check_references(cluster, nodesets)
    ordered = sorted(nodesets, key=lambda ns: ns.name)
    counts = {ns.name: (replicas or {})[ns.name] for ns in ordered if on_demand(ns) and ns.name in (replicas or {})}
    config = render_slurm_config(cluster, ordered, placement, counts, leaving)
    files = config.files
    worker_hash = worker_config_hash(config)
    controller_hash = controller_config_hash(config)
    # SSSD's configuration rolls the pods it runs in (not slurmrestd's, which the controller's
    # digest also rolls): none without a directory, so a cluster without one keeps its digests.
    sssd = directory.config_digest(cluster)
    worker_hash_sssd, controller_hash_sssd = ((content_hash([worker_hash, sssd]), content_hash([controller_hash, sssd]))
                                              if sssd else (worker_hash, controller_hash))
    maybe: List[Optional[Manifest]] = [
        policy.render_service_account(cluster),
        render_config_map(cluster, files),
        login.render_sshd_config_map(cluster),
        directory.render_sssd_config_map(cluster),
        jail.render_jail_claim(cluster),
        jail.render_jail_populate_job(cluster),
        *accounting.render_accounting(cluster, jwt_key_ids),
        controller.render_controller_state_claim(cluster),
        controller.render_controller_service(cluster),
        controller.render_controller_hosts_service(cluster),
        controller.render_controller_statefulset(cluster, controller_hash_sssd),
    ]
    for ns in ordered:
        maybe += [
            worker.render_worker_service(cluster, ns),
            worker.render_worker_on_demand_template(cluster, ns, worker_hash_sssd, (replicas or {}).get(ns.name))
            if on_demand(ns) else
            worker.render_worker_statefulset(cluster, ns, worker_hash_sssd, (replicas or {}).get(ns.name)),
            policy.render_worker_pdb(cluster, ns),
        ]
    maybe += [
        login.render_login_service(cluster),
        login.render_login_hosts_service(cluster),
        login.render_login_statefulset(cluster),
        policy.render_login_pdb(cluster),
        render_healthcheck_cronjob(cluster),
        *exporter.render_exporter(cluster),
        *rest.render_rest(cluster, controller_hash),
        render_backup_cronjob(cluster),
    ]
    maybe += policy.render_network_policies(cluster)
    return RenderedCluster([m for m in maybe if m is not None], files)
