# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm.conf, cgroup.conf, gres.conf, plugstack.conf, oci.conf, topology.conf and the health-check
settings, and their ConfigMap.

Every file follows one pattern: product defaults, then the user's overrides merged last
(null deletes a key, list values merge into comma-list keys), keys sorted, booleans as
YES/NO, under a "managed by" header. slurm.conf grows with the number of node sets, not
nodes: workers are dynamic nodes (``slurmd -Z``) that carry ``Feature=<nodeset>``, and
partitions name node sets through ``NodeSet=`` lines.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    has_topology,
    nodes_at_most,
    nodeset_object_name,
    nodesets_in_partition,
    on_demand,
    partitions_of,
    slurm_cpus,
    slurm_job_memory_mib,
    slurmdbd_host,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import (
    NodeSet,
    SlurmCluster,
    SubMount,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.common import (
    SUBMOUNT_HOST_DIR,
    Manifest,
    metadata,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.directory import jail_binds
from ansible_collections.slurmkube.core.plugins.module_utils.render.jwt_auth import jwt_auth_settings
from ansible_collections.slurmkube.core.plugins.module_utils.render.power_saving import (
    cloud_node_words,
    cloud_nodes_line,
    power_saving_settings,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.profile import profile_settings

SLURM_CONF = "slurm.conf"
CGROUP_CONF = "cgroup.conf"
GRES_CONF = "gres.conf"
PLUGSTACK_CONF = "plugstack.conf"
OCI_CONF = "oci.conf"
TOPOLOGY_CONF = "topology.conf"
HEALTH_CONF = C.HEALTH_CONFIG_FILE
# topology.conf from a switch label: the leaf of workers on machines without it, and the switch
# above every leaf.
UNLABELLED_SWITCH = "unlabelled"
TOP_SWITCH = "top"
_NUMBERED = re.compile(r"^(.*?)([0-9]+)$")

# Keys whose value is a comma list: a user's list is merged into ours, not put in its place.
LIST_KEYS = frozenset(
    k.lower()
    for k in (
        "SlurmctldParameters", "SchedulerParameters", "SlurmdParameters", "LaunchParameters",
        "CommunicationParameters", "PrologFlags", "DebugFlags", "GresTypes", "PrivateData",
        "TaskPluginParam", "AccountingStorageTRES", "AccountingStorageEnforce",
    )
)

# Partition (or cluster) keys that give a job memory when it asks for none.
MEMORY_DEFAULT_KEYS = frozenset(k.lower() for k in ("DefMemPerCPU", "DefMemPerNode", "DefMemPerGPU"))

# scontrol(1): slurmctld and every slurmd must restart when these change; any other
# slurm.conf change is applied by `scontrol reconfigure`.
RESTART_KEYS = ("AuthType", "SlurmctldHost", "SlurmctldPort", "SlurmdPort", "StateSaveLocation", "PluginDir",
                "AccountingStorageType", "AccountingStorageHost", "AccountingStoragePort")
# With accounting, jobs are ordered by fair share first (usage against the account's shares,
# decayed over a week), then by age and QoS, as most sites run Slurm; spec.slurm.config
# overrides any of them.
FAIR_SHARE = {
    "PriorityType": "priority/multifactor",
    "PriorityWeightFairshare": 10000,
    "PriorityWeightAge": 1000,
    "PriorityWeightQOS": 1000,
    "PriorityWeightPartition": 1000,
    "PriorityDecayHalfLife": "7-0",
}


def header(cluster: SlurmCluster, what: str) -> str:
    """First lines of every file: who writes it, so nobody edits it by hand."""
    return "# %s for Slurm cluster %s/%s.\n# Managed by slurmkube: changes made here are overwritten.\n" % (
        what, cluster.namespace, cluster.name)


class Repeated(tuple):
    """A key written once per value, in order (SlurmctldHost: the primary first)."""


def format_value(value: Any) -> str:
    """A Slurm value as text: YES/NO for booleans, comma lists for lists."""
    if isinstance(value, bool):
        return "YES" if value else "NO"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def merge_settings(defaults: Mapping[str, Any], overrides: Mapping[str, Any]) -> Dict[str, Any]:
    """defaults ⊕ overrides: keys match case-insensitively, null deletes, lists merge."""
    merged: Dict[str, Any] = dict(defaults)
    spelled = {k.lower(): k for k in merged}
    for key, value in overrides.items():
        existing = spelled.get(key.lower())
        if value is None:
            if existing is not None:
                del merged[existing]
            continue
        if existing is not None and key.lower() in LIST_KEYS and isinstance(value, (list, tuple)):
            current = [v for v in format_value(merged[existing]).split(",") if v]
            merged[existing] = current + [str(v) for v in value if str(v) not in current]
            continue
        if existing is not None:
            del merged[existing]
        merged[key] = value
        spelled[key.lower()] = key
    return merged


def key_value_lines(settings: Mapping[str, Any]) -> List[str]:
    """Key=Value lines, sorted by key (case-insensitive) so diffs stay small; a Repeated value
    gives one line per item."""
    lines = []
    for key in sorted(settings, key=str.lower):
        value = settings[key]
        items = value if isinstance(value, Repeated) else (value,)
        lines += ["%s=%s" % (key, format_value(item)) for item in items]
    return lines


def controller_hosts(cluster: SlurmCluster) -> Repeated:
    """SlurmctldHost, one per controller pod: its hostname (how slurmctld finds its own place in
    the list), and its own address, where the controllers reach each other."""
    return Repeated("%s(%s)" % (names.controller_pod(cluster.name, i),
                                names.controller_host_address(cluster.name, cluster.namespace, i))
                    for i in range(cluster.spec.controller.replicas))


def gres_types(nodesets: Sequence[NodeSet]) -> List[str]:
    """Every GRES name any node set offers."""
    names = set()
    for ns in nodesets:
        if ns.spec.resources.gpus:
            names.add("gpu")
        names.update(g.split(":")[0] for g in ns.spec.gres)
    return sorted(names)


def slurm_defaults(cluster: SlurmCluster, nodesets: Sequence[NodeSet]) -> Dict[str, Any]:
    """The slurm.conf settings the product chooses before the user's overrides."""
    spec = cluster.spec
    settings: Dict[str, Any] = {
        "ClusterName": cluster.name,
        "SlurmctldHost": controller_hosts(cluster),
        # Clients (commands, slurmd, slurmrestd) go only here: the Service, which reaches the Ready
        # controller, the one that serves. Without it they would try each SlurmctldHost in turn
        # and wait on a dead primary's address before every request.
        "SlurmctldAddr": names.fully_qualified(names.controller_address(cluster.name, cluster.namespace)),
        "SlurmctldPort": C.SLURMCTLD_PORT,
        "SlurmdPort": C.SLURMD_PORT,
        "AuthType": "auth/munge",
        "CredType": "cred/munge",
        "SlurmUser": "slurm",
        "SlurmdUser": "root",
        "StateSaveLocation": C.SLURMCTLD_STATE_DIR,
        "SlurmdSpoolDir": C.SLURMD_SPOOL_DIR,
        "SlurmctldPidFile": "/run/slurmctld.pid",
        "SlurmdPidFile": "/run/slurmd.pid",
        "PlugStackConfig": "%s/%s" % (C.SLURM_CONFIG_DIR, PLUGSTACK_CONF),
        # Jobs are confined as on bare metal: each in its own cgroup below the pod's (the
        # worker's entrypoint mounts that tree writable; cgroup.conf says what is enforced),
        # tasks bound to their CPUs. proctrack/cgroup also finds every process a job left
        # behind when it ends.
        "ProctrackType": "proctrack/cgroup",
        "TaskPlugin": "task/cgroup,task/affinity",
        # MPI ranks started by srun find each other through slurmstepd's PMI-2 server (MPICH);
        # Debian's Slurm 26.05 builds no PMIx plugin, so Open MPI 5, which speaks only PMIx,
        # starts with mpirun inside the job. Slurm 24.11 still offers `srun --mpi=pmix`.
        "MpiDefault": "pmi2",
        # Jobs' scratch is the pod's own (the jail shows it as /tmp, and at this path too, so
        # what slurmstepd makes there for a step, e.g. PMIx's client directories, is where
        # the ranks look); slurmd reports its size as TmpDisk.
        "TmpFS": C.NODE_TMP_DIR,
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core_Memory",
        "SchedulerType": "sched/backfill",
        # With any Epilog slurmd reports each job's end to slurmctld, which schedules the next
        # jobs at once; without one it answers "already complete" and pending jobs wait for
        # slurmctld's once-a-second pass (batch_sched_delay, 3 s by default). Measured on 3
        # CPUs with trivial jobs: 1.2 jobs/s without, 31 with.
        "Epilog": "/bin/true",
        "ReturnToService": 2,
        "MaxNodeCount": spec.slurm.max_node_count,
        # Nodes are pods that come and go: slurmctld reaches each one directly.
        "TreeWidth": 65533,
        "SrunPortRange": "%d-%d" % C.SRUN_PORT_RANGE,
        "SlurmdTimeout": 120,
        # How long a backup waits for an unresponsive primary before it takes over (it asks every
        # third of it). Slurm's 120 s would leave the cluster without a controller for two
        # minutes; 10 s is safe because a backup also reads the primary's heartbeat file in the
        # shared StateSaveLocation (written every quarter of it) and does not take over while
        # that is still being written: a primary that is only slow to answer keeps control.
        # Without a backup nothing reads it.
        "SlurmctldTimeout": 10,
        # Clients retry a refused connection to slurmctld once a second for MessageTimeout
        # seconds (measured on 24.11). While a controller pod is replaced its Service has no
        # endpoint: the default 10 s barely covers stop, start and readiness on a busy node.
        "MessageTimeout": 30,
        "InactiveLimit": 0,
        # A job sent with --requeue=expedite that loses its node (a pod lost under it: the stop
        # hook sets the node DOWN) is eligible again at once and first in the queue, instead of
        # waiting out its old credential's life (AuthInfo cred_expire, 120 s) behind the queue.
        # Slurm 26.05 (24.11 ignores the word; its sbatch has no such option).
        "SlurmctldParameters": ["enable_expedited_requeue"],
        "KillWait": 30,
        "MinJobAge": 300,
        "MailProg": "/bin/true",
        "SlurmctldDebug": "info",
        "SlurmdDebug": "info",
        # Daemons log to the container's stderr: give those lines times too.
        "LogTimeFormat": "iso8601_ms,format_stderr",
        # sstat reads running steps' usage from their cgroups; slurmdbd stores it when on.
        "JobAcctGatherType": "jobacct_gather/cgroup",
        "JobAcctGatherFrequency": "task=30",
        "AccountingStorageType": "accounting_storage/none",
    }
    types = gres_types(nodesets)
    if types:
        settings["GresTypes"] = types
    if spec.health_checks.enabled:
        settings["HealthCheckProgram"] = C.HEALTHCHECK_PROGRAM
        settings["HealthCheckInterval"] = spec.health_checks.interval
        settings["HealthCheckNodeState"] = spec.health_checks.node_state
    settings.update(jwt_auth_settings(cluster))
    if spec.accounting.enabled:
        settings["AccountingStorageType"] = "accounting_storage/slurmdbd"
        settings["AccountingStorageHost"] = slurmdbd_host(cluster)
        settings["AccountingStoragePort"] = spec.accounting.port
        settings.update(FAIR_SHARE)
    if has_topology(cluster):
        settings["TopologyPlugin"] = "topology/tree"
    settings.update(power_saving_settings(nodesets))
    return merge_settings(settings, profile_settings(cluster))


def nodeset_line(nodeset: NodeSet) -> str:
    """A NodeSet= line: the node set's dynamic nodes register with this feature."""
    return "NodeSet=%s Feature=%s" % (nodeset.name, nodeset.name)


def sets_memory_default(settings: Mapping[str, Any]) -> bool:
    """Whether these settings choose a job's default memory (Slurm takes only one of them)."""
    return any(k.lower() in MEMORY_DEFAULT_KEYS for k in settings)


def default_mem_per_cpu(cluster: SlurmCluster, partition_config: Mapping[str, Any],
                        members: Sequence[NodeSet]) -> Optional[int]:
    """DefMemPerCPU of a partition: the smallest share of memory per CPU among its node sets.

    Without it a job that names no memory is given a whole node's, so two 1-CPU jobs
    cannot share a 2-CPU node. Left out where the user chose any memory default, for the
    partition or the whole cluster.
    """
    if not members or sets_memory_default(partition_config) or sets_memory_default(cluster.spec.slurm.config):
        return None
    return min(slurm_job_memory_mib(ns) // slurm_cpus(ns) for ns in members)


def partition_line(cluster: SlurmCluster, index: int, nodesets: Sequence[NodeSet]) -> str:
    """A PartitionName= line over the node sets it covers."""
    part = partitions_of(cluster)[index]
    settings: Dict[str, Any] = {"State": "UP", "MaxTime": "INFINITE"}
    members = nodesets_in_partition(part, nodesets)
    if members:
        settings["Nodes"] = [ns.name for ns in members]
    mem_per_cpu = default_mem_per_cpu(cluster, part.config, members)
    if mem_per_cpu is not None:
        settings["DefMemPerCPU"] = mem_per_cpu
    if part.default:
        settings["Default"] = True
    settings = merge_settings(settings, part.config)
    return " ".join(["PartitionName=%s" % part.name] + key_value_lines(settings))


def slurm_settings(cluster: SlurmCluster, nodesets: Sequence[NodeSet]) -> Dict[str, Any]:
    """slurm.conf's Key=Value settings: the product's, then the spec's, then its privileged ones."""
    slurm = cluster.spec.slurm
    return merge_settings(merge_settings(slurm_defaults(cluster, nodesets), slurm.config), slurm.privileged_config)


def render_slurm_conf(cluster: SlurmCluster, nodesets: Sequence[NodeSet],
                      settings: Optional[Mapping[str, Any]] = None,
                      node_counts: Optional[Mapping[str, int]] = None,
                      leaving: Optional[Mapping[str, Tuple[int, str]]] = None) -> str:
    """The whole slurm.conf text (of `settings` when the caller merged them already). `node_counts`,
    by node set name, how many CLOUD nodes an on-demand set declares (the operator's plan: a node
    leaves the file only once it is powered down); a set not named gets maxReplicas. `leaving`, by
    base name, the (count, words) of a deleted on-demand set's nodes still declared."""
    settings = slurm_settings(cluster, nodesets) if settings is None else settings
    ordered = sorted(nodesets, key=lambda ns: ns.name)
    lines = [header(cluster, "slurm.conf")]
    lines.extend(key_value_lines(settings))
    cloud = [cloud_nodes_line(nodeset_object_name(ns), (node_counts or {}).get(ns.name, nodes_at_most(ns)),
                              cloud_node_words(ns))
             for ns in ordered if on_demand(ns)]
    cloud += [cloud_nodes_line(base, count, words) for base, (count, words) in sorted((leaving or {}).items())
              if count]
    if cloud:
        lines.append("")
        lines.append("# On-demand node sets: their pods are made when Slurm resumes a node.")
        lines.extend(cloud)
    lines.append("")
    lines.append("# One line per node set; its nodes are pods that register dynamically.")
    lines.extend(nodeset_line(ns) for ns in ordered)
    lines.append("")
    lines.extend(partition_line(cluster, i, ordered) for i in range(len(partitions_of(cluster))))
    return "\n".join(lines) + "\n"


def render_cgroup_conf(cluster: SlurmCluster) -> str:
    """cgroup.conf: what each job is held to, on cgroup v1 and v2 nodes alike.

    autodetect reads /sys/fs/cgroup; the plugins work in CGROUP_MOUNT_DIR, the pod's own
    tree mounted writable by the worker's entrypoint. Pods run no systemd (IgnoreSystemd):
    on v2 slurmd makes its cgroups itself and enables the controllers down to them
    (EnableControllers). A job gets the CPUs and memory it was allocated and no swap
    beyond that memory; the devices it was not given (GPUs) are denied.
    """
    defaults = {
        "CgroupPlugin": "autodetect",
        "CgroupMountpoint": C.CGROUP_MOUNT_DIR,
        "IgnoreSystemd": True,
        "EnableControllers": True,
        "ConstrainCores": True,
        "ConstrainRAMSpace": True,
        "ConstrainSwapSpace": True,
        "AllowedSwapSpace": 0,
        "ConstrainDevices": True,
    }
    settings = merge_settings(defaults, cluster.spec.slurm.cgroup_config)
    return header(cluster, "cgroup.conf") + "\n".join(key_value_lines(settings)) + "\n"


def gres_lines(nodeset: NodeSet, max_nodes: int) -> List[str]:
    """gres.conf lines of one node set's GPUs.

    They cover every node name the set can ever have (MaxNodeCount bounds it), so scaling
    never edits the file and never rolls a pod.
    """
    gpus = nodeset.spec.resources.gpus
    if not gpus:
        return []
    nodes = names.node_range(nodeset_object_name(nodeset), max_nodes)
    files = "/dev/nvidia0" if gpus == 1 else "/dev/nvidia[0-%d]" % (gpus - 1)
    kind = " Type=%s" % nodeset.spec.gpu_type if nodeset.spec.gpu_type else ""
    return ["NodeName=%s Name=gpu%s File=%s" % (nodes, kind, files)]


def render_gres_conf(cluster: SlurmCluster, nodesets: Sequence[NodeSet]) -> str:
    """gres.conf: GPU device files per node set (other GRES are counts from slurmd --conf)."""
    lines = [header(cluster, "gres.conf")]
    for ns in sorted(nodesets, key=lambda n: n.name):
        lines.extend(gres_lines(ns, cluster.spec.slurm.max_node_count))
    return "\n".join(lines) + "\n"


def submount_argument(sub: SubMount) -> str:
    """host-path:jail-path of one sub-mount, as the plugin's submounts= option takes it."""
    return "%s/%s:%s" % (SUBMOUNT_HOST_DIR, sub.name, sub.mount_path)


def render_plugstack_conf(cluster: SlurmCluster) -> str:
    """plugstack.conf: the jail plugin, required, so no job can start outside the jail.

    /etc/hosts and /etc/resolv.conf are the pod's (srun in a job must resolve the
    controller Service), read-only: root in a job must not rewrite the pod's name
    resolution; /tmp is node-local, also seen at its pod path (TmpFS, where
    slurmstepd makes per-step directories); a user's sub-mount at /tmp replaces ours.
    """
    jail = cluster.spec.jail
    submounts = ["%s:/tmp" % C.NODE_TMP_DIR] + [submount_argument(s) for s in jail.sub_mounts]
    args = [
        "jail=%s" % C.JAIL_MOUNT_PATH,
        "binds=%s" % ",".join(["/etc/hosts:ro", "/etc/resolv.conf:ro", C.NODE_TMP_DIR, *jail_binds(cluster)]),
        "mirrors=%s" % (",".join(jail.user_paths) or "none"),
        "submounts=%s" % ",".join(submounts),
    ]
    if jail.setuid_in_jobs:
        args.append("setuid=yes")
    line = " ".join(["required", C.SPANK_PLUGIN_PATH, *args])
    return header(cluster, "plugstack.conf") + line + "\n"


# What a container step's runtime is started with: a bare environment (slurmstepd's own is not
# the job's; ch-run needs USER, and HOME for --home), the job's environment from the file Slurm
# writes (%e), the user's home bound, the job's working directory (%Z), the image (%r).
CONTAINER_RUN = (
    "env -i PATH=/usr/local/bin:/usr/bin:/bin USER=%%u HOME=$(getent passwd %%U | cut -d: -f6) "
    "%s --home --cd=%%Z --set-env=%%e %%r -- %%@" % C.CONTAINER_RUNTIME_PROGRAM
)


def render_oci_conf(cluster: SlurmCluster) -> str:
    """oci.conf: `--container=<image directory>` runs a step in Charliecloud's ch-run.

    The task is in the jail already (the SPANK plugin runs before the runtime), so the runtime,
    the image and the user's files are the jail's; ch-run is unprivileged (a user namespace, no
    setuid, no daemon). The image directory is not read by slurmstepd (it stays on the node,
    outside the jail: IgnoreFileConfigJson); the job's environment reaches ch-run as a file in
    the step's spool directory, which the plugin binds into the jail (no ContainerPath, so the
    directory has the name the plugin looks for). After SchedMD's Charliecloud example
    (containers.html), without its binds of Slurm's files: a container step runs the user's
    program, not Slurm's clients.
    """
    settings = {
        "IgnoreFileConfigJson": True,
        "CreateEnvFile": "newline",
        "EnvExclude": '"^(SLURM_CONF|SLURM_CONF_SERVER)="',
        "RunTimeEnvExclude": '"^(SLURM_CONF|SLURM_CONF_SERVER)="',
        "RunTimeRun": '"%s"' % CONTAINER_RUN,
        "RunTimeKill": '"kill -s SIGTERM %p"',
        "RunTimeDelete": '"kill -s SIGKILL %p"',
    }
    return header(cluster, "oci.conf") + "\n".join(key_value_lines(settings)) + "\n"


def hostlist(names: Iterable[str]) -> str:
    """Slurm's hostlist form of node names: demo-cpu-[0-2,5],demo-big-0 (sorted, ranges folded)."""
    numbered: Dict[str, List[int]] = {}
    plain: List[str] = []
    for name in sorted(set(names)):
        match = _NUMBERED.match(name)
        if match and str(int(match.group(2))) == match.group(2):  # node01 keeps its zero: no range
            numbered.setdefault(match.group(1), []).append(int(match.group(2)))
        else:
            plain.append(name)
    parts = plain + [prefix + _ranges(sorted(numbers)) for prefix, numbers in numbered.items()]
    return ",".join(sorted(parts))


def _ranges(numbers: Sequence[int]) -> str:
    """'7' for one number, '[0-2,5]' for several."""
    if len(numbers) == 1:
        return str(numbers[0])
    spans: List[List[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return "[%s]" % ",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in spans)


def labelled_switches(placement: Mapping[str, str]) -> List[Tuple[str, str]]:
    """topology.conf's switches from each worker's switch label value (node -> value, '' for a
    machine without the label): a leaf per value, one top switch above them all. topology/tree
    needs every node on a switch and one fabric for jobs to span leaves."""
    leaves: Dict[str, List[str]] = {}
    for node, value in placement.items():
        leaves.setdefault(value or UNLABELLED_SWITCH, []).append(node)
    top = TOP_SWITCH
    while top in leaves:  # a label value took the name
        top += "-up"
    switches = [(leaf, "Nodes=" + hostlist(nodes)) for leaf, nodes in sorted(leaves.items())]
    return switches + [(top, "Switches=" + ",".join(sorted(leaves)))] if leaves else []


def render_topology_conf(cluster: SlurmCluster, placement: Mapping[str, str]) -> Optional[str]:
    """topology.conf when the spec gives switches or a switch label, else None. With a label and
    no worker placed yet the file has no switch: topology/tree needs the file to exist, and a
    switch without nodes or children is refused."""
    if cluster.spec.slurm.topology:
        switches = [(sw.name, "Nodes=%s" % sw.nodes if sw.nodes else "Switches=%s" % ",".join(sw.switches))
                    for sw in cluster.spec.slurm.topology]
    elif cluster.spec.slurm.switch_label:
        switches = labelled_switches(placement)
    else:
        return None
    lines = [header(cluster, "topology.conf")] + ["SwitchName=%s %s" % sw for sw in switches]
    return "\n".join(lines) + "\n"


def health_settings(cluster: SlurmCluster) -> Dict[str, Any]:
    """The checks' thresholds under the names nodecheck.Limits reads (SLURMKUBE_HC_<FIELD>)."""
    checks = cluster.spec.health_checks
    long_checks = checks.long_checks
    return {
        "CHECKS": " ".join(checks.checks),
        "SCRATCH_MIN_FREE_MIB": checks.scratch_min_free_mib,
        "SCRATCH_MIN_FREE_PERCENT": checks.scratch_min_free_percent,
        "MEMORY_MAX_STALL_PERCENT": checks.memory_max_stall_percent,
        "CLOCK_MAX_SKEW_SECONDS": checks.clock_max_skew_seconds,
        "GPU_MAX_TEMPERATURE_C": checks.gpu_max_temperature_celsius,
        "GPU_MAX_UNCORRECTABLE_ECC": checks.gpu_max_uncorrectable_ecc_errors,
        "GPU_CRITICAL_XIDS": " ".join(str(x) for x in checks.gpu_critical_xids),
        "MIN_MEMORY_BANDWIDTH_MIB_PER_S": long_checks.min_memory_bandwidth_mib_per_second,
        "MIN_COMPUTE_MIB_PER_S": long_checks.min_compute_mib_per_second,
        "MAX_LATENCY_US": long_checks.max_latency_microseconds,
        "MIN_NCCL_BUS_BANDWIDTH_GB_PER_S": long_checks.min_nccl_bus_bandwidth_gb_per_second,
        "NCCL_PYTHON": long_checks.nccl_python,
    }


def render_health_conf(cluster: SlurmCluster) -> str:
    """Health-check settings as shell assignments: the fast check sources them, nodecheck.py
    parses the same lines."""
    lines = ["%s%s=%s" % (C.HEALTH_CONFIG_PREFIX, key, shlex.quote(str(value)))
             for key, value in sorted(health_settings(cluster).items())]
    return header(cluster, "Health-check settings") + "\n".join(lines) + "\n"


class SlurmConfig(NamedTuple):
    """A cluster's Slurm configuration, merged once: slurm.conf's settings (the product's, the
    spec's, its privileged ones) and every file of the config ConfigMap by name."""

    settings: Dict[str, Any]
    files: Dict[str, str]


def render_slurm_config(cluster: SlurmCluster, nodesets: Sequence[NodeSet],
                        placement: Optional[Mapping[str, str]] = None,
                        node_counts: Optional[Mapping[str, int]] = None,
                        leaving: Optional[Mapping[str, Tuple[int, str]]] = None) -> SlurmConfig:
    """The settings merged once, and the files written from them."""
    settings = slurm_settings(cluster, nodesets)
    return SlurmConfig(settings, render_config_files(cluster, nodesets, placement, settings, node_counts, leaving))


def render_config_files(cluster: SlurmCluster, nodesets: Sequence[NodeSet],
                        placement: Optional[Mapping[str, str]] = None,
                        settings: Optional[Mapping[str, Any]] = None,
                        node_counts: Optional[Mapping[str, int]] = None,
                        leaving: Optional[Mapping[str, Tuple[int, str]]] = None) -> Dict[str, str]:
    """Every Slurm config file by name, and the health-check settings. `placement` is each
    worker's switch label value (see labelled_switches), read by the operator; `node_counts` and
    `leaving` the on-demand sets' planned node counts and a deleted one's nodes (render_slurm_conf)."""
    files = {
        SLURM_CONF: render_slurm_conf(cluster, nodesets, settings, node_counts, leaving),
        CGROUP_CONF: render_cgroup_conf(cluster),
        GRES_CONF: render_gres_conf(cluster, nodesets),
        PLUGSTACK_CONF: render_plugstack_conf(cluster),
        OCI_CONF: render_oci_conf(cluster),
        HEALTH_CONF: render_health_conf(cluster),
    }
    topology = render_topology_conf(cluster, placement or {})
    if topology is not None:
        files[TOPOLOGY_CONF] = topology
    return files


def restart_settings(settings: Mapping[str, Any], keys: Sequence[str] = RESTART_KEYS) -> str:
    """The slurm.conf values whose change needs daemons restarted, as text to hash."""
    spelled = {k.lower(): k for k in settings}
    wanted = [spelled[k.lower()] for k in keys if k.lower() in spelled]
    return "\n".join(key_value_lines({k: settings[k] for k in wanted}))


def controller_config_hash(config: SlurmConfig) -> str:
    """Digest of what slurmctld reads only at start; other changes go by `scontrol reconfigure`."""
    return content_hash([restart_settings(config.settings)])


def worker_config_hash(config: SlurmConfig) -> str:
    """Digest of what slurmd reads only at start; other changes go by `scontrol reconfigure`.
    Not the controllers' list: slurmd reaches slurmctld at SlurmctldAddr, the Service, which stays
    as it is when controllers are added or removed, and reads the list on reconfigure (which
    starts slurmd anew since Slurm 23.11, its jobs kept)."""
    keys = [k for k in RESTART_KEYS if k != "SlurmctldHost"]
    return content_hash([restart_settings(config.settings, keys), config.files[CGROUP_CONF], config.files[GRES_CONF]])


def render_config_map(cluster: SlurmCluster, files: Mapping[str, str]) -> Manifest:
    """The ConfigMap mounted at /etc/slurm in every Slurm pod, holding render_config_files' files."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(cluster, names.slurm_config(cluster.name), C.COMPONENT_CONFIG),
        "data": dict(files),
    }
