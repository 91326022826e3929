# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster model: SlurmCluster and NodeSet, their defaults and their validation.

This is the single source of truth. The dataclasses below are read by
- ``parse_cluster`` / ``parse_nodeset`` (dict from a CR or a module option → typed model),
- ``schema.crd_schema`` (the CRD's OpenAPI schema is generated from the same fields),
- the renderers (``render/*``), which only ever see validated models.
Each field carries its documentation and constraints in its metadata, so a rule is
written once and enforced in both the CRD and the model.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, NewType, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils.quantity import (
    QuantityError,
    parse_quantity,
    quantity_to_mebibytes,
)

# Markers for values whose schema is not a plain Python type.
Quantity = NewType("Quantity", str)
"""A Kubernetes quantity ("4", "500m", "16Gi"); accepted as text or integer."""
FreeForm = NewType("FreeForm", dict)
"""A Kubernetes object passed through untouched (a toleration, say)."""
SlurmValue = NewType("SlurmValue", object)
"""A Slurm setting value: text, integer, boolean (YES/NO), list (comma-joined) or null (delete)."""

DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
SLURM_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
SLURM_KEY = r"^[A-Za-z][A-Za-z0-9]*$"
# Paths the jail plugin takes in plugstack.conf: absolute, no blanks, commas or colons.
JAIL_PATH = r"^/[^\s,:]*$"


def normalized_path_pattern(character: str = "[^/]") -> str:
    """An absolute path below / of parts made of `character`, none empty, '.' or '..' (a
    trailing '/' aside): the path a reader sees is the one the kernel opens. A regular
    expression both Python and the API server (RE2) evaluate, without lookahead."""
    first, rest = character.replace("[^", "[^."), character
    part = "(%s%s*|\\.%s%s*|\\.\\.%s+)" % (first, rest, first, rest, rest)
    return "^(/%s)+/?$" % part


NORMALIZED_PATH = normalized_path_pattern()
NORMALIZED_JAIL_PATH = normalized_path_pattern("[^/\\s,:]")
NORMALIZED_PATH_DOC = "a normalized path below / (not / itself; no empty, '.' or '..' part)"
# An image reference as the container runtimes parse it: [host[:port]/]path[:tag][@digest].
IMAGE_REF = (r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*"
             r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$")
# A DNS name or an IPv4/IPv6 address: what slurm.conf and a volume's server field take.
HOST = (r"^([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*"
        r"|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)$")
# A Slurm hostlist expression (node[0-3,7],other).
HOSTLIST = r"^[A-Za-z0-9_.-]+(\[[0-9,-]+\][A-Za-z0-9_.-]*)*(,[A-Za-z0-9_.-]+(\[[0-9,-]+\][A-Za-z0-9_.-]*)*)*$"
# A program path that also lands in a job script: no character a shell would read.
PROGRAM_PATH = r"^/[A-Za-z0-9._/+-]+$"
# Kubernetes extended resource names (nvidia.com/gpu).
RESOURCE_NAME = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$"
# A Kubernetes label key: an optional DNS-subdomain prefix, then a name of up to 63 characters.
LABEL_KEY = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
LABEL_VALUE = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"
# What ends a value in Slurm's config files (slurm.conf, cgroup.conf, topology.conf): a blank
# starts the next Key=Value, '#' a comment, a newline the next line; quotes change the parse.
SLURM_VALUE_FORBIDDEN = re.compile(r'[\s#"\\\x00-\x1f\x7f]')
# A StatefulSet's pods carry controller-revision-hash=<name>-<10 chars>: a 63-char label.
STATEFULSET_NAME_MAX = 52
NODE_PORT_RANGE = (30000, 32767)
# A worker pod's memory also feeds slurmd and munged: Slurm holds it back from jobs as
# the node's MemSpecLimit (RealMemory is the pod's whole memory).
WORKER_DAEMON_RESERVE_MIB = 256
WORKER_MEMORY_MIN_MIB = 512

# slurm.conf keys the product sets itself; overriding them would break the cluster.
MANAGED_SLURM_KEYS = frozenset(
    key.lower()
    for key in (
        "ClusterName",
        "SlurmctldHost",
        "ControlMachine",
        "SlurmctldPort",
        "SlurmdPort",
        "AuthType",
        "StateSaveLocation",
        "SlurmdSpoolDir",
        "PlugStackConfig",
        "NodeName",
        "NodeSet",
        "PartitionName",
        "MaxNodeCount",
        "GresTypes",
        "HealthCheckProgram",
    )
)
# slurm.conf keys that make a daemon run a program, load code or write a file as root on the
# nodes or the controller: whoever sets them is root there. They go in their own field,
# spec.slurm.privilegedConfig, so an admission policy can forbid exactly that.
PRIVILEGED_SLURM_KEYS = frozenset(
    key.lower()
    for key in (
        "Prolog",
        "Epilog",
        "PrologSlurmctld",
        "EpilogSlurmctld",
        "TaskProlog",
        "TaskEpilog",
        "ResumeProgram",
        "ResumeFailProgram",
        "SuspendProgram",
        "RebootProgram",
        "MailProg",
        "UnkillableStepProgram",
        "SlurmctldPrimaryOnProg",
        "SlurmctldPrimaryOffProg",
        "JobCompLoc",
        "PluginDir",
        "Include",
        "SlurmUser",
        "SlurmdUser",
        "SlurmctldLogFile",
        "SlurmdLogFile",
        "SlurmSchedLogFile",
        "SlurmctldPidFile",
        "SlurmdPidFile",
    )
)
# cgroup.conf keys the product sets itself (the worker makes the writable cgroup copy there).
MANAGED_CGROUP_KEYS = frozenset(("cgroupmountpoint",))
# Characters no text field may hold: each would end a line or a word in some file it reaches.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def is_normalized_path(path: str) -> bool:
    """Absolute, with no empty, '.' or '..' component (a trailing '/' aside): the path a
    reader sees is the one the kernel opens."""
    return path.startswith("/") and all(part not in ("", ".", "..") for part in path.rstrip("/").split("/")[1:])


def spec_field(
    doc: str,
    default: Any = dataclasses.MISSING,
    *,
    factory: Any = dataclasses.MISSING,
    minimum: Optional[int] = None,
    maximum: Optional[int] = None,
    enum: Optional[Sequence[str]] = None,
    pattern: Optional[str] = None,
    pattern_doc: Optional[str] = None,
    max_length: Optional[int] = None,
    max_items: Optional[int] = None,
    unique_by: Optional[str] = None,
    unique: bool = False,
) -> Any:
    """A dataclass field that also carries its documentation and constraints.

    Each constraint is enforced by the parser and written into the CRD (schema.py), so the API
    server refuses what the operator would: pattern (pattern_doc says it in words in the
    parser's message), max_items, unique_by (no two objects of a list with one value of that
    field), unique (no repeated item). The last two are CEL rules in the CRD, not list-maps or
    sets: those would merge a list item by item on server-side apply, and an item someone
    else added would then survive the module's and the operator's applies.
    """
    metadata = {
        "doc": doc,
        "minimum": minimum,
        "maximum": maximum,
        "enum": tuple(enum) if enum else None,
        "pattern": pattern,
        "pattern_doc": pattern_doc,
        "max_length": max_length,
        "max_items": max_items,
        "unique_by": unique_by,
        "unique": unique,
    }
    # pylint: disable=invalid-field-call  # this is the dataclass field factory of the model
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def camel(name: str) -> str:
    """The CRD key of a snake_case attribute (node_selector → nodeSelector)."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


# --------------------------------------------------------------------------- parts


@dataclass(frozen=True)
class Resources:
    """What one pod gets; for workers it is also what Slurm schedules on that node."""

    cpu: Quantity = spec_field(
        "CPU request and limit. Workers need whole CPUs: Slurm counts CPUs in integers.",
        Quantity("1"),
    )
    memory: Quantity = spec_field(
        "Memory request and limit. On workers it is the Slurm node's RealMemory; 5% of it (at least "
        "256Mi) is the node's MemSpecLimit, kept from jobs for slurmd and munged.",
        Quantity("1Gi"),
    )
    cpu_request: Optional[Quantity] = spec_field(
        "CPU the pod requests from Kubernetes when lower than cpu (Burstable QoS, an overcommitted "
        "node); equal to cpu when unset (Guaranteed QoS, what production clusters want).",
        None,
    )
    gpus: int = spec_field("GPUs per pod (workers only); 0 for CPU-only nodes.", 0, minimum=0, maximum=64)
    gpu_resource_name: str = spec_field(
        "Kubernetes extended resource that provides the GPUs.", "nvidia.com/gpu", pattern=RESOURCE_NAME
    )


@dataclass(frozen=True)
class VolumeClaim:
    """A PersistentVolumeClaim the product creates."""

    size: Quantity = spec_field("Requested size.", Quantity("1Gi"))
    storage_class_name: Optional[str] = spec_field(
        "Storage class; the cluster's default when unset.", None
    )


@dataclass(frozen=True)
class Images:
    """Container images, built by images/build.sh (no registry is needed)."""

    controller: str = spec_field("slurmctld image.", "slurmkube/controller:latest", pattern=IMAGE_REF)
    worker: str = spec_field("slurmd image.", "slurmkube/worker:latest", pattern=IMAGE_REF)
    login: str = spec_field("sshd image.", "slurmkube/login:latest", pattern=IMAGE_REF)
    jail: str = spec_field(
        "Root filesystem users see; copied into the jail volume.", "slurmkube/jail:latest", pattern=IMAGE_REF
    )
    slurmdbd: str = spec_field("slurmdbd image (accounting).", "slurmkube/slurmdbd:latest", pattern=IMAGE_REF)
    exporter: str = spec_field("Prometheus exporter image.", "slurmkube/exporter:latest", pattern=IMAGE_REF)
    mariadb: str = spec_field(
        "MariaDB image of the in-cluster accounting database.", "slurmkube/mariadb:latest", pattern=IMAGE_REF
    )
    pull_policy: str = spec_field(
        "imagePullPolicy of every pod.", "IfNotPresent", enum=("Always", "IfNotPresent", "Never")
    )


@dataclass(frozen=True)
class Placement:
    """Where pods may run."""

    node_selector: Dict[str, str] = spec_field("Kubernetes node selector.", factory=dict)
    tolerations: List[FreeForm] = spec_field("Kubernetes tolerations.", factory=list)


@dataclass(frozen=True)
class Spread:
    """How a node set's pods spread over Kubernetes nodes (a topology spread constraint)."""

    topology_key: str = spec_field(
        "Node label whose values the pods spread over: kubernetes.io/hostname gives each Slurm node a "
        "Kubernetes node of its own while there are enough; topology.kubernetes.io/zone spreads them over "
        "zones. Empty: no constraint.",
        "kubernetes.io/hostname",
        pattern="^$|" + RESOURCE_NAME,
    )
    max_skew: int = spec_field("How many more pods one value of the label may have than another.", 1, minimum=1)
    when_unsatisfiable: str = spec_field(
        "ScheduleAnyway: spread when possible, still run every pod when not (one Kubernetes node then runs "
        "several Slurm nodes). DoNotSchedule: a pod that would break the spread stays Pending.",
        "ScheduleAnyway",
        enum=("ScheduleAnyway", "DoNotSchedule"),
    )


@dataclass(frozen=True)
class Controller:
    """slurmctld: one pod, state kept on a persistent volume."""

    resources: Resources = spec_field("Resources of the slurmctld pod.", factory=Resources)
    state_volume: VolumeClaim = spec_field("Volume for StateSaveLocation.", factory=VolumeClaim)
    placement: Placement = spec_field("Where the controller runs.", factory=Placement)


@dataclass(frozen=True)
class Login:
    """sshd pods where users log in; sessions are chrooted into the jail."""

    replicas: int = spec_field("Number of login pods.", 1, minimum=0, maximum=100)
    service_type: str = spec_field(
        "How the login Service is exposed.", "NodePort", enum=("NodePort", "LoadBalancer", "ClusterIP")
    )
    node_port: Optional[int] = spec_field(
        "Fixed node port for ssh (NodePort only); Kubernetes picks one when unset.",
        None,
        minimum=NODE_PORT_RANGE[0],
        maximum=NODE_PORT_RANGE[1],
    )
    resources: Resources = spec_field("Resources of each login pod.", factory=Resources)
    placement: Placement = spec_field("Where login pods run.", factory=Placement)


@dataclass(frozen=True)
class Munge:
    """The munge key shared by every Slurm daemon."""

    secret_name: Optional[str] = spec_field(
        "Secret holding the key under 'munge.key'; '<cluster>-munge-key' when unset.",
        None,
        pattern=DNS1123_LABEL,
    )


@dataclass(frozen=True)
class Nfs:
    """An NFS export that holds the jail."""

    server: str = spec_field("NFS server address.", pattern=HOST)
    path: str = spec_field("Exported path.", pattern=r"^/")


@dataclass(frozen=True)
class SubMount:
    """Node-local storage mounted at a path inside the jail (fast scratch, say)."""

    name: str = spec_field("Volume name.", pattern=DNS1123_LABEL, max_length=40)
    mount_path: str = spec_field("Path inside the jail (no blanks, commas or colons).",
                                 pattern=NORMALIZED_JAIL_PATH, pattern_doc=NORMALIZED_PATH_DOC)
    host_path: Optional[str] = spec_field(
        "Node directory to use; an emptyDir when unset.", None, pattern=NORMALIZED_PATH,
        pattern_doc=NORMALIZED_PATH_DOC,
    )
    medium: str = spec_field("emptyDir medium when host_path is unset.", "", enum=("", "Memory"))
    size_limit: Optional[Quantity] = spec_field("emptyDir size limit.", None)


@dataclass(frozen=True)
class Jail:
    """The shared root filesystem every login session and job sees as '/'."""

    size: Quantity = spec_field("Size of the jail volume.", Quantity("10Gi"))
    storage_class_name: Optional[str] = spec_field(
        "ReadWriteMany storage class for a new claim; the default class when unset.", None
    )
    existing_claim: Optional[str] = spec_field(
        "Use this ReadWriteMany claim instead of creating one.", None, pattern=DNS1123_LABEL
    )
    nfs: Optional[Nfs] = spec_field("Use this NFS export instead of a claim.", None)
    sub_mounts: List[SubMount] = spec_field("Node-local mounts inside the jail.", factory=list, max_items=32,
                                            unique_by="name")
    user_paths: List[str] = spec_field(
        "Jail paths where jobs write output: slurmstepd opens output files and the working "
        "directory before the job enters the jail, so the jail plugin shows it the jail's "
        "copy of these paths (its mirrors= option).",
        factory=lambda: ["/home", "/root"],
        pattern=JAIL_PATH,
    )
    setuid_in_jobs: bool = spec_field(
        "Let setuid and setgid files and file capabilities take effect in jobs (the jail plugin's "
        "setuid=yes), for setuid helpers such as sudo, fusermount or newuidmap. Off: every mount "
        "a job sees is nosuid and its tasks run with no_new_privs, so root in a job cannot become "
        "another uid (munged's, say) or raise a later job of a plain user through a planted file.",
        False,
    )


@dataclass(frozen=True)
class Partition:
    """A Slurm partition over node sets."""

    name: str = spec_field("Partition name.", pattern=SLURM_NAME, max_length=64)
    node_sets: List[str] = spec_field(
        "Node sets in this partition; empty means every node set with catchAll true.", factory=list,
        pattern=DNS1123_LABEL, max_length=63, max_items=64, unique=True,
    )
    default: bool = spec_field("The partition jobs go to when they name none.", False)
    config: Dict[str, SlurmValue] = spec_field(
        "Extra PartitionName options (MaxTime, OverSubscribe, ...). Unless a memory default "
        "(DefMemPerCPU, DefMemPerNode, DefMemPerGPU) is given here or in slurm.config, DefMemPerCPU is "
        "the smallest memory per CPU among the partition's node sets, so small jobs share nodes.",
        factory=dict
    )


@dataclass(frozen=True)
class Switch:
    """One line of topology.conf."""

    name: str = spec_field("Switch name.", pattern=SLURM_NAME)
    nodes: Optional[str] = spec_field("Slurm hostlist of nodes on this switch (leaf).", None, pattern=HOSTLIST)
    switches: List[str] = spec_field("Child switches (spine).", factory=list)


@dataclass(frozen=True)
class Slurm:
    """Slurm settings beyond what the product derives."""

    config: Dict[str, SlurmValue] = spec_field(
        "slurm.conf overrides, merged over the product's; null deletes a key; list values are merged "
        "into comma-list keys. Values are one word: no blanks, '#', quotes or control characters.",
        factory=dict,
    )
    privileged_config: Dict[str, SlurmValue] = spec_field(
        "slurm.conf settings that run programs, load code or write files as root on the nodes or the "
        "controller: Prolog, Epilog, PrologSlurmctld, EpilogSlurmctld, TaskProlog, TaskEpilog, "
        "ResumeProgram, ResumeFailProgram, SuspendProgram, RebootProgram, MailProg, "
        "UnkillableStepProgram, SlurmctldPrimaryOnProg, SlurmctldPrimaryOffProg, JobCompLoc, "
        "PluginDir, Include, SlurmUser, SlurmdUser, and the daemons' log and pid files. Merged last. "
        "WARNING: whoever may set this field is root on every Slurm pod; programs named here run "
        "outside the jail. Keep it to cluster administrators (the admission policy can forbid it).",
        factory=dict,
    )
    cgroup_config: Dict[str, SlurmValue] = spec_field(
        "cgroup.conf overrides, merged over the product's (each job held to its CPUs, its memory "
        "without swap, and its GPUs); null deletes a key.",
        factory=dict,
    )
    max_node_count: int = spec_field(
        "MaxNodeCount: dynamic nodes the controller accepts; changing it restarts slurmctld.",
        1024,
        minimum=1,
        maximum=65000,
    )
    topology: List[Switch] = spec_field("topology.conf switches (topology/tree).", factory=list)
    switch_label: str = spec_field(
        "A Kubernetes node label whose value names the network switch of the machine. The operator then "
        "writes topology.conf (topology/tree) from where the worker pods run: one leaf switch per value, "
        "named after it; workers on machines without the label under the leaf 'unlabelled'; every leaf "
        "under one top switch 'top'. It follows pods and labels as they change. Set this or topology, "
        "not both. Empty: no topology from labels.",
        "",
        pattern="^$|" + LABEL_KEY,
    )


# The fast checks there are (images/common/slurmkube-healthcheck runs them in this order).
FAST_CHECKS = ("munged", "slurmd", "jail", "scratch", "memory", "clock", "gpu")
# Xids that mean the GPU needs a reset or a repair (NVIDIA's Xid catalogue); see nodecheck.py.
CRITICAL_XIDS = (48, 62, 64, 74, 79, 92, 95, 119, 120, 140)


@dataclass(frozen=True)
class LongChecks:
    """Long health checks submitted as Slurm jobs on a schedule: per node, scratch I/O, memory
    bandwidth and compute; node pairs, TCP latency; GPU nodes, NCCL all-reduce bus bandwidth.
    A node that fails is drained with reason 'slurmkube: long check: ...', which only a person
    or a replacement (replaceDrainedNodes) clears."""

    enabled: bool = spec_field("Run the long checks.", False)
    schedule: str = spec_field("Cron schedule of the CronJob.", "0 */6 * * *")
    min_memory_bandwidth_mib_per_second: int = spec_field(
        "Least memory copy bandwidth (MiB/s, one CPU, 128 MiB buffers) a node must reach.",
        1000, minimum=0, maximum=10**7,
    )
    min_compute_mib_per_second: int = spec_field(
        "Least SHA-256 throughput (MiB/s) of one CPU: a slow or throttled core shows here.",
        100, minimum=0, maximum=10**6,
    )
    max_latency_microseconds: int = spec_field(
        "Most one-way TCP latency (microseconds, median of 200 round trips) between two nodes.",
        1000, minimum=1, maximum=10**7,
    )
    min_nccl_bus_bandwidth_gb_per_second: int = spec_field(
        "Least NCCL all-reduce bus bandwidth (GB/s, at the largest message) of a GPU node's GPUs. "
        "Intra-node NVLink gives hundreds; PCIe without peer-to-peer about 4.",
        10, minimum=0, maximum=100000,
    )
    nccl_python: str = spec_field(
        "Python in the jail that has the nvidia-nccl-cu12 and nvidia-cuda-runtime-cu12 wheels "
        "(the GPU check loads NCCL from them; the product images ship no CUDA).",
        "/opt/slurmkube/nccl/bin/python3", pattern=PROGRAM_PATH,
    )


@dataclass(frozen=True)
class HealthChecks:
    """Checks that drain bad nodes (reason prefixed 'slurmkube:') and resume the nodes they
    drained once they pass again; an administrator's drain is never undone."""

    enabled: bool = spec_field("Run fast checks as Slurm's HealthCheckProgram.", True)
    interval: int = spec_field("HealthCheckInterval in seconds.", 60, minimum=10, maximum=86400)
    node_state: str = spec_field(
        "HealthCheckNodeState: which nodes are checked.",
        "ANY",
        enum=("ANY", "IDLE", "ALLOC", "MIXED", "NONDRAINED_IDLE"),
    )
    checks: List[str] = spec_field(
        "Fast checks to run: munged (answers), slurmd (running), jail (readable), scratch (free "
        "space of the node's /tmp), memory (pressure stall), clock (against slurmctld's), gpu "
        "(nvidia-smi: count against the node's gpu GRES, ECC, retirement and row remapping, "
        "temperature, critical Xids; skipped on nodes without GPUs).",
        factory=lambda: list(FAST_CHECKS), enum=FAST_CHECKS,
    )
    scratch_min_free_mib: int = spec_field("Least free space (MiB) on the node's scratch.", 1024, minimum=0)
    scratch_min_free_percent: int = spec_field(
        "Least free space (percent) on the node's scratch.", 5, minimum=0, maximum=100)
    memory_max_stall_percent: int = spec_field(
        "Most share of the last minute in which every task of the node waited for memory "
        "(PSI 'full avg60').", 50, minimum=1, maximum=100,
    )
    clock_max_skew_seconds: int = spec_field(
        "Most difference between the node's clock and slurmctld's (munge rejects credentials "
        "beyond 300 s).", 60, minimum=1, maximum=86400,
    )
    gpu_max_temperature_celsius: int = spec_field("Hottest a GPU may be.", 85, minimum=1, maximum=150)
    gpu_max_uncorrectable_ecc_errors: int = spec_field(
        "Most volatile (since driver load) uncorrectable ECC errors a GPU may have.", 0, minimum=0)
    gpu_critical_xids: List[int] = spec_field(
        "Xid codes in the kernel log that drain a GPU node (application faults such as 13 or 31 "
        "are left out by default).",
        factory=lambda: list(CRITICAL_XIDS), minimum=1, maximum=1000,
    )
    replace_drained_nodes: bool = spec_field(
        "Delete the pod of a node drained by these checks for a hardware reason (GPU, scratch, "
        "clock, a long check) once it is idle; its StatefulSet makes a new one (elsewhere when "
        "its Kubernetes node is cordoned) and the node is resumed when the new pod is ready.",
        False,
    )
    long_checks: LongChecks = spec_field("Scheduled long checks.", factory=LongChecks)


SQL_NAME = r"^[A-Za-z0-9_]+$"


@dataclass(frozen=True)
class AccountingDatabase:
    """slurmdbd's database: an in-cluster MariaDB, or an external MariaDB/MySQL."""

    host: Optional[str] = spec_field(
        "External database host (MariaDB or MySQL; list it in spec.egress.to when it lives outside "
        "the cluster's pods); an in-cluster MariaDB '<cluster>-mariadb' when unset.",
        None,
        pattern=HOST,
    )
    port: int = spec_field("Database port.", 3306, minimum=1, maximum=65535)
    name: str = spec_field("Database name (slurmdbd's StorageLoc).", "slurm_acct_db", pattern=SQL_NAME,
                           max_length=64)
    user: str = spec_field("Database user (slurmdbd's StorageUser).", "slurm", pattern=SQL_NAME, max_length=32)
    password_secret: Optional[str] = spec_field(
        "Secret holding the user's password under the key 'password'; '<cluster>-accounting-db', "
        "generated once, when unset (required with an external host). The in-cluster database "
        "sets its user's password from the Secret at each start: a cluster made again over a "
        "kept database claim works with its new password.",
        None,
        pattern=DNS1123_LABEL,
    )
    storage: VolumeClaim = spec_field(
        "Volume of the in-cluster database; kept when the cluster is deleted, like the jail.",
        factory=VolumeClaim,
    )
    resources: Resources = spec_field("Resources of the in-cluster database pod.", factory=Resources)


@dataclass(frozen=True)
class Accounting:
    """Slurm accounting through slurmdbd: job history (sacct), fair share, QoS and limits."""

    enabled: bool = spec_field(
        "Store accounting in slurmdbd; also turns on priority/multifactor with fair share (the "
        "Priority* keys of spec.slurm.config override its weights).",
        False,
    )
    host: Optional[str] = spec_field(
        "External slurmdbd host: none is deployed then (list it in spec.egress.to when it lives "
        "outside the cluster's pods). A slurmdbd '<cluster>-slurmdbd' in the same namespace, with "
        "its database, when unset.",
        None,
        pattern=HOST,
    )
    port: int = spec_field("slurmdbd port.", 6819, minimum=1, maximum=65535)
    resources: Resources = spec_field("Resources of the slurmdbd pod.", factory=Resources)
    database: AccountingDatabase = spec_field("slurmdbd's database.", factory=AccountingDatabase)


@dataclass(frozen=True)
class Exporter:
    """Prometheus exporter of the cluster's Slurm state: a Deployment of its own (it reports
    slurmctld down while slurmctld's pod is replaced) with a Service whose port is 'metrics'."""

    enabled: bool = spec_field("Run the exporter.", False)
    port: int = spec_field("Metrics port.", 9341, minimum=1, maximum=65535)
    min_interval_seconds: int = spec_field(
        "Slurm is asked at most this often, however many Prometheus servers scrape; between two "
        "asks a scrape gets the last answers.", 15, minimum=1, maximum=3600)
    scrape_from: List[FreeForm] = spec_field(
        "Who may scrape: NetworkPolicy 'from' peers ({namespaceSelector: ...}, {podSelector: "
        "...}); any pod in any namespace when empty.", factory=list)
    resources: Resources = spec_field("Resources of the exporter pod.", factory=Resources)


# Where API servers, kubelets and cloud metadata live: never reached through egress.internet.
PRIVATE_RANGES_V4 = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16",
                     "127.0.0.0/8")
PRIVATE_RANGES_V6 = ("fc00::/7", "fe80::/10", "::1/128")


@dataclass(frozen=True)
class DnsServer:
    """The Kubernetes cluster's DNS server pods: the only resolver the cluster's pods may ask."""

    namespace: str = spec_field("Namespace of the DNS server pods.", "kube-system", pattern=DNS1123_LABEL)
    pod_labels: Dict[str, str] = spec_field(
        "Labels that select the DNS server pods (kubeadm, kind, EKS, GKE and AKS label CoreDNS or "
        "kube-dns k8s-app=kube-dns). A node-local DNS cache on a link-local address is not a pod: "
        "list it in egress.to.",
        factory=lambda: {"k8s-app": "kube-dns"},
    )


@dataclass(frozen=True)
class Egress:
    """Where the cluster's pods (jobs and ssh sessions included) may connect, with networkPolicy:
    each other and the cluster's DNS always; the rest only as listed here."""

    dns: DnsServer = spec_field(
        "The cluster's DNS server: port 53 is open to these pods only, so a job cannot send DNS "
        "queries (a way to carry data out) to any other address.",
        factory=DnsServer,
    )

    internet: bool = spec_field(
        "Allow public addresses: everything outside the private (RFC 1918, fc00::/7), shared "
        "(100.64.0.0/10), link-local and loopback ranges, where API servers, kubelets and cloud "
        "metadata (169.254.169.254) live. A public API server endpoint is a public address: "
        "list it in no rule and keep this false, or block it at the site's firewall.",
        False,
    )
    to: List[FreeForm] = spec_field(
        "More NetworkPolicy egress rules, in Kubernetes' own form ({to: [...], ports: [...]}): an "
        "external slurmdbd or database, license servers, storage.",
        factory=list,
    )


@dataclass(frozen=True)
class WorkerSeccomp:
    """The workers' seccomp filter. The runtime's default profile refuses pivot_root, which the
    jail needs, so workers get slurmkube's own profile or none."""

    profile: str = spec_field(
        "Localhost: slurmkube's profile, which refuses the calls that reach the node's kernel "
        "(modules, keyrings, bpf, io_uring, userfaultfd, open_by_handle_at, the clock; the list "
        "and reasons are in images/README.md), written by each worker pod's init container into "
        "its node's kubelet seccomp directory. Unconfined: no filter, for a runtime that reads "
        "no Localhost profile.",
        "Localhost",
        enum=("Localhost", "Unconfined"),
    )
    kubelet_root_dir: str = spec_field(
        "The kubelet's --root-dir on the workers' nodes: the profile goes to its seccomp/ "
        "directory (/var/snap/microk8s/common/var/lib/kubelet on MicroK8s).",
        "/var/lib/kubelet",
        pattern=PROGRAM_PATH,
    )


@dataclass(frozen=True)
class SlurmClusterSpec:
    """spec of a SlurmCluster."""

    images: Images = spec_field("Container images.", factory=Images)
    controller: Controller = spec_field("The controller (slurmctld).", factory=Controller)
    login: Login = spec_field("Login nodes (sshd).", factory=Login)
    munge: Munge = spec_field("The munge key.", factory=Munge)
    jail: Jail = spec_field("The shared root filesystem.", factory=Jail)
    partitions: List[Partition] = spec_field(
        "Slurm partitions; one default partition 'main' over every node set when empty.",
        factory=list,
        max_items=64,
        unique_by="name",
    )
    slurm: Slurm = spec_field("Slurm settings.", factory=Slurm)
    health_checks: HealthChecks = spec_field("Node health checks.", factory=HealthChecks)
    accounting: Accounting = spec_field("Accounting.", factory=Accounting)
    exporter: Exporter = spec_field("Metrics exporter.", factory=Exporter)
    network_policy: bool = spec_field(
        "Render NetworkPolicies: the cluster's pods admit only each other (and ssh to login) and "
        "connect only to each other, DNS and what egress allows.", True
    )
    egress: Egress = spec_field("Where the pods may connect beyond each other and DNS.", factory=Egress)
    worker_seccomp: WorkerSeccomp = spec_field("The workers' seccomp filter.", factory=WorkerSeccomp)


@dataclass(frozen=True)
class NodeSetSpec:
    """spec of a NodeSet: a group of identical Slurm worker nodes (one pod each)."""

    cluster_name: str = spec_field("The SlurmCluster (same namespace) this node set belongs to.", pattern=DNS1123_LABEL)
    replicas: int = spec_field("Number of nodes.", 1, minimum=0, maximum=10000)
    resources: Resources = spec_field("Resources of each node.", factory=Resources)
    gpu_type: Optional[str] = spec_field("GRES type of the GPUs (h100, a100, ...).", None, pattern=SLURM_NAME)
    features: List[str] = spec_field("Extra Slurm features of the nodes.", factory=list)
    gres: List[str] = spec_field("Extra GRES beyond GPUs, as 'name[:type]:count'.", factory=list)
    placement: Placement = spec_field("Where the node pods run.", factory=Placement)
    spread: Spread = spec_field("How the node pods spread over Kubernetes nodes.", factory=Spread)
    drain_timeout_seconds: int = spec_field(
        "On scale-down, or when its Kubernetes node is being emptied (kubectl drain, an autoscaler), how "
        "long to wait for jobs on a draining node before requeueing them.",
        3600,
        minimum=0,
    )
    lost_node_timeout_seconds: int = spec_field(
        "When the Kubernetes node under a pod stops reporting (NotReady), the pod's Slurm node is set "
        "DOWN at once and Slurm requeues its jobs; after this many seconds the pod, stuck on the lost "
        "node, is deleted by force so that its StatefulSet makes it again on another node. A node only "
        "cut off from the control plane may still run the old pod until it reports again. 0: never.",
        300,
        minimum=0,
    )
    catch_all: bool = spec_field("Join partitions that list no node sets.", True)


@dataclass(frozen=True)
class SlurmCluster:
    """A SlurmCluster object: identity plus validated spec."""

    name: str
    namespace: str
    spec: SlurmClusterSpec


@dataclass(frozen=True)
class NodeSet:
    """A NodeSet object: identity plus validated spec."""

    name: str
    namespace: str
    spec: NodeSetSpec


# --------------------------------------------------------------------------- parsing


class SpecError(ValueError):
    """A spec is invalid; ``problems`` holds every (path, message) found."""

    def __init__(self, problems: Sequence[Tuple[str, str]]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join("%s: %s" % p for p in self.problems))


def describe(value: Any) -> str:
    """How a bad value is quoted in an error message."""
    return repr(value)


def key_path(path: str, key: str) -> str:
    """The path of a mapping's entry: path.key, or path['key'] (quoted, escapes and all) when the
    key holds anything but a plain name, so no message carries a raw newline."""
    return "%s.%s" % (path, key) if re.match(r"^[A-Za-z0-9_.-]+$", key) else "%s[%s]" % (path, describe(key))


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", str(hint))


def optional_inner(hint: Any) -> Optional[Any]:
    """X for Optional[X], else None."""
    args = getattr(hint, "__args__", ())
    if getattr(hint, "__origin__", None) is not None and type(None) in args and len(args) == 2:
        return args[0] if args[1] is type(None) else args[1]
    return None


class _Parser:
    """Turns nested dicts into the frozen dataclasses, collecting every problem."""

    def __init__(self) -> None:
        self.problems: List[Tuple[str, str]] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append((path, message))

    def parse(self, cls: Any, data: Any, path: str) -> Any:
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            self.problem(path, "must be a mapping, got %s" % describe(data))
            return cls()
        hints = model_hints(cls)
        known = {camel(f.name): f for f in dataclasses.fields(cls)}
        for key in data:
            if key not in known:
                self.problem(
                    key_path(path, str(key)),
                    "unknown field; known fields are %s" % ", ".join(sorted(known)),
                )
        values = {}
        for key, fld in known.items():
            sub = "%s.%s" % (path, key)
            if key in data:
                values[fld.name] = self.value(hints[fld.name], data[key], sub, fld.metadata)
            elif fld.default is dataclasses.MISSING and fld.default_factory is dataclasses.MISSING:
                self.problem(sub, "is required")
                values[fld.name] = ""
        try:
            return cls(**values)
        except TypeError as exc:  # only reachable through a problem already recorded
            self.problem(path, str(exc))
            return None

    def value(self, hint: Any, data: Any, path: str, meta: Mapping[str, Any]) -> Any:
        inner = optional_inner(hint)
        if inner is not None:
            return None if data is None else self.value(inner, data, path, meta)
        origin = getattr(hint, "__origin__", None)
        if origin in (list, List):
            return self.list_value(hint.__args__[0], data, path, meta)
        if origin in (dict, Dict):
            return self.dict_value(hint.__args__[1], data, path)
        if dataclasses.is_dataclass(hint):
            return self.parse(hint, data, path)
        return self.scalar(hint, data, path, meta)

    def list_value(self, item: Any, data: Any, path: str, meta: Mapping[str, Any]) -> List[Any]:
        if not isinstance(data, (list, tuple)):
            self.problem(path, "must be a list, got %s" % describe(data))
            return []
        item_meta = meta if not dataclasses.is_dataclass(item) else {}
        values = [self.value(item, v, "%s[%d]" % (path, i), item_meta) for i, v in enumerate(data)]
        if meta.get("max_items") is not None and len(values) > meta["max_items"]:
            self.problem(path, "must have at most %d items, got %d" % (meta["max_items"], len(values)))
        self.check_unique(values, path, meta)
        return values

    def check_unique(self, values: Sequence[Any], path: str, meta: Mapping[str, Any]) -> None:
        """unique_by: no two items with one value of that field; unique: no repeated item."""
        key = meta.get("unique_by")
        if not key and not meta.get("unique"):
            return
        seen = set()
        for i, value in enumerate(values):
            identity = getattr(value, key, None) if key else value
            if identity in seen:
                where = "%s[%d]%s" % (path, i, "." + camel(key) if key else "")
                self.problem(where, "is used twice: %s" % describe(identity))
            seen.add(identity)

    def dict_value(self, item: Any, data: Any, path: str) -> Dict[str, Any]:
        if not isinstance(data, Mapping):
            self.problem(path, "must be a mapping, got %s" % describe(data))
            return {}
        return {str(k): self.value(item, v, key_path(path, str(k)), {}) for k, v in data.items()}

    def scalar(self, hint: Any, data: Any, path: str, meta: Mapping[str, Any]) -> Any:
        if hint is Quantity:
            return self.quantity(data, path)
        if hint is FreeForm:
            if not isinstance(data, Mapping):
                self.problem(path, "must be a mapping, got %s" % describe(data))
            return dict(data) if isinstance(data, Mapping) else {}
        if hint is SlurmValue:
            return self.slurm_value(data, path)
        if hint is bool:
            if not isinstance(data, bool):
                self.problem(path, "must be true or false, got %s" % describe(data))
            return bool(data)
        if hint is int:
            if isinstance(data, bool) or not isinstance(data, int):
                self.problem(path, "must be an integer, got %s" % describe(data))
                return 0
            self.check_range(data, path, meta)
            return data
        if hint is str:
            if not isinstance(data, str):
                self.problem(path, "must be a string, got %s" % describe(data))
                return ""
            self.check_text(data, path, meta)
            return data
        raise TypeError("model field of unsupported type %s at %s" % (_type_name(hint), path))

    def quantity(self, data: Any, path: str) -> Quantity:
        try:
            parse_quantity(data)
        except QuantityError:
            self.problem(path, "must be a Kubernetes quantity such as '4', '500m' or '16Gi', got %s" % describe(data))
            return Quantity("0")
        return Quantity(str(data))

    def slurm_value(self, data: Any, path: str) -> Any:
        if data is None or isinstance(data, (int, bool)):
            return data
        if isinstance(data, str):
            self.check_slurm_word(data, path)
            return data
        if isinstance(data, (list, tuple)) and all(isinstance(v, (str, int)) for v in data):
            for i, item in enumerate(data):
                self.check_slurm_word(str(item), "%s[%d]" % (path, i))
            return [str(v) for v in data]
        self.problem(path, "must be text, a number, true/false, a list or null, got %s" % describe(data))
        return None

    def check_slurm_word(self, data: str, path: str) -> None:
        if SLURM_VALUE_FORBIDDEN.search(data):
            self.problem(path, "must be one word without blanks, '#', quotes, backslashes or control characters "
                         "(Slurm's config files end a value there), got %s" % describe(data))

    def check_range(self, data: int, path: str, meta: Mapping[str, Any]) -> None:
        low, high = meta.get("minimum"), meta.get("maximum")
        if low is not None and data < low:
            self.problem(path, "must be at least %d, got %d" % (low, data))
        if high is not None and data > high:
            self.problem(path, "must be at most %d, got %d" % (high, data))

    def check_text(self, data: str, path: str, meta: Mapping[str, Any]) -> None:
        enum, pattern, max_length = meta.get("enum"), meta.get("pattern"), meta.get("max_length")
        if CONTROL_CHARACTERS.search(data):
            self.problem(path, "must not contain control characters (newline, tab, ...), got %s" % describe(data))
            return
        if enum and data not in enum:
            self.problem(path, "must be one of %s, got %s" % (", ".join(repr(e) for e in enum), describe(data)))
        if pattern and not re.match(pattern, data):
            wanted = "be " + meta["pattern_doc"] if meta.get("pattern_doc") else "match " + pattern
            self.problem(path, "must %s, got %s" % (wanted, describe(data)))
        if max_length is not None and len(data) > max_length:
            self.problem(path, "must be at most %d characters, got %s" % (max_length, describe(data)))


_HINTS_CACHE: Dict[Any, Dict[str, Any]] = {}


def model_hints(cls: Any) -> Dict[str, Any]:
    """Resolved field types of a model dataclass (its annotations are strings)."""
    if cls not in _HINTS_CACHE:
        _HINTS_CACHE[cls] = typing.get_type_hints(cls, globals())
    return _HINTS_CACHE[cls]


def _identity(resource: Mapping[str, Any], problems: List[Tuple[str, str]]) -> Tuple[str, str]:
    meta = resource.get("metadata") or {}
    name = meta.get("name")
    namespace = meta.get("namespace") or "default"
    if not isinstance(name, str) or not re.match(DNS1123_LABEL, name) or len(name) > 63:
        problems.append(("metadata.name", "must be a DNS-1123 label, got %s" % describe(name)))
        name = str(name)
    if not isinstance(namespace, str) or not re.match(DNS1123_LABEL, namespace):
        problems.append(("metadata.namespace", "must be a DNS-1123 label, got %s" % describe(namespace)))
    return name, namespace


def _parse_resource(resource: Mapping[str, Any], spec_cls: Any, rules: Any) -> Tuple[str, str, Any]:
    """(name, namespace, spec) of a valid resource; SpecError with every problem otherwise.

    Cross-field rules run only on a spec whose fields are each valid.
    """
    parser = _Parser()
    name, namespace = _identity(resource, parser.problems)
    spec = parser.parse(spec_cls, resource.get("spec"), "spec")
    if not parser.problems:
        parser.problems.extend(rules(name, spec))
    if parser.problems:
        raise SpecError(parser.problems)
    return name, namespace, spec


def parse_cluster(resource: Mapping[str, Any]) -> SlurmCluster:
    """Validate a SlurmCluster resource ({metadata, spec}) and return its model."""
    return SlurmCluster(*_parse_resource(resource, SlurmClusterSpec, _cluster_rules))


def parse_nodeset(resource: Mapping[str, Any]) -> NodeSet:
    """Validate a NodeSet resource ({metadata, spec}) and return its model."""
    return NodeSet(*_parse_resource(resource, NodeSetSpec, _nodeset_rules))


# --------------------------------------------------------------------------- rules


def _cluster_rules(name: str, spec: SlurmClusterSpec) -> List[Tuple[str, str]]:
    problems: List[Tuple[str, str]] = []
    longest_suffix = max(len("-controller"), len("-login"), len("-munge-key"))
    if len(name) + longest_suffix > STATEFULSET_NAME_MAX:
        problems.append(
            ("metadata.name", "must be at most %d characters so derived object names stay valid, got %s"
             % (STATEFULSET_NAME_MAX - longest_suffix, describe(name)))
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
    for where, res in (("spec.controller.resources", spec.controller.resources),
                       ("spec.login.resources", spec.login.resources),
                       ("spec.accounting.resources", spec.accounting.resources),
                       ("spec.accounting.database.resources", spec.accounting.database.resources)):
        problems.extend(_positive_resources(where, res))
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


def _accounting_rules(accounting: Accounting) -> List[Tuple[str, str]]:
    database = accounting.database
    if database.host and not database.password_secret:
        return [("spec.accounting.database.passwordSecret",
                 "is required with an external database host: the Secret holding its user's password")]
    return []


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


def _cgroup_config_rules(config: Mapping[str, Any]) -> List[Tuple[str, str]]:
    problems = []
    for key in config:
        where = key_path("spec.slurm.cgroupConfig", key)
        if not re.match(SLURM_KEY, key):
            problems.append((where, "is not a cgroup.conf option name"))
        elif key.lower() in MANAGED_CGROUP_KEYS:
            problems.append((where, "is set by slurmkube and cannot be overridden"))
    return problems


def _topology_rules(switches: Sequence[Switch]) -> List[Tuple[str, str]]:
    problems = []
    names = {s.name for s in switches}
    for i, sw in enumerate(switches):
        if bool(sw.nodes) == bool(sw.switches):
            problems.append(("spec.slurm.topology[%d]" % i, "set exactly one of nodes and switches"))
        for child in sw.switches:
            if child not in names:
                problems.append(("spec.slurm.topology[%d].switches" % i, "unknown switch %s" % describe(child)))
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


def _nodeset_rules(name: str, spec: NodeSetSpec) -> List[Tuple[str, str]]:
    problems = _positive_resources("spec.resources", spec.resources)
    if parse_quantity(spec.resources.memory) < WORKER_MEMORY_MIN_MIB * 2**20:
        problems.append(("spec.resources.memory", "must be at least %dMi: slurmd and munged need %dMi of it, got %s"
                         % (WORKER_MEMORY_MIN_MIB, WORKER_DAEMON_RESERVE_MIB, describe(spec.resources.memory))))
    cpu = parse_quantity(spec.resources.cpu)
    if cpu > 0 and cpu.denominator != 1:
        problems.append(("spec.resources.cpu", "must be a whole number of CPUs (Slurm counts whole CPUs), got %s"
                         % describe(spec.resources.cpu)))
    if len(spec.cluster_name) + 1 + len(name) > STATEFULSET_NAME_MAX:
        problems.append(("metadata.name", "'<clusterName>-<name>' must be at most %d characters, got %s"
                         % (STATEFULSET_NAME_MAX, describe(spec.cluster_name + "-" + name))))
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
    total = sum(ns.spec.replicas for ns in nodesets)
    if total > cluster.spec.slurm.max_node_count:
        problems.append(("spec.slurm.maxNodeCount", "is %d but the node sets ask for %d nodes"
                         % (cluster.spec.slurm.max_node_count, total)))
    if problems:
        raise SpecError(problems)


# --------------------------------------------------------------------------- derived names


def accounting_db_secret_name(cluster: SlurmCluster) -> str:
    """Name of the Secret holding the accounting database user's password."""
    return cluster.spec.accounting.database.password_secret or cluster.name + "-accounting-db"


def munge_secret_name(cluster: SlurmCluster) -> str:
    """Name of the Secret holding the munge key."""
    return cluster.spec.munge.secret_name or cluster.name + "-munge-key"


def has_topology(cluster: SlurmCluster) -> bool:
    """The cluster runs topology/tree: switches in the spec, or from a node label."""
    return bool(cluster.spec.slurm.topology or cluster.spec.slurm.switch_label)


def object_name(cluster: SlurmCluster, component: str) -> str:
    """Name of a cluster-wide object of a component (demo-controller, demo-login, ...)."""
    return "%s-%s" % (cluster.name, component)


def nodeset_object_name(nodeset: NodeSet) -> str:
    """Name of a node set's StatefulSet and headless Service; its pods are '<this>-<n>'."""
    return "%s-%s" % (nodeset.spec.cluster_name, nodeset.name)


def slurm_node_names(nodeset: NodeSet) -> List[str]:
    """The Slurm node names of a node set: its pods' names."""
    base = nodeset_object_name(nodeset)
    return ["%s-%d" % (base, i) for i in range(nodeset.spec.replicas)]


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


def partitions_of(cluster: SlurmCluster) -> List[Partition]:
    """The partitions to render: the spec's, or one default 'main' over every node set."""
    return list(cluster.spec.partitions) or [Partition(name="main", default=True)]


def nodesets_in_partition(partition: Partition, nodesets: Sequence[NodeSet]) -> List[NodeSet]:
    """Node sets a partition covers, in name order."""
    if partition.node_sets:
        chosen = [ns for ns in nodesets if ns.name in partition.node_sets]
    else:
        chosen = [ns for ns in nodesets if ns.spec.catch_all]
    return sorted(chosen, key=lambda ns: ns.name)
