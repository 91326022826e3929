# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster model: SlurmCluster and NodeSet, their parts and defaults.

This is the single source of truth. The dataclasses below are read by
- ``parse.parse_cluster`` / ``parse.parse_nodeset`` (dict from a CR or a module option → typed
  model; ``rules`` adds the checks across fields),
- ``schema.crd_schema`` (the CRD's OpenAPI schema is generated from the same fields),
- the renderers (``render/*``), which only ever see validated models.
Each field carries its documentation and constraints in its metadata (fields.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from ansible_collections.slurmkube.core.plugins.module_utils.model.backup import (
    CRON_SCHEDULE,
    RESTIC_REPOSITORY,
    BackupRetention,
    Restore,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.bridge import Bridge
from ansible_collections.slurmkube.core.plugins.module_utils.model.directory import Directory
from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    HOST,
    HOSTLIST,
    IMAGE_REF,
    JAIL_PATH,
    LABEL_KEY,
    NODE_PORT_RANGE,
    NORMALIZED_JAIL_PATH,
    NORMALIZED_PATH,
    NORMALIZED_PATH_DOC,
    PROGRAM_PATH,
    RESOURCE_NAME,
    SLURM_NAME,
    FreeForm,
    Quantity,
    SlurmValue,
    spec_field,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.health import HealthChecks
from ansible_collections.slurmkube.core.plugins.module_utils.model.network import Egress, LoginService
from ansible_collections.slurmkube.core.plugins.module_utils.model.pods import PodOptions


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
    backup: str = spec_field("Backup image (spec.backup: restic).", "slurmkube/backup:latest", pattern=IMAGE_REF)
    sssd: str = spec_field("SSSD image (spec.directory).", "slurmkube/sssd:latest", pattern=IMAGE_REF)
    pull_policy: str = spec_field(
        "imagePullPolicy of every pod.", "IfNotPresent", enum=("Always", "IfNotPresent", "Never")
    )


@dataclass(frozen=True)
class Placement:
    """Where pods may run: the same as the component's pod.nodeSelector and pod.tolerations (which
    also take affinity and a priority class), kept for specs written before them."""

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
        "ScheduleAnyway", enum=("ScheduleAnyway", "DoNotSchedule"))


@dataclass(frozen=True)
class Controller:
    """slurmctld: a primary and backups that take over when it fails, sharing one state volume."""

    replicas: int = spec_field("slurmctld pods: 1, or 2-3 for a primary and backups (SlurmctldHost in order) on "
                               "different Kubernetes nodes; a backup takes over about SlurmctldTimeout seconds "
                               "after the primary fails.", 1, minimum=1, maximum=3)
    resources: Resources = spec_field("Resources of the slurmctld pod.", factory=Resources)
    state_volume: VolumeClaim = spec_field("Volume for StateSaveLocation, made ReadWriteMany (every controller "
                                           "mounts it); the jail's class when none is named.", factory=VolumeClaim)
    placement: Placement = spec_field("Where the controller runs.", factory=Placement)
    pod: PodOptions = spec_field("What the site adds to the slurmctld pods (and the upgrade's preflight Job), "
                                 "after spec.pods.", factory=PodOptions)


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
    service: LoginService = spec_field("The login Service's annotations and who may reach it.", factory=LoginService)
    resources: Resources = spec_field("Resources of each login pod.", factory=Resources)
    placement: Placement = spec_field("Where login pods run.", factory=Placement)
    pod: PodOptions = spec_field("What the site adds to the login pods, after spec.pods.", factory=PodOptions)


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


# The one partition of a cluster whose spec lists none: over every node set, the default.
DEFAULT_PARTITION_NAME = "main"


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

    name: str = spec_field("Switch name.", pattern=SLURM_NAME, max_length=64)
    nodes: Optional[str] = spec_field("Slurm hostlist of nodes on this switch (leaf).", None, pattern=HOSTLIST)
    # Each child once: checked by the model's rules, not by the CRD (a CEL rule over 64 children of
    # 256 switches exceeds the API server's cost budget 3.2 times).
    switches: List[str] = spec_field("Child switches (spine).", factory=list, pattern=SLURM_NAME, max_length=64,
                                     max_items=64)


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
        "MaxNodeCount: dynamic nodes the controller accepts. A change is applied with `scontrol reconfigure` "
        "(slurmctld restarts in place, its pod stays); node sets with GPUs, whose gres.conf names every node "
        "up to it, have their workers replaced one at a time, drained first, as for any update.",
        1024,
        minimum=1,
        maximum=65000,
    )
    profile: str = spec_field(
        "What slurm.conf is tuned for. general: Slurm's defaults, job records kept 300 s after they end, "
        "per-step usage gathered (sstat, sacct's MaxRSS). highThroughput: the settings of SchedMD's "
        "high-throughput guide that fit every cluster, for many short jobs: no per-step usage gathered "
        "(JobAcctGatherType=jobacct_gather/none: sstat and sacct's usage fields stay empty), and ended "
        "jobs leave slurmctld's memory after 10 s (MinJobAge; sacct still has them when accounting is "
        "on). With bridge.namespaces set MinJobAge stays 300: the bridge reads its jobs' ends from "
        "slurmctld. spec.slurm.config overrides any of these.",
        "general",
        enum=("general", "highThroughput"),
    )
    topology: List[Switch] = spec_field("topology.conf switches (topology/tree).", factory=list, max_items=256,
                                        unique_by="name")
    switch_label: str = spec_field(
        "A Kubernetes node label whose value names the network switch of the machine. The operator then "
        "writes topology.conf (topology/tree) from where the worker pods run: one leaf switch per value, "
        "named after it; workers on machines without the label under the leaf 'unlabelled'; every leaf "
        "under one top switch 'top'. It follows pods and labels as they change. Set this or topology, "
        "not both. Empty: no topology from labels.",
        "",
        pattern="^$|" + LABEL_KEY,
    )


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
    tls_ca_secret: Optional[str] = spec_field(
        "External host only: a Secret holding, under 'ca.crt', the CA that signed the database's "
        "certificate. slurmdbd then connects over TLS and checks the server's certificate against it "
        "and the host name (StorageParameters SSL_CA), as managed MySQL services require. Unset: the "
        "client library's own choice (Debian's MariaDB Connector/C uses TLS where the server offers it and "
        "trusts the certificate through MariaDB's password-based check, which MySQL servers lack).",
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
    peers: List[FreeForm] = spec_field(
        "The other side of a slurmdbd several clusters share, as NetworkPolicy peers: the clusters' pods where "
        "slurmkube runs it for this cluster, its pods with accounting.host. Each side's policies let slurmctld and "
        "the clients reach slurmdbd, and slurmdbd reach slurmctld (association and QOS changes). The clusters run "
        "with one munge key: name a Secret made before them in spec.munge.secretName.", factory=list)
    resources: Resources = spec_field("Resources of the slurmdbd pod.", factory=Resources)
    database: AccountingDatabase = spec_field("slurmdbd's database.", factory=AccountingDatabase)
    pod: PodOptions = spec_field("What the site adds to the slurmdbd pod and the in-cluster database's, after "
                                 "spec.pods.", factory=PodOptions)
    config: Dict[str, SlurmValue] = spec_field(
        "slurmdbd.conf overrides, merged over the product's (the slurmdbd slurmkube runs; none with host): "
        "job history purged after a time (PurgeJobAfter: 12month, PurgeStepAfter, PurgeEventAfter, ...), "
        "CommitDelay, TrackWCKey, PrivateData, MaxQueryTimeRange, StorageParameters (SSL_CA=/etc/ssl/"
        "certs/ca-certificates.crt: TLS to the database with the image's CA bundle). null deletes a key. "
        "What slurmkube sets (addresses, users, the database, authentication) and keys that run programs "
        "or write files in slurmdbd's pod are refused.",
        factory=dict,
    )


@dataclass(frozen=True)
class Exporter:
    """Prometheus exporter of the cluster's Slurm state: a Deployment of its own (it reports
    slurmctld down while slurmctld's pod is replaced) with a Service whose port is 'metrics'."""

    enabled: bool = spec_field("Run the exporter.", False)
    port: int = spec_field("Metrics port.", 9341, minimum=1, maximum=65535)
    min_interval_seconds: int = spec_field(
        "Slurm is asked at most this often, however many Prometheus servers scrape; between two "
        "asks a scrape gets the last answers.", 15, minimum=1, maximum=3600)
    jail_usage_interval_seconds: int = spec_field(
        "How often the jail's usage is counted, in all and per home (a walk of the jail, as du does).", 300,
        minimum=10, maximum=86400)
    scrape_from: List[FreeForm] = spec_field(
        "Who may scrape: NetworkPolicy 'from' peers ({namespaceSelector: ...}, {podSelector: "
        "...}); any pod in any namespace when empty.", factory=list)
    resources: Resources = spec_field("Resources of the exporter pod.", factory=Resources)
    pod: PodOptions = spec_field("What the site adds to the exporter pod, after spec.pods.", factory=PodOptions)


@dataclass(frozen=True)
class Backup:
    """Scheduled backups with restic: each run takes one snapshot of the jail (users' homes and
    software), one of slurmctld's StateSaveLocation and one dump of the accounting database, into a
    repository the administrator names, encrypted with the password of passwordSecret; snapshots
    beyond the retention are pruned. Each snapshot is tagged with its part (jail, controller-state,
    accounting-database) and its host is '<namespace>/<cluster>'. spec.jail.subMounts are not backed up."""

    enabled: bool = spec_field("Run the backups (a CronJob '<cluster>-backup').", False)
    schedule: str = spec_field("Cron schedule of the CronJob (the Kubernetes controller's time zone, UTC unless "
                               "set otherwise).", "30 2 * * *", pattern=CRON_SCHEDULE)
    claim_name: Optional[str] = spec_field(
        "A PersistentVolumeClaim of the cluster's namespace whose root holds the repository (made on the first "
        "run), root-writable (no root squash on NFS). Put it on other storage than the jail's. Set this or "
        "repository.", None, pattern=DNS1123_SUBDOMAIN)
    repository: Optional[str] = spec_field(
        "A restic repository URL: s3:https://host/bucket/path, rest:https://host/path, b2:, azure:, gs:, swift: "
        "(list its host in spec.egress.to). Set this or claimName.", None, pattern=RESTIC_REPOSITORY,
        max_length=1024)
    credentials_secret: Optional[str] = spec_field(
        "With repository: a Secret whose keys become the backup pod's environment, as restic reads them "
        "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for S3, RESTIC_REST_USERNAME and RESTIC_REST_PASSWORD, "
        "...).", None, pattern=DNS1123_SUBDOMAIN)
    password_secret: Optional[str] = spec_field(
        "A Secret holding the repository's password under 'password' (required). Keep a copy outside the "
        "cluster: without it no snapshot can be read.", None, pattern=DNS1123_SUBDOMAIN)
    jail: bool = spec_field("Back up the jail.", True)
    controller_state: bool = spec_field("Back up slurmctld's StateSaveLocation (the queue, reservations).", True)
    accounting_database: bool = spec_field(
        "Back up the accounting database (mariadb-dump --single-transaction) where slurmkube runs slurmdbd "
        "(accounting enabled without accounting.host).", True)
    retention: BackupRetention = spec_field("Which snapshots are kept.", factory=BackupRetention)
    resources: Resources = spec_field("Resources of the backup pod.", factory=Resources)
    pod: PodOptions = spec_field("What the site adds to the backup pod, after spec.pods.", factory=PodOptions)
    restore: Restore = spec_field("A restore from the repository, once per name (backups need not be enabled: a new "
                                  "cluster of an old one's name and namespace restores its).", factory=Restore)


@dataclass(frozen=True)
class Rest:
    """Slurm's REST API: slurmrestd pods behind a Service, tokens checked by slurmctld and slurmdbd
    against the cluster's RS256 key set (auth/jwt with a JWKS), tokens issued by slurm_token."""

    enabled: bool = spec_field("Run slurmrestd.", False)
    replicas: int = spec_field(
        "slurmrestd pods behind the Service; it keeps no state, so two let one be replaced while the "
        "other answers.", 2, minimum=1, maximum=20)
    allow_from: List[FreeForm] = spec_field(
        "Who may reach the REST API: NetworkPolicy 'from' peers ({namespaceSelector: ...}, "
        "{podSelector: ...}); with networkPolicy and this empty, no pod may (the cluster's own pods, "
        "jobs included, are not let in either).", factory=list)
    token_max_lifetime_seconds: int = spec_field(
        "The longest lifetime slurm_token gives a token.", 86400, minimum=60, maximum=31 * 86400)
    resources: Resources = spec_field("Resources of each slurmrestd pod.", factory=Resources)
    pod: PodOptions = spec_field("What the site adds to the slurmrestd pods, after spec.pods.", factory=PodOptions)


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
    pods: PodOptions = spec_field(
        "What the site adds to every pod of the cluster (its node sets' too): pull secrets of a private "
        "registry, a priority class, scheduling, labels, annotations, environment, volumes. Each component's "
        "and node set's own pod adds to it.", factory=PodOptions)
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
    rest: Rest = spec_field("Slurm's REST API (slurmrestd).", factory=Rest)
    backup: Backup = spec_field("Scheduled backups (restic).", factory=Backup)
    directory: Directory = spec_field("Users and groups from the site's directory (LDAP, through SSSD).",
                                      factory=Directory)
    bridge: Bridge = spec_field("Kubernetes pods scheduled by Slurm (the bridge).", factory=Bridge)
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
    pod: PodOptions = spec_field("What the site adds to the node pods, after the cluster's spec.pods.",
                                 factory=PodOptions)
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
    max_replicas: Optional[int] = spec_field(
        "On demand: up to this many nodes, Slurm CLOUD nodes under its power saving. Slurm resumes the "
        "nodes a pending job needs (sinfo: idle~ until then, alloc# while its pod starts) and the operator "
        "makes their pods; a node idle for suspendTimeSeconds is powered down and its pod deleted. "
        "replicas is then the number kept powered up (SuspendExcNodes). A resume that does not register "
        "within Slurm's ResumeTimeout (300 s unless spec.slurm.config says otherwise) leaves the node DOWN "
        "with a 'slurmkube: resume failed' reason saying why, and its job requeued. Unset: a fixed node set "
        "of replicas nodes. Set or unset only when the node set is made.",
        None,
        minimum=1,
        maximum=10000,
    )
    suspend_time_seconds: int = spec_field(
        "With maxReplicas: Slurm's SuspendTime for these nodes, how long a node stays idle before it is "
        "powered down and its pod deleted.",
        600,
        minimum=1,
    )


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
