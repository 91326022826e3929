# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one place an object name, a label set or a derived address is built.

Renderers, the operator, the modules' back ends and the Slurm runner ask here and never spell a
name (tests/unit/test_names.py scans them). Every function takes plain values (the cluster's
name, a namespace, the user's override) and no model: the layers that know no model (slurm/,
k8s/) find pods by these names too. Fixed names (the operator's own, its Lease) sit in
constants.py beside the labels' keys.
"""

from __future__ import annotations

import hashlib
from typing import Dict, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

# A Job's pods carry its name in a label (batch.kubernetes.io/job-name), whose value holds 63.
JOB_NAME_MAX = 63
# StatefulSets label their pods with "<name>-<10-character revision hash>", and a label value
# holds 63 characters.
STATEFULSET_NAME_MAX = 52


def _of(cluster: str, part: str) -> str:
    return "%s-%s" % (cluster, part)


def service_domain(service: str, namespace: str) -> str:
    """The cluster-local DNS name of a Service (of a headless Service: the domain of its pods)."""
    return "%s.%s.svc.cluster.local" % (service, namespace)


def fully_qualified(domain: str) -> str:
    """DOMAIN with the trailing dot that makes the resolver ask for it alone: a pod's ndots:5 would
    first try a four-dot name under each search domain (A and AAAA each, NXDOMAIN), ten queries
    where two answer. Slurm resolves SlurmctldAddr for every message to slurmctld."""
    return domain if domain.endswith(".") else domain + "."


# --------------------------------------------------------------------------- labels


def selector_labels(cluster: str, component: str, nodeset: Optional[str] = None) -> Dict[str, str]:
    """Labels that select a component's pods; they never change over an object's life."""
    labels = {C.LABEL_CLUSTER: cluster, C.LABEL_COMPONENT: component}
    if nodeset is not None:
        labels[C.LABEL_NODESET] = nodeset
    return labels


def object_labels(cluster: str, component: str, nodeset: Optional[str] = None) -> Dict[str, str]:
    """Every label we put on objects of a component."""
    out = standalone_labels(cluster, component)
    out.update(selector_labels(cluster, component, nodeset))
    return out


def standalone_labels(instance: str, component: str) -> Dict[str, str]:
    """Labels of what a module makes outside any cluster: no cluster label, so no operator ever
    prunes it."""
    return {C.LABEL_NAME: "slurm", C.LABEL_INSTANCE: instance, C.LABEL_COMPONENT: component,
            C.LABEL_PART_OF: C.MANAGED_BY, C.LABEL_MANAGED_BY: C.MANAGED_BY}


def collection_labels() -> Dict[str, str]:
    """Labels of what installs with the collection itself (the CRDs' spec-rules policy)."""
    return {C.LABEL_PART_OF: C.MANAGED_BY, C.LABEL_MANAGED_BY: C.MANAGED_BY}


def operator_labels() -> Dict[str, str]:
    """Labels of the operator's own objects (its install, its admission policy)."""
    return {C.LABEL_NAME: C.OPERATOR_NAME, **collection_labels()}


# --------------------------------------------------------------------------- the controller


def controller(cluster: str) -> str:
    """slurmctld's StatefulSet and its Service (which reaches the controller that serves)."""
    return _of(cluster, C.COMPONENT_CONTROLLER)


def controller_pod(cluster: str, ordinal: int = 0) -> str:
    """A slurmctld pod; its hostname is its SlurmctldHost name (ordinal 0: the primary)."""
    return pod(controller(cluster), ordinal)


def controller_address(cluster: str, namespace: str) -> str:
    """The controller Service's DNS name (SlurmctldAddr): whichever controller serves."""
    return service_domain(controller(cluster), namespace)


def controller_hosts(cluster: str) -> str:
    """The headless Service of the slurmctld pods (the StatefulSet's serviceName)."""
    return _of(cluster, C.COMPONENT_CONTROLLER + "-hosts")


def controller_host_address(cluster: str, namespace: str, ordinal: int) -> str:
    """One slurmctld pod's own DNS name, served or not: its SlurmctldHost address, where the
    controllers reach each other."""
    return "%s.%s" % (controller_pod(cluster, ordinal), service_domain(controller_hosts(cluster), namespace))


def controller_state_claim(cluster: str) -> str:
    """The claim of StateSaveLocation, which every controller mounts. The name is the one the
    StatefulSet's volume template gave it up to 0.3 (one controller), so a cluster made then
    keeps its state where it is."""
    return "state-%s" % controller_pod(cluster)


# --------------------------------------------------------------------------- workers


def nodeset(cluster: str, nodeset_name: str) -> str:
    """A node set's StatefulSet, headless Service and PodDisruptionBudget; its pods are
    '<this>-<n>', and they are its Slurm nodes."""
    return _of(cluster, nodeset_name)


def pod(statefulset: str, ordinal: int) -> str:
    """The pod of a StatefulSet at an ordinal (for workers: also the Slurm node's name)."""
    return "%s-%d" % (statefulset, ordinal)


def sub_mount_volume(sub_mount: str) -> str:
    """The worker pod's volume of a jail sub-mount (spec.jail.subMounts[].name)."""
    return C.SUB_MOUNT_VOLUME_PREFIX + sub_mount


def node_range(statefulset: str, count: int) -> str:
    """The Slurm hostlist of a StatefulSet's first count pods (count > 0)."""
    return "%s-[0-%d]" % (statefulset, count - 1)


# --------------------------------------------------------------------------- login


def login(cluster: str) -> str:
    """The login StatefulSet, its Service and PodDisruptionBudget."""
    return _of(cluster, C.COMPONENT_LOGIN)


def login_hosts(cluster: str) -> str:
    """The headless Service of the login pods: each one resolves as <pod>.<this>.<namespace>.svc."""
    return _of(cluster, C.COMPONENT_LOGIN + "-hosts")


def sshd_config(cluster: str) -> str:
    return _of(cluster, "sshd-config")


def ssh_host_keys_secret(cluster: str) -> str:
    return _of(cluster, "ssh-host-keys")


# --------------------------------------------------------------------------- shared objects


def slurm_config(cluster: str) -> str:
    """The ConfigMap with slurm.conf and its companions."""
    return _of(cluster, "slurm-config")


def service_account(cluster: str) -> str:
    """The ServiceAccount the cluster's pods run as (it has no token and no rights)."""
    return _of(cluster, "slurm")


def munge_key_secret(cluster: str, given: Optional[str] = None) -> str:
    """The Secret holding the munge key: the one the spec names, or the cluster's own."""
    return given or _of(cluster, "munge-key")


def jail_claim(cluster: str, existing: Optional[str] = None) -> str:
    """The PersistentVolumeClaim of the jail (the user's own claim when given)."""
    return existing or _of(cluster, C.COMPONENT_JAIL)


def jail_populate_job(cluster: str, version_suffix: str) -> str:
    """A populate Job's name carries the version: a new jail image gets a new Job."""
    return "%s-jail-populate-%s" % (cluster, version_suffix)


def is_jail_populate_job(cluster: str, name: str) -> bool:
    """Whether a Job of the cluster populates its jail (for some version)."""
    return name.startswith(jail_populate_job(cluster, ""))


def preflight(cluster: str, suffix: str) -> str:
    """An upgrade's pre-flight Job and its ConfigMap: the suffix changes with the image and configuration tried."""
    return "%s-%s-%s" % (cluster, C.COMPONENT_PREFLIGHT, suffix)


def healthcheck(cluster: str) -> str:
    """The long health checks' CronJob."""
    return _of(cluster, C.COMPONENT_HEALTHCHECK)


def network_policy(cluster: str, purpose: str) -> str:
    """A NetworkPolicy of the cluster (internal, login-ssh, egress, metrics, ...)."""
    return _of(cluster, purpose)


# --------------------------------------------------------------------------- accounting


def slurmdbd(cluster: str) -> str:
    return _of(cluster, C.COMPONENT_SLURMDBD)


def slurmdbd_host(cluster: str, external: Optional[str] = None) -> str:
    """Where slurmctld and the clients (sacct, sacctmgr) reach slurmdbd: an external one, or the
    cluster's own Service."""
    return external or slurmdbd(cluster)


def database(cluster: str) -> str:
    """The in-cluster MariaDB of slurmdbd."""
    return _of(cluster, C.COMPONENT_DATABASE)


def database_host(cluster: str, external: Optional[str] = None) -> str:
    return external or database(cluster)


def accounting_db_secret(cluster: str, given: Optional[str] = None) -> str:
    """The Secret holding the accounting database user's password."""
    return given or _of(cluster, "accounting-db")


# --------------------------------------------------------------------------- the exporter


def exporter(cluster: str) -> str:
    return _of(cluster, C.COMPONENT_EXPORTER)


def sssd_config(cluster: str) -> str:
    """The ConfigMap of sssd.conf's template (spec.directory): the sidecars add the bind password."""
    return _of(cluster, "sssd")


def backup(cluster: str) -> str:
    """The backup CronJob (spec.backup)."""
    return _of(cluster, C.COMPONENT_BACKUP)


def restore(cluster: str, request: str) -> str:
    """A restore's Job (spec.backup.restore.name REQUEST): '<cluster>-restore-<request>'."""
    return _job_name("%s-%s-%s" % (cluster, C.COMPONENT_RESTORE, request))


def upgrade_backup(cluster: str, rollout: str) -> str:
    """The backup Job run before an upgrade (ROLLOUT: a digest naming the rollout):
    '<cluster>-backup-upgrade-<rollout>'."""
    return _job_name("%s-%s-upgrade-%s" % (cluster, C.COMPONENT_BACKUP, rollout))


def _job_name(whole: str) -> str:
    """WHOLE cut to a Job name's 63 characters (a label value) with a digest of the whole when longer."""
    if len(whole) <= JOB_NAME_MAX:
        return whole
    return "%s-%s" % (whole[:JOB_NAME_MAX - 9].rstrip("-"), hashlib.sha256(whole.encode()).hexdigest()[:8])


def backup_host(cluster: str, namespace: str) -> str:
    """restic's host of the cluster's snapshots: its namespace and name, so that clusters named
    alike in two namespaces keep theirs apart in one repository."""
    return "%s/%s" % (namespace, cluster)


# --------------------------------------------------------------------------- the REST API


def rest(cluster: str) -> str:
    """slurmrestd's Deployment and Service."""
    return _of(cluster, C.COMPONENT_REST)


def jwt_keys_secret(cluster: str) -> str:
    """The REST API's JWT keys: the public key set slurmctld and slurmdbd check tokens with, and
    the private keys tokens are signed with (slurm_token, the operator)."""
    return _of(cluster, "jwt-keys")


# --------------------------------------------------------------------------- the operator


def operator_cluster_wide(namespace: str) -> str:
    """Cluster-wide names carry the namespace: operators installed in two namespaces keep their
    own grants (its ClusterRole, binding and admission policy)."""
    return _of(C.OPERATOR_NAME, namespace)


def bridge_admission(namespace: str) -> str:
    """The bridge's MutatingAdmissionPolicy and binding of the operator installed in NAMESPACE."""
    return _of(C.BRIDGE_SCHEDULER_NAME, namespace)


SPEC_RULES_POLICY = C.MANAGED_BY + "-spec-rules"
"""The ValidatingAdmissionPolicy (and its binding) that installs with the CRDs."""


# --------------------------------------------------------------------------- the jail_volume module


def jail_volume_pv(namespace: str, name: str) -> str:
    """PersistentVolumes are cluster-wide: the name carries the namespace."""
    return _of(namespace, name)


def jail_volume_populate_job(name: str, version_suffix: str) -> str:
    return "%s-populate-%s" % (name, version_suffix)


def jail_volume_repopulate_job(name: str, request_suffix: str) -> str:
    return "%s-repopulate-%s" % (name, request_suffix)
