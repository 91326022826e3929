# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checks across fields: what no single field's metadata can say."""

from __future__ import annotations

import ipaddress
import re
from typing import Any, List, Mapping, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.directory import Directory
from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import (
    LABEL_KEY,
    LABEL_VALUE,
    MANAGED_CGROUP_KEYS,
    MANAGED_SLURM_KEYS,
    PRIVILEGED_SLURM_KEYS,
    REFUSED_SLURMDBD_KEYS,
    SLURM_KEY,
    SLURM_NAME,
    WORKER_DAEMON_RESERVE_MIB,
    WORKER_MEMORY_MIN_MIB,
    is_normalized_path,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.network import DnsServer
from ansible_collections.slurmkube.core.plugins.module_utils.model.pods import mount_rules, pod_rules
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError, describe, key_path
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import (
    DEFAULT_PARTITION_NAME,
    Accounting,
    Backup,
    Login,
    NodeSet,
    NodeSetSpec,
    Partition,
    Resources,
    SlurmCluster,
    SlurmClusterSpec,
    SubMount,
    Switch,
)
from ansible_collections.slurmkube.core.plugins.module_utils.quantity import parse_quantity


def cluster_rules(name: str, spec: SlurmClusterSpec) -> List[Tuple[str, str]]:
    problems: List[Tuple[str, str]] = []
    longest_suffix = max(len(derived("")) for derived in (names.controller, names.login, names.munge_key_secret))
    if len(name) + longest_suffix > names.STATEFULSET_NAME_MAX:
        problems.append(
            ("metadata.name", "must be at most %d characters so derived object names stay valid, got %s"
             % (names.STATEFULSET_NAME_MAX - longest_suffix, describe(name)))
        )
    jail = spec.jail
    if jail.existing_claim and jail.nfs:
        problems.append(("spec.jail", "set at most one of existingClaim and nfs"))
    problems.extend(_sub_mount_rules(jail.sub_mounts))
    for i, path in enumerate(jail.user_paths):
        if not path.startswith("/") or path == "/":
            problems.append(("spec.jail.userPaths[%d]" % i,
                             "must be an absolute path below /, got %s" % describe(path)))
    problems.extend(_partition_rules(spec.partitions))
    problems.extend(_slurm_config_rules(spec.slurm.config, "spec.slurm.config"))
    problems.extend(_privileged_config_rules(spec.slurm.privileged_config))
    problems.extend(_cgroup_config_rules(spec.slurm.cgroup_config))
    if spec.login.node_port is not None and spec.login.service_type != "NodePort":
        problems.append(("spec.login.nodePort", "is only valid with serviceType NodePort, got serviceType %s"
                         % describe(spec.login.service_type)))
    problems.extend(_login_service_rules(spec.login))
    problems.extend(_topology_rules(spec.slurm.topology))
    if spec.slurm.topology and spec.slurm.switch_label:
        problems.append(("spec.slurm.switchLabel", "set topology or switchLabel, not both"))
    root_dir = spec.worker_seccomp.kubelet_root_dir
    if root_dir == "/" or not is_normalized_path(root_dir):
        problems.append(("spec.workerSeccomp.kubeletRootDir",
                         "must be a normalized directory below /, got %s" % describe(root_dir)))
    problems.extend(_dns_server_rules(spec.egress.dns))
    for i, rule in enumerate(spec.egress.to):
        if not rule or set(rule) - {"to", "ports"}:
            problems.append(("spec.egress.to[%d]" % i, "must be a NetworkPolicy egress rule with 'to' and/or "
                             "'ports', got %s" % describe(rule)))
    problems.extend(_accounting_rules(spec.accounting))
    problems.extend(_backup_rules(spec.backup))
    problems.extend(_restore_rules(spec))
    problems.extend(_peer_rules(spec.exporter.scrape_from, "spec.exporter.scrapeFrom"))
    problems.extend(_peer_rules(spec.rest.allow_from, "spec.rest.allowFrom"))
    problems.extend(_bridge_rules(spec))
    problems.extend(_directory_rules(spec.directory))
    problems.extend(_pod_options_rules(spec))
    for where, res in (("spec.controller.resources", spec.controller.resources),
                       ("spec.rest.resources", spec.rest.resources),
                       ("spec.login.resources", spec.login.resources),
                       ("spec.accounting.resources", spec.accounting.resources),
                       ("spec.accounting.database.resources", spec.accounting.database.resources),
                       ("spec.backup.resources", spec.backup.resources)):
        problems.extend(_positive_resources(where, res))
    return problems


def _pod_options_rules(spec: SlurmClusterSpec) -> List[Tuple[str, str]]:
    """spec.pods and each component's pod; a component's volumeMounts may name spec.pods' volumes."""
    shared = [v.get("name") for v in spec.pods.volumes]
    problems = pod_rules(spec.pods, "spec.pods")
    for where, options in (("spec.controller.pod", spec.controller.pod), ("spec.login.pod", spec.login.pod),
                           ("spec.accounting.pod", spec.accounting.pod), ("spec.exporter.pod", spec.exporter.pod),
                           ("spec.rest.pod", spec.rest.pod), ("spec.backup.pod", spec.backup.pod)):
        problems.extend(pod_rules(options, where, shared))
    return problems


def _bridge_rules(spec: SlurmClusterSpec) -> List[Tuple[str, str]]:
    """The bridge's partition is one the cluster has ('main' when the spec lists none); accounts
    are given to namespaces of the bridge."""
    problems = []
    partition = spec.bridge.partition
    known = [p.name for p in spec.partitions] or [DEFAULT_PARTITION_NAME]
    if partition is not None and partition not in known:
        problems.append(("spec.bridge.partition", "must name a partition of the cluster (%s), got %s"
                         % (", ".join(known), describe(partition))))
    # Not a CEL rule in the CRD (unique_by): over these nested lists the API server estimates its
    # cost far beyond its budget and refuses the CRD (measured: "more than 100x").
    for i, given in enumerate(spec.bridge.accounts):
        if [g.namespace for g in spec.bridge.accounts[:i]].count(given.namespace):
            problems.append(("spec.bridge.accounts[%d].namespace" % i, "is given twice: %s"
                             % describe(given.namespace)))
        elif given.namespace not in spec.bridge.namespaces:
            problems.append(("spec.bridge.accounts[%d].namespace" % i, "must be one of spec.bridge.namespaces, got %s"
                             % describe(given.namespace)))
    return problems


def _directory_rules(directory: Directory) -> List[Tuple[str, str]]:
    """A directory names its servers and where to search; a bind has its password; passwords
    cross the network only over TLS checked against the site's CA."""
    ldap = directory.ldap
    if ldap is None:
        return [("spec.directory.passwordLogin", "is a directory password: set spec.directory.ldap")] \
            if directory.password_login else []
    problems = []
    if not ldap.uris:
        problems.append(("spec.directory.ldap.uris", "name at least one server (ldaps://host or ldap://host)"))
    if not ldap.search_base:
        problems.append(("spec.directory.ldap.searchBase", "is required: where users and groups are searched"))
    if bool(ldap.bind_dn) != bool(ldap.bind_password_secret):
        problems.append(("spec.directory.ldap.bindPasswordSecret", "and bindDn go together (neither: anonymous)"))
    if not ldap.ca_secret and (directory.password_login or ldap.bind_dn):
        problems.append(("spec.directory.ldap.caSecret", "is required with %s: passwords go to the directory over "
                         "TLS only" % ("passwordLogin" if directory.password_login else "bindDn")))
    return problems


def _dns_server_rules(dns: DnsServer) -> List[Tuple[str, str]]:
    """An empty selector would open port 53 to every pod of the namespace."""
    if not dns.pod_labels:
        return [("spec.egress.dns.podLabels", "must select the DNS server pods by at least one label, got {}")]
    problems = []
    for key, value in sorted(dns.pod_labels.items()):
        if not re.match(LABEL_KEY, key) or not re.match(LABEL_VALUE, value or ""):
            problems.append(("spec.egress.dns.podLabels", "must be Kubernetes label keys and values, got %s=%s"
                             % (describe(key), describe(value))))
    return problems


def _login_service_rules(login: Login) -> List[Tuple[str, str]]:
    """Annotation keys as Kubernetes takes them and none of ours; source ranges that are address
    ranges, on a load balancer; a traffic policy where nodes forward."""
    service, problems = login.service, []
    for key in sorted(service.annotations):
        if not re.match(LABEL_KEY, key) or key.split("/")[0] == C.API_GROUP:
            problems.append(("spec.login.service.annotations", "must be Kubernetes annotation keys outside %s/, got %s"
                             % (C.API_GROUP, describe(key))))
    for i, cidr in enumerate(service.load_balancer_source_ranges):
        try:
            ipaddress.ip_network(cidr)
        except ValueError:
            problems.append(("spec.login.service.loadBalancerSourceRanges[%d]" % i,
                             "must be an address range like 203.0.113.0/24 with no host bits set, got %s"
                             % describe(cidr)))
    if service.load_balancer_source_ranges and login.service_type != "LoadBalancer":
        problems.append(("spec.login.service.loadBalancerSourceRanges",
                         "is only valid with serviceType LoadBalancer, got serviceType %s"
                         % describe(login.service_type)))
    if service.external_traffic_policy is not None and login.service_type == "ClusterIP":
        problems.append(("spec.login.service.externalTrafficPolicy",
                         "is only valid with serviceType NodePort or LoadBalancer, got serviceType ClusterIP"))
    return problems


def _accounting_rules(accounting: Accounting) -> List[Tuple[str, str]]:
    problems = []
    database = accounting.database
    if database.host and not database.password_secret:
        problems.append(("spec.accounting.database.passwordSecret",
                         "is required with an external database host: the Secret holding its user's password"))
    if database.tls_ca_secret and not database.host:
        problems.append(("spec.accounting.database.tlsCaSecret",
                         "is for an external database (database.host); the in-cluster one is reached inside "
                         "the cluster's network policy"))
    problems.extend(_file_config_rules(accounting.config, "spec.accounting.config", "slurmdbd.conf",
                                       REFUSED_SLURMDBD_KEYS))
    if accounting.config and accounting.host:
        problems.append(("spec.accounting.config", "configures the slurmdbd slurmkube runs; with accounting.host "
                         "slurmdbd runs elsewhere: set it there"))
    # Checked with accounting off too (its policies are then not rendered): accounting turned off and
    # on again needs no other change.
    problems.extend(_peer_rules(accounting.peers, "spec.accounting.peers"))
    return problems


def _backup_rules(backup: Backup) -> List[Tuple[str, str]]:
    """Where the repository is and how it is read: checked whether or not backups run, so a spec
    turned on later is already right."""
    problems = []
    if backup.claim_name and backup.repository:
        problems.append(("spec.backup", "set claimName or repository, not both"))
    if backup.credentials_secret and not backup.repository:
        problems.append(("spec.backup.credentialsSecret", "is for a remote repository (spec.backup.repository)"))
    if backup.enabled:
        if not backup.claim_name and not backup.repository:
            problems.append(("spec.backup", "enabled: name where the repository is, claimName or repository"))
        if not backup.password_secret:
            problems.append(("spec.backup.passwordSecret", "is required with backups enabled: the Secret holding "
                             "the repository's password under 'password'"))
        if not (backup.jail or backup.controller_state or backup.accounting_database):
            problems.append(("spec.backup", "enabled: back up at least one of jail, controllerState and "
                             "accountingDatabase"))
    return problems


def _restore_rules(spec: SlurmClusterSpec) -> List[Tuple[str, str]]:
    """A restore names what it restores, reads a repository the spec names, and a snapshot's ID
    names one part's snapshot; the database is restored where slurmkube runs slurmdbd."""
    backup, restore = spec.backup, spec.backup.restore
    if not restore.name:
        return []
    problems = []
    if restore.accounting_database and not (spec.accounting.enabled and not spec.accounting.host):
        problems.append(("spec.backup.restore.accountingDatabase", "is for the database of a slurmdbd slurmkube "
                         "runs (spec.accounting enabled, without host)"))
    parts = [part for wanted, part in ((restore.jail, "jail"), (restore.controller_state, "controllerState"),
                                       (restore.accounting_database, "accountingDatabase")) if wanted]
    if not parts:
        problems.append(("spec.backup.restore", "name what is restored: jail, controllerState or "
                         "accountingDatabase"))
    if restore.snapshot != C.RESTORE_LATEST and len(parts) > 1:
        problems.append(("spec.backup.restore.snapshot", "a snapshot's ID names one part's snapshot, got %s "
                         "for %s: restore them one at a time, or use 'latest'" % (restore.snapshot, ", ".join(parts))))
    if not backup.claim_name and not backup.repository:
        problems.append(("spec.backup", "a restore reads the repository: name it, claimName or repository"))
    if not backup.password_secret:
        problems.append(("spec.backup.passwordSecret", "is required for a restore: the Secret holding the "
                         "repository's password under 'password'"))
    for i, path in enumerate(restore.jail_paths):
        if {".", ".."} & set(path.split("/")):
            problems.append(("spec.backup.restore.jailPaths[%d]" % i, "must not name '.' or '..', got %s"
                             % describe(path)))
    return problems


NETWORK_POLICY_PEER_KEYS = frozenset(("namespaceSelector", "podSelector", "ipBlock"))


def _peer_rules(peers: Sequence[Mapping[str, Any]], where: str) -> List[Tuple[str, str]]:
    """NetworkPolicy 'from' peers; an empty one would admit every pod of every namespace."""
    return [("%s[%d]" % (where, i), "must be a NetworkPolicy peer with namespaceSelector, podSelector and/or "
             "ipBlock, got %s" % describe(peer))
            for i, peer in enumerate(peers) if not peer or set(peer) - NETWORK_POLICY_PEER_KEYS]


def _sub_mount_rules(sub_mounts: Sequence[SubMount]) -> List[Tuple[str, str]]:
    problems = []
    seen_paths = set()
    for i, sub in enumerate(sub_mounts):
        where = "spec.jail.subMounts[%d]" % i
        if sub.mount_path.rstrip("/") in seen_paths:
            problems.append((where + ".mountPath", "is used twice: %s" % describe(sub.mount_path)))
        if sub.host_path and (sub.medium or sub.size_limit):
            problems.append((where, "medium and sizeLimit apply to emptyDir only, not with hostPath"))
        seen_paths.add(sub.mount_path.rstrip("/"))
    return problems


def _partition_rules(partitions: Sequence[Partition]) -> List[Tuple[str, str]]:
    problems = []
    for i, part in enumerate(partitions):
        problems.extend(_slurm_config_rules(part.config, "spec.partitions[%d].config" % i, partition=True))
    if sum(1 for p in partitions if p.default) > 1:
        problems.append(("spec.partitions", "at most one partition may be default, got %s"
                         % ", ".join(p.name for p in partitions if p.default)))
    return problems


def _slurm_config_rules(config: Mapping[str, Any], where: str, partition: bool = False) -> List[Tuple[str, str]]:
    problems = []
    for key in config:
        if not re.match(SLURM_KEY, key):
            problems.append((key_path(where, key), "is not a Slurm option name"))
        elif not partition and key.lower() in MANAGED_SLURM_KEYS:
            problems.append((key_path(where, key), "is set by slurmkube and cannot be overridden"))
        elif not partition and key.lower() in PRIVILEGED_SLURM_KEYS:
            problems.append((key_path(where, key), "runs programs or writes files as root: set it in "
                             "spec.slurm.privilegedConfig, which an administrator may allow"))
        elif partition and key.lower() in ("nodes", "partitionname", "default"):
            problems.append((key_path(where, key), "is derived from the partition's fields; set those instead"))
    return problems


def _privileged_config_rules(config: Mapping[str, Any]) -> List[Tuple[str, str]]:
    where = "spec.slurm.privilegedConfig"
    return [(key_path(where, key), "is not a privileged setting; set it in spec.slurm.config")
            for key in config if key.lower() not in PRIVILEGED_SLURM_KEYS]


def _file_config_rules(config: Mapping[str, Any], where: str, file_name: str,
                       refused: Mapping[str, str]) -> List[Tuple[str, str]]:
    """A settings map of one config file: option names only, none of the REFUSED ones (lower-case
    key -> why)."""
    problems = []
    for key in config:
        path = key_path(where, key)
        if not re.match(SLURM_KEY, key):
            problems.append((path, "is not a %s option name" % file_name))
        elif key.lower() in refused:
            problems.append((path, refused[key.lower()]))
    return problems


def _cgroup_config_rules(config: Mapping[str, Any]) -> List[Tuple[str, str]]:
    return _file_config_rules(config, "spec.slurm.cgroupConfig", "cgroup.conf",
                              {key: "is set by slurmkube and cannot be overridden" for key in MANAGED_CGROUP_KEYS})


def _topology_rules(switches: Sequence[Switch]) -> List[Tuple[str, str]]:
    problems = []
    names = {s.name for s in switches}
    for i, sw in enumerate(switches):
        if bool(sw.nodes) == bool(sw.switches):
            problems.append(("spec.slurm.topology[%d]" % i, "set exactly one of nodes and switches"))
        for j, child in enumerate(sw.switches):
            if child not in names:
                problems.append(("spec.slurm.topology[%d].switches" % i, "unknown switch %s" % describe(child)))
            if child in sw.switches[:j]:
                where = "spec.slurm.topology[%d].switches[%d]" % (i, j)
                problems.append((where, "is used twice: %s" % describe(child)))
    return problems


def _positive_resources(where: str, res: Resources) -> List[Tuple[str, str]]:
    problems = []
    if parse_quantity(res.cpu) <= 0:
        problems.append((where + ".cpu", "must be more than 0, got %s" % describe(res.cpu)))
    if res.cpu_request is not None and not 0 < parse_quantity(res.cpu_request) <= parse_quantity(res.cpu):
        problems.append((where + ".cpuRequest", "must be more than 0 and at most cpu (%s), got %s"
                         % (res.cpu, describe(res.cpu_request))))
    if parse_quantity(res.memory) < 64 * 2**20:
        problems.append((where + ".memory", "must be at least 64Mi, got %s" % describe(res.memory)))
    return problems


def nodeset_names_taken() -> List[str]:
    """What follows '<cluster>-' in the names of the cluster's own StatefulSets, Services and
    disruption budgets: the kinds a node set's objects, '<cluster>-<node set>', are too."""
    own = (names.controller, names.controller_hosts, names.login, names.login_hosts, names.slurmdbd,
           names.database, names.exporter, names.rest)
    return sorted(derived("")[1:] for derived in own)


def nodeset_rules(name: str, spec: NodeSetSpec) -> List[Tuple[str, str]]:
    problems = _positive_resources("spec.resources", spec.resources)
    if parse_quantity(spec.resources.memory) < WORKER_MEMORY_MIN_MIB * 2**20:
        problems.append(("spec.resources.memory", "must be at least %dMi: slurmd and munged need %dMi of it, got %s"
                         % (WORKER_MEMORY_MIN_MIB, WORKER_DAEMON_RESERVE_MIB, describe(spec.resources.memory))))
    cpu = parse_quantity(spec.resources.cpu)
    if cpu > 0 and cpu.denominator != 1:
        problems.append(("spec.resources.cpu", "must be a whole number of CPUs (Slurm counts whole CPUs), got %s"
                         % describe(spec.resources.cpu)))
    taken = nodeset_names_taken()
    if name in taken:
        problems.append(("metadata.name", "must not be one of %s: the cluster's own StatefulSets and Services "
                         "are named '<clusterName>-<that>', like a node set's, got %s"
                         % (", ".join(taken), describe(name))))
    statefulset = names.nodeset(spec.cluster_name, name)
    if len(statefulset) > names.STATEFULSET_NAME_MAX:
        problems.append(("metadata.name", "'<clusterName>-<name>' must be at most %d characters, got %s"
                         % (names.STATEFULSET_NAME_MAX, describe(statefulset))))
    if spec.max_replicas is not None and spec.max_replicas < spec.replicas:
        problems.append(("spec.maxReplicas", "must be at least replicas (%d, the nodes kept powered up), got %d"
                         % (spec.replicas, spec.max_replicas)))
    if spec.gpu_type and not spec.resources.gpus:
        problems.append(("spec.gpuType",
                         "needs resources.gpus > 0, got gpuType %s with no GPUs" % describe(spec.gpu_type)))
    for i, feature in enumerate(spec.features):
        if not re.match(SLURM_NAME, feature):
            problems.append(("spec.features[%d]" % i, "must match %s, got %s" % (SLURM_NAME, describe(feature))))
    for i, gres in enumerate(spec.gres):
        if not re.match(r"^[A-Za-z][A-Za-z0-9_]*(:[A-Za-z0-9_.-]+)?:[0-9]+$", gres):
            problems.append(("spec.gres[%d]" % i, "must look like 'name[:type]:count', got %s" % describe(gres)))
        elif gres.split(":")[0] == "gpu":
            problems.append(("spec.gres[%d]" % i, "GPUs come from resources.gpus and gpuType, got %s" % describe(gres)))
    # Its volumeMounts may name the cluster's spec.pods volumes: check_references checks them.
    problems.extend(pod_rules(spec.pod, "spec.pod", None))
    return problems


def check_references(cluster: SlurmCluster, nodesets: Sequence[NodeSet]) -> None:
    """Raise SpecError when the cluster and its node sets do not fit together."""
    problems: List[Tuple[str, str]] = []
    names = {ns.name for ns in nodesets}
    for ns in nodesets:
        if ns.spec.cluster_name != cluster.name or ns.namespace != cluster.namespace:
            problems.append(("NodeSet %s" % ns.name, "belongs to cluster %s/%s, not %s/%s"
                             % (ns.namespace, ns.spec.cluster_name, cluster.namespace, cluster.name)))
    for i, part in enumerate(cluster.spec.partitions):
        for ref in part.node_sets:
            if ref not in names:
                problems.append(("spec.partitions[%d].nodeSets" % i, "unknown node set %s; known: %s"
                                 % (describe(ref), ", ".join(sorted(names)) or "none")))
    shared = [v.get("name") for v in cluster.spec.pods.volumes]
    for ns in nodesets:
        problems.extend(("NodeSet %s: %s" % (ns.name, where), what)
                        for where, what in mount_rules(ns.spec.pod, "spec.pod", shared))
    on_demand = sorted(ns.name for ns in nodesets if ns.spec.max_replicas is not None)
    if cluster.spec.slurm.switch_label and on_demand:
        # A powered-down node has no pod, so no machine whose label would place it in topology.conf.
        problems.append(("spec.slurm.switchLabel", "is not yet supported with on-demand node sets (maxReplicas: %s); "
                         "name the switches in spec.slurm.topology instead" % ", ".join(on_demand)))
    # An on-demand set's CLOUD nodes count whether powered up or not.
    total = sum(ns.spec.replicas if ns.spec.max_replicas is None else ns.spec.max_replicas for ns in nodesets)
    if total > cluster.spec.slurm.max_node_count:
        problems.append(("spec.slurm.maxNodeCount", "is %d but the node sets ask for %d nodes"
                         % (cluster.spec.slurm.max_node_count, total)))
    if problems:
        raise SpecError(problems)
