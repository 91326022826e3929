# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One place for every name, label, port and path that more than one layer must agree on.

Renderers, the operator, the image entrypoints (through the environment variables named
here) and the tests read these values; nothing else spells them out.
"""

from __future__ import annotations

API_GROUP = "slurmkube.io"
API_VERSION = "v1alpha1"
GROUP_VERSION = API_GROUP + "/" + API_VERSION
# ValidatingAdmissionPolicy and its binding (the spec rules beside the CRDs, the admin's policy).
ADMISSION_API = "admissionregistration.k8s.io/v1"
KIND_CLUSTER = "SlurmCluster"
KIND_NODESET = "NodeSet"
PLURAL_CLUSTER = "slurmclusters"
PLURAL_NODESET = "nodesets"

FIELD_MANAGER = "slurmkube"
MANAGED_BY = "slurmkube"

# Labels and annotations put on every object we render.
LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_PART_OF = "app.kubernetes.io/part-of"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_CLUSTER = API_GROUP + "/cluster"
LABEL_NODESET = API_GROUP + "/nodeset"
# The volumes of the product's pods: a site's pod volumes (spec.pods, a component's pod) take other
# names (tests/unit/plugins/module_utils/render/test_pod_options.py checks this list against every rendered pod).
PRODUCT_VOLUMES = frozenset((
    "slurm-config", "munge-key", "jail", "state", "sshd-config", "ssh-host-keys", "spool", "shm", "node-tmp",
    "seccomp-profiles", "slurmdbd-config", "data", "database-ca", "run-secrets", "jwt-keys", "logs", "munge-etc",
    "munge-lib", "run", "tmp", "repository", "restic-cache", "sssd-pipes", "sssd-state", "sssd-template",
    "directory-ca", "jail-usage",
))
# A worker's volume of a jail sub-mount is this and the sub-mount's name.
SUB_MOUNT_VOLUME_PREFIX = "sub-"
# Kubernetes' own label of a node's name: what "another Kubernetes node" means to a spread.
HOSTNAME_LABEL = "kubernetes.io/hostname"
# The StatefulSet controller's label of the template revision a pod was made from.
REVISION_LABEL = "controller-revision-hash"
# On a worker pod whose Slurm node runs no job: the node set's PodDisruptionBudget covers only
# pods without it, so an eviction (kubectl drain, an autoscaler) takes idle workers at once and
# is refused for busy ones. The operator sets and removes it.
LABEL_EVICTABLE = API_GROUP + "/evictable"
# On slurmctld's pod, "true" while it takes new connections; its Service selects it. The operator
# sets "false" as soon as the pod is being deleted: a terminating pod stays Ready (its readiness
# probe is not reflected then) and kube-proxy would keep sending it connections until it stops.
LABEL_SERVING = API_GROUP + "/serving"
ANNOTATION_CONFIG_HASH = API_GROUP + "/config-hash"
# On an on-demand node set's PodTemplate: how many CLOUD nodes slurm.conf declares for it.
ANNOTATION_NODES = API_GROUP + "/nodes"
# ... what slurm.conf says of each of them (kept for when the set is deleted: they stay declared
# until powered down) ...
ANNOTATION_NODE_WORDS = API_GROUP + "/node-words"
# ... and the revision of its pod template, which its pods carry as REVISION_LABEL.
ANNOTATION_REVISION = API_GROUP + "/revision"
# On a running pod: the digest of the config files, and the fingerprint of the munge key, the
# operator last had its kubelet refresh its volumes for (operator/volume_refresh.py). A change to
# a pod makes its kubelet sync it at once.
ANNOTATION_CONFIG_FILES = API_GROUP + "/config-files"
ANNOTATION_MUNGE_KEY = API_GROUP + "/munge-key"

# The bridge (Kubernetes pods scheduled by Slurm): the scheduler name its pods carry (set at
# admission in the bridge's namespaces), the label with a pod's Slurm job id and the annotation
# with its Slurm node (both set before the pod is bound), and what a pod may ask of its job.
BRIDGE_SCHEDULER_NAME = "slurmkube-bridge"
LABEL_SLURM_JOB = API_GROUP + "/slurm-job"
ANNOTATION_SLURM_NODE = API_GROUP + "/slurm-node"
ANNOTATION_BRIDGE_ACCOUNT = API_GROUP + "/account"
ANNOTATION_BRIDGE_PARTITION = API_GROUP + "/partition"
ANNOTATION_BRIDGE_QOS = API_GROUP + "/qos"
ANNOTATION_BRIDGE_TIME_LIMIT = API_GROUP + "/time-limit"
# scheduler-plugins' PodGroup: the label naming a pod's group, and the group's API.
LABEL_POD_GROUP = "scheduling.x-k8s.io/pod-group"
POD_GROUP_API = "scheduling.x-k8s.io/v1alpha1"
# JobSet's labels on the pods of a replicated job (its controller's, sigs.k8s.io/jobset): the set,
# the replicated job, how many Jobs it has, and the set's restart (pods of an earlier one differ).
LABEL_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
LABEL_JOBSET_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
LABEL_JOBSET_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
LABEL_JOBSET_RESTART = "jobset.sigs.k8s.io/restart-attempt"
# LeaderWorkerSet's (sigs.k8s.io/lws): its name, a group's key (new when the group is made again)
# and index, the group's size (leader and workers), and its API (its startupPolicy is read).
LABEL_LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LABEL_LWS_GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
LABEL_LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
ANNOTATION_LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"
LWS_API = "leaderworkerset.x-k8s.io/v1"
# The extended resource a bridged pod's GPUs are counted in (its limits).
BRIDGE_GPU_RESOURCE = "nvidia.com/gpu"

# Component names (the app.kubernetes.io/component label and object-name suffixes).
COMPONENT_CONTROLLER = "controller"
COMPONENT_WORKER = "worker"
COMPONENT_LOGIN = "login"
COMPONENT_JAIL = "jail"
COMPONENT_HEALTHCHECK = "healthcheck"
COMPONENT_CONFIG = "config"
COMPONENT_SLURMDBD = "slurmdbd"
COMPONENT_DATABASE = "mariadb"
COMPONENT_EXPORTER = "exporter"
COMPONENT_OPERATOR = "operator"  # the operator's pods (what scrape configs and alerts select)
COMPONENT_PREFLIGHT = "preflight"  # a new Slurm image tried on the new configuration before an upgrade
COMPONENT_REST = "rest"  # slurmrestd (spec.rest)
COMPONENT_BACKUP = "backup"  # the scheduled backup (spec.backup)
COMPONENT_RESTORE = "restore"  # a restore from the backups (spec.backup.restore)
COMPONENT_DIRECTORY = "directory"  # sssd.conf's template (spec.directory)

# The container of each component's pods that runs its daemon (and munged): what the exec API
# is pointed at.
CONTAINER_CONTROLLER = "slurmctld"
CONTAINER_WORKER = "slurmd"
CONTAINER_LOGIN = "sshd"
CONTAINER_SLURMDBD = "slurmdbd"
CONTAINER_EXPORTER = "exporter"
CONTAINER_REST = "slurmrestd"
# Every long-running container with a munged, by its pod's component: the one list a munge key
# rotation restarts munged from, and whose reports alone say which key the cluster runs with.
# (Jobs' pods, the long health checks', start with the Secret's key and end.)
MUNGE_DAEMON_CONTAINERS = {
    COMPONENT_CONTROLLER: CONTAINER_CONTROLLER,
    COMPONENT_WORKER: CONTAINER_WORKER,
    COMPONENT_LOGIN: CONTAINER_LOGIN,
    COMPONENT_SLURMDBD: CONTAINER_SLURMDBD,
    COMPONENT_EXPORTER: CONTAINER_EXPORTER,
}

# SlurmCluster and NodeSet status phases.
PHASE_INVALID = "Invalid"
PHASE_PENDING = "Pending"
PHASE_PROVISIONING = "Provisioning"
PHASE_READY = "Ready"
# The SlurmCluster's condition that its pods could pull their images (the operator writes it, the
# slurm_cluster module fails on it at once).
CONDITION_IMAGES_PULLED = "ImagesPulled"

# Ports.
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SSH_PORT = 22
SRUN_PORT_RANGE = (60001, 63000)

# Paths inside the images (the images' entrypoints read them from the SLURMKUBE_* env).
SLURM_CONFIG_DIR = "/etc/slurm"
SLURMCTLD_STATE_DIR = "/var/spool/slurmctld"
SLURMD_SPOOL_DIR = "/var/spool/slurmd"
MUNGE_SOCKET_DIR = "/run/munge"
MUNGE_KEY_MOUNT_DIR = "/etc/slurmkube/munge"
MUNGE_KEY_SECRET_KEY = "munge.key"
SSH_HOST_KEYS_MOUNT_DIR = "/etc/slurmkube/ssh-host-keys"
# Where a login pod keeps host keys it generated itself (no Secret mounted).
SSH_HOST_KEYS_STATE_DIR = "/var/lib/slurmkube/ssh-host-keys"
SSHD_CONFIG_MOUNT_DIR = "/etc/slurmkube/sshd"
SSHD_CONFIG_FILE = "sshd_config"
JAIL_MOUNT_PATH = "/mnt/jail"
JAIL_MARKER_FILE = ".slurmkube-jail"
# A worker pod's own scratch (an emptyDir), shown to jobs as their /tmp; the entrypoint makes it 1777.
NODE_TMP_DIR = "/mnt/slurmkube/tmp"
# Where a worker's entrypoint mounts the pod's own cgroup tree writable for slurmd
# (cgroup.conf CgroupMountpoint). /sys/fs/cgroup stays read-only, and it is /sys that jobs
# see in the jail: a job cannot rewrite its own limits.
CGROUP_MOUNT_DIR = "/run/slurmkube/cgroup"
SPANK_PLUGIN_PATH = "/usr/lib/slurmkube/spank_jail.so"
# Runs the jail's own tools (useradd, ...) as a root job's task runs: never as the pod's root.
JAIL_RUN_PROGRAM = "/usr/lib/slurmkube/slurmkube-jail-run"
# Ends a bridge job with its pods' exit code (slurm_complete_job): no Slurm command does.
COMPLETE_JOB_PROGRAM = "/usr/lib/slurmkube/slurmkube-complete-job"
HEALTHCHECK_PROGRAM = "/usr/local/sbin/slurmkube-healthcheck"
# slurmctld's and slurmd's readiness probe: Slurm's own GET /readyz on the daemon's port.
READY_PROGRAM = "/usr/local/sbin/slurmkube-ready"
# Charliecloud's unprivileged runtime in the jail (Debian's charliecloud-runtime): oci.conf runs a
# step started with srun --container=<image directory> in it.
CONTAINER_RUNTIME_PROGRAM = "/usr/bin/ch-run"
WORKER_STOP_PROGRAM = "/usr/local/sbin/slurmkube-worker-stop"  # the worker's preStop hook
CONTROLLER_STOP_PROGRAM = "/usr/local/sbin/slurmkube-controller-stop"  # slurmctld's preStop hook
LONG_CHECK_PROGRAM = "/usr/local/sbin/slurmkube-long-check"
JAIL_POPULATE_PROGRAM = "/usr/local/sbin/slurmkube-jail-populate"
# Every image starts this: it runs the entrypoint of SLURMKUBE_ROLE, ROLE_ENTRYPOINTS_DIR/<role>, on
# the shell library in SHELL_LIBRARY_DIR (images/common/lib: only what the image's roles use).
ENTRYPOINT_PROGRAM = "/usr/local/sbin/slurmkube-entrypoint"
ROLE_ENTRYPOINTS_DIR = "/usr/local/lib/slurmkube/roles"
SHELL_LIBRARY_DIR = "/usr/local/lib/slurmkube/lib"
# Written by a worker's entrypoint: the node's name and jail, for what slurmd and the kubelet run
# with a bare environment (the health check, the stop hook).
NODE_ENV_FILE = "/run/slurmkube/node.env"
# Key rotation in place (the operator execs it): `status` prints the key munged runs with and
# the one mounted from the Secret; `switch <fingerprint>` restarts munged with the mounted key.
MUNGE_KEY_PROGRAM = "/usr/local/sbin/slurmkube-munge-key"
# Written by the entrypoint: its pid (SIGHUP restarts munged with the mounted key) and the
# fingerprint of the key munged runs with.
ENTRYPOINT_PID_FILE = "/run/slurmkube/entrypoint.pid"
MUNGE_RUNNING_KEY_FILE = "/run/slurmkube/munge-key.sha256"

# Environment variables the renderers set and the image entrypoints read.
ENV_ROLE = "SLURMKUBE_ROLE"  # controller | worker | login | jail-populate
ENV_CLUSTER = "SLURMKUBE_CLUSTER"
ENV_NODESET = "SLURMKUBE_NODESET"
ENV_NODE_NAME = "SLURMKUBE_NODE_NAME"  # the pod name, which is the Slurm node name
ENV_CONTROLLER_HOST = "SLURMKUBE_CONTROLLER_HOST"  # the controller Service FQDN
ENV_CPUS = "SLURMKUBE_CPUS"
ENV_MEMORY_MB = "SLURMKUBE_MEMORY_MB"
ENV_NODE_CONF = "SLURMKUBE_NODE_CONF"  # extra slurmd -Z --conf words (Feature, Gres)
ENV_CLOUD_NODE = "SLURMKUBE_CLOUD_NODE"  # "1": slurm.conf declares the node (CLOUD): slurmd -b, no -Z
ENV_JAIL_PATH = "SLURMKUBE_JAIL_PATH"
ENV_JAIL_VERSION = "SLURMKUBE_JAIL_VERSION"

ROLE_CONTROLLER = "controller"
ROLE_WORKER = "worker"
ROLE_LOGIN = "login"
ROLE_JAIL_POPULATE = "jail-populate"
ROLE_LONG_CHECKS = "long-checks"  # submit the long health checks as Slurm jobs (CronJob)
ROLE_SLURMDBD = "slurmdbd"
ROLE_DATABASE = "database"  # the in-cluster MariaDB of slurmdbd
ROLE_EXPORTER = "exporter"  # the Prometheus exporter (issue 17)
ROLE_PREFLIGHT = "preflight"  # the controller image's check of itself before an upgrade
ENV_EXPORTER_PORT = "SLURMKUBE_EXPORTER_PORT"
ROLE_REST = "rest"  # slurmrestd, unprivileged (issue 35)
ENV_REST_PORT = "SLURMKUBE_REST_PORT"
ENV_EXPORTER_MIN_INTERVAL = "SLURMKUBE_EXPORTER_MIN_INTERVAL"
EXPORTER_PROGRAM = "/opt/slurmkube/slurmkube_exporter.py"  # in the exporter image
EXPORTER_USER = "nobody"  # the exporter reads Slurm; it needs no privilege
# The jail's usage as du counts it (issue 38: a class that does not enforce a claim's size): a
# container beside the exporter walks the jail and leaves JSON in a directory the exporter reads.
CONTAINER_JAIL_USAGE = "jail-usage"
JAIL_USAGE_PROGRAM = "/opt/slurmkube/slurmkube_jail_usage.py"  # in the exporter image
JAIL_USAGE_DIR = "/run/slurmkube/jail-usage"
JAIL_USAGE_FILE = "usage.json"
ENV_JAIL_USAGE_INTERVAL = "SLURMKUBE_JAIL_USAGE_INTERVAL"
ENV_JAIL_CLAIM_BYTES = "SLURMKUBE_JAIL_CLAIM_BYTES"  # the size the cluster's jail claim asks for

# Accounting (issue 16): slurmdbd and its database.
SLURMDBD_PORT = 6819
DATABASE_PORT = 3306
SLURMDBD_CONFIG_FILE = "slurmdbd.conf"  # in the config ConfigMap, without the password
SLURMDBD_RUN_DIR = "/run/slurmdbd"  # slurmdbd.conf with the password (0600), where slurmdbd reads it
DATABASE_DATA_DIR = "/var/lib/mysql"
DATABASE_RUN_DIR = "/run/mysqld"  # MariaDB's socket and the init file with the password
DB_PASSWORD_SECRET_KEY = "password"
ENV_DB_PASSWORD = "SLURMKUBE_DB_PASSWORD"
ENV_DB_HOST = "SLURMKUBE_DB_HOST"
ENV_DB_PORT = "SLURMKUBE_DB_PORT"
ENV_DB_NAME = "SLURMKUBE_DB_NAME"
ENV_DB_USER = "SLURMKUBE_DB_USER"
ENV_DB_BUFFER_POOL = "SLURMKUBE_DB_BUFFER_POOL"
# The database role serves TLS only when this names a directory holding tls.crt and tls.key (a
# kubernetes.io/tls Secret's keys), and then refuses clients without it.
ENV_DB_TLS_DIR = "SLURMKUBE_DB_TLS_DIR"
# The CA that signed an external database's certificate, from spec.accounting.database.tlsCaSecret,
# where slurmdbd reads it (StorageParameters SSL_CA).
DB_CA_SECRET_KEY = "ca.crt"
SLURMDBD_DATABASE_CA_DIR = "/etc/slurmkube/database-ca"

# Backups (spec.backup, issue 38): restic, in the backup image's role, one snapshot per part tagged
# with the part's name. The role gives restic its repository and password (RESTIC_REPOSITORY,
# RESTIC_PASSWORD) from the SLURMKUBE_ variables a site's spec.backup.pod.env cannot name; a remote
# repository's credentials come as restic reads them (spec.backup.credentialsSecret).
ROLE_BACKUP = "backup"
ENV_BACKUP_REPOSITORY = "SLURMKUBE_BACKUP_REPOSITORY"
ENV_BACKUP_PASSWORD = "SLURMKUBE_BACKUP_PASSWORD"
BACKUP_PART_JAIL = "jail"
BACKUP_PART_CONTROLLER_STATE = "controller-state"
BACKUP_PART_DATABASE = "accounting-database"
ENV_BACKUP_PARTS = "SLURMKUBE_BACKUP_PARTS"  # the parts this pod backs up, space-separated
ENV_BACKUP_HOST = "SLURMKUBE_BACKUP_HOST"  # restic's --host of every snapshot: <namespace>/<cluster>
ENV_BACKUP_KEEP = "SLURMKUBE_BACKUP_KEEP"  # restic forget's --keep-* options, space-separated
ENV_DB_CA_FILE = "SLURMKUBE_DB_CA_FILE"  # an external database's CA: the dump checks the server with it
# Where the backup pod mounts what it reads (read-only) and a claim holding the repository.
BACKUP_JAIL_DIR = "/backup/jail"
BACKUP_STATE_DIR = "/backup/controller-state"
BACKUP_REPOSITORY_DIR = "/backup/repository"
BACKUP_CACHE_DIR = "/var/cache/restic"
BACKUP_PASSWORD_SECRET_KEY = "password"
# A restore (spec.backup.restore): the same image, its own role, the parts' claims writable.
ROLE_RESTORE = "restore"
ENV_RESTORE_PARTS = "SLURMKUBE_RESTORE_PARTS"  # the parts restored, space-separated
ENV_RESTORE_SNAPSHOT = "SLURMKUBE_RESTORE_SNAPSHOT"  # "latest" (each part's newest) or a snapshot's ID
ENV_RESTORE_JAIL_PATHS = "SLURMKUBE_RESTORE_JAIL_PATHS"  # paths in the jail, a line each ("/": all of it)
ENV_RESTORE_EXACT = "SLURMKUBE_RESTORE_EXACT"  # "true": the jail paths lose what the snapshot lacks
RESTORE_LATEST = "latest"

# Slurm's drain reasons set by slurmkube start with this, so admins' drains are told apart
# (slurm/drain.py owns their forms; the bash health checks read these through constants.sh).
DRAIN_REASON_PREFIX = "slurmkube:"
# The operator's planned drains: "<prefix> <purpose> since <UTC time>" (scale-down, update,
# replace, kubernetes eviction). One POSIX extended regex that Python's re and bash's =~ both
# read the same way; group 1 is the purpose, group 2 the time. The health checks never resume
# such a drain.
DRAIN_REASON_PLANNED_RE = "^" + DRAIN_REASON_PREFIX + \
    " ?([a-z][a-z -]*) since ([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z)$"

# The operator: its name (Deployment, ServiceAccount, leader Lease) and what its pods are told.
OPERATOR_NAME = "slurmkube-operator"
OPERATOR_METRICS_PORT = 9342  # the operator's Prometheus metrics (its Service's port "metrics")
ENV_OPERATOR_NAMESPACE = "SLURMKUBE_OPERATOR_NAMESPACE"  # where its leader Lease lives
ENV_OPERATOR_IDENTITY = "SLURMKUBE_OPERATOR_IDENTITY"  # the pod name: who holds the Lease
ENV_WATCH_NAMESPACES = "SLURMKUBE_WATCH_NAMESPACES"  # comma-separated; empty: every namespace

# Health checks (issue 7). The rendered settings sit beside slurm.conf in the config ConfigMap;
# the fast check (bash) sources them and the node-check program (nodecheck.py, copied into the
# worker and jail images) reads the same file.
HEALTH_CONFIG_FILE = "slurmkube-health.conf"
HEALTH_CONFIG_PREFIX = "SLURMKUBE_HC_"
NODECHECK_PROGRAM = "/usr/local/lib/slurmkube/nodecheck.py"
NCCL_CHECK_PROGRAM = "/usr/local/lib/slurmkube/nccl_check.py"  # jail image only
LONG_CHECKS_SUBMIT_PROGRAM = "/usr/local/sbin/slurmkube-long-checks-submit"
# Where long checks leave their output and per-node result lines, inside the jail.
LONG_CHECK_RESULTS_DIR = "/var/log/slurmkube/long-checks"
# Where each node's fast check leaves every check's last verdict, inside the jail (the
# exporter reads them): "time <epoch>" then "<check> pass|fail" lines, one file per node.
HEALTH_RESULTS_DIR = "/var/log/slurmkube/health"
# The operator's reason for a worker whose Kubernetes node stopped reporting: "<prefix> kubernetes
# node <name> lost" (the node is DOWN; its next registration returns it to service).
REASON_NODE_LOST = "kubernetes node"
# A worker's stop hook (slurmkube-worker-stop) hands running jobs back: "<prefix> pod stopping
# under jobs: <ids>", DOWN+DRAIN; the next container of the pod lifts that drain.
REASON_POD_STOPPING = "pod stopping under jobs"
# The long check's part of a drain reason: the fast check never resumes these.
DRAIN_REASON_LONG_CHECK = "long check:"

# The REST API (issue 35): slurmrestd passes each request's token on; slurmctld and slurmdbd check
# it against the public keys of the cluster's JWT key Secret (auth/jwt's JWKS, RS256 only), never
# named slurm.jwks: that name in /etc/slurm is auth/slurm's own key file.
SLURMRESTD_PORT = 6820
# slurmrestd refuses root, SlurmUser and Slurm's nobody (99); Debian's nobody/nogroup are 65534.
SLURMRESTD_UID = 65534
JWT_KEYS_MOUNT_DIR = "/etc/slurmkube/jwt"
JWKS_SECRET_KEY = "jwks.json"  # the public keys (kid, n, e): mounted into slurmctld and slurmdbd
JWT_SIGNING_SECRET_KEY = "signing.json"  # the private keys and which one signs: never mounted

# Directory users (spec.directory, issue 38): SSSD runs beside the containers that look users up
# (login, controller, workers, slurmdbd); they share its sockets, which the login's sessions and the
# jobs see in the jail too. The sidecar writes sssd.conf from the rendered template and the bind
# password.
ROLE_SSSD = "sssd"
CONTAINER_SSSD = "sssd"
SSSD_PIPES_DIR = "/var/lib/sss/pipes"
SSSD_TEMPLATE_MOUNT_DIR = "/etc/slurmkube/sssd"
SSSD_CONFIG_FILE = "sssd.conf"
DIRECTORY_CA_MOUNT_DIR = "/etc/slurmkube/directory-ca"
DIRECTORY_CA_SECRET_KEY = "ca.crt"
DIRECTORY_PASSWORD_SECRET_KEY = "password"
ENV_DIRECTORY_BIND_PASSWORD = "SLURMKUBE_DIRECTORY_BIND_PASSWORD"
# A login container's PAM: "1" makes a directory user's home in the jail at their first login.
ENV_DIRECTORY_MAKE_HOMES = "SLURMKUBE_DIRECTORY_MAKE_HOMES"
# Where the login container binds the jail's /etc/skel for pam_mkhomedir (read-only).
DIRECTORY_SKEL_DIR = "/run/slurmkube/skel"
