# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the operator's Prometheus metrics say about one reconcile pass. Pure: the operator
program feeds these numbers to prometheus-client, and the tests read them directly.

Every label is bounded: the cluster and node set names an admin chose, and event reasons,
which are a fixed set written in this collection (NodeDrain, JobRequeued, NodeDeletePod, ...).
"""

from __future__ import annotations

import datetime
from typing import Any, FrozenSet, List, Mapping, NamedTuple, Optional, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

# A pass that found a bad spec changes nothing: it is counted apart from one that worked.
RESULT_OK = "ok"
RESULT_INVALID = "invalid"
RESULT_ERROR = "error"


class Metric(NamedTuple):
    """One metric the operator serves: its full name (counters without _total), kind, help and
    labels beyond CLUSTER_LABELS (which every metric but the leader gauge has)."""

    name: str
    kind: str  # counter | histogram | gauge
    help: str
    labels: Tuple[str, ...]


# Named as the scrape configs name the exporter's targets (slurmkube_cluster), so one dashboard
# variable and one alert grouping cover both; "namespace" stays the operator pod's own.
CLUSTER_LABELS = ("slurmkube_namespace", "slurmkube_cluster")
PASS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
LEADER = Metric("slurmkube_operator_leader", "gauge", "1 while this operator process holds the leader Lease.", ())
PASSES = Metric("slurmkube_operator_reconcile_passes", "counter",
                "Reconcile passes by result (ok, invalid spec, error).", ("result",))
PASS_SECONDS = Metric("slurmkube_operator_reconcile_duration_seconds", "histogram", "Duration of reconcile passes.",
                      ())
WRITES = Metric("slurmkube_operator_api_writes", "counter", "Writes to the Kubernetes API: objects applied "
                "(kind=object), statuses written, events posted.", ("kind",))
# Not per cluster: the operator's one API client serves every cluster and loop.
API_CALLS = Metric("slurmkube_operator_api_calls", "counter", "Calls to the Kubernetes API by verb (get, list, apply, "
                   "merge_patch, ...; exec: a command run in a pod, Slurm's commands in the controller pod among "
                   "them), every cluster and loop together.", ("verb",))
EVENTS = Metric("slurmkube_operator_events", "counter", "What the operator did, by its Event's reason (NodeDrain, "
                "NodeDeletePod: a replacement, JobRequeued, MungeKeyRotated, ...).", ("reason",))
# The gauges cluster_gauges sets, by the name it gives them.
STATE = {m.name[len("slurmkube_"):]: m for m in (
    Metric("slurmkube_cluster_nodes", "gauge", "Slurm nodes the cluster wants (kind=desired) and has in service "
           "(kind=ready).", ("kind",)),
    Metric("slurmkube_cluster_ready", "gauge", "1 when the SlurmCluster is Ready.", ()),
    Metric("slurmkube_controller_ready", "gauge", "1 when a slurmctld serves and answers and every backup "
           "stands by.", ()),
    Metric("slurmkube_controller_serving", "gauge", "Per slurmctld pod that is up: 1 for the one that serves, 0 "
           "for one standing by.", ("pod",)),
    Metric("slurmkube_control_plane_up", "gauge", "Per part of the control plane the spec asks for (controller, "
           "accounting, rest, login): 1 while users get what they need of it (status.controlPlane).", ("part",)),
    Metric("slurmkube_munge_key_rotation_pending", "gauge", "1 while a munge key rotation is not finished "
           "everywhere.", ()),
    Metric("slurmkube_nodeset_replicas", "gauge", "A node set's replicas (kind=desired) and worker pods ready "
           "(kind=pods_ready).", ("kind", "node_set")),
    Metric("slurmkube_nodeset_ready", "gauge", "1 when every node of the node set is in service.", ("node_set",)),
    Metric("slurmkube_backup_last_success_timestamp_seconds", "gauge", "With spec.backup: when the newest backup "
           "run that succeeded ended (Unix time; 0 before the first).", ()),
    Metric("slurmkube_backup_last_failure_timestamp_seconds", "gauge", "With spec.backup: when the newest backup "
           "run that failed ended (Unix time; 0 when none has).", ()),
)}
# The bridge (Kubernetes pods scheduled by Slurm): its queue, how long a pod waits to be bound
# (Slurm's queue included: minutes to hours), and what its cycles cost.
BRIDGE_POD_STATES = ("pending", "held", "bound")
BIND_BUCKETS = (1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
BRIDGE_PODS = Metric("slurmkube_bridge_pods", "gauge", "Pods of the bridge's namespaces by state: pending (waiting "
                     "for Slurm to place them), held (the bridge cannot honour them: their Events say why), bound "
                     "(placed where Slurm put their job, not ended).", ("state",))
BRIDGE_BIND_SECONDS = Metric("slurmkube_bridge_bind_latency_seconds", "histogram", "From a bridged pod's creation "
                             "to its binding where Slurm placed its job (the wait in Slurm's queue included).", ())
BRIDGE_CALLS = Metric("slurmkube_bridge_calls", "counter", "The bridge's calls by kind: slurm (squeue, sbatch, "
                      "scancel in the controller pod) and api (Kubernetes reads and writes).", ("kind",))
BRIDGE_CYCLE_SECONDS = Metric("slurmkube_bridge_cycle_seconds", "histogram", "How long a bridge cycle took (its "
                              "reads, Slurm's calls, its binds and Events).", ())
BRIDGE_SLURM_SECONDS = Metric("slurmkube_bridge_slurm_seconds", "counter", "Seconds the bridge's cycles spent in "
                              "their calls into the controller pod (kind=slurm of slurmkube_bridge_calls).", ())
METRICS = (LEADER, PASSES, PASS_SECONDS, WRITES, API_CALLS, EVENTS, *STATE.values(), BRIDGE_PODS, BRIDGE_BIND_SECONDS,
           BRIDGE_CALLS, BRIDGE_CYCLE_SECONDS, BRIDGE_SLURM_SECONDS)
BUCKETS = {PASS_SECONDS.name: PASS_BUCKETS, BRIDGE_BIND_SECONDS.name: BIND_BUCKETS,
           BRIDGE_CYCLE_SECONDS.name: PASS_BUCKETS}


def served_names() -> FrozenSet[str]:
    """Every sample name Prometheus gets from the operator (counters' _total, histograms' parts)."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    return frozenset(m.name + suffix for m in METRICS for suffix in suffixes[m.kind])


class Gauge(NamedTuple):
    """One gauge sample: its name without the prefix, its labels beyond namespace and cluster."""

    name: str
    labels: Tuple[Tuple[str, str], ...]
    value: float


def unix_time(rfc3339: Optional[str]) -> float:
    """A Kubernetes time (RFC 3339, UTC) as Unix time; 0 for none."""
    if not rfc3339:
        return 0.0
    return datetime.datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def pass_result(status: Mapping[str, Any]) -> str:
    """ok, or invalid when the pass refused the spec (its status says so: the Warning Event goes
    out only on the first pass of a generation)."""
    return RESULT_INVALID if status.get("phase") == C.PHASE_INVALID else RESULT_OK


def condition_true(status: Mapping[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or [])


def cluster_gauges(status: Mapping[str, Any], nodeset_status: Mapping[str, Mapping[str, Any]],
                   wanted: Mapping[str, int]) -> List[Gauge]:
    """Where the cluster stands after a pass: its nodes wanted and in service, each node set's
    replicas (`wanted`: its spec) and pods ready and whether it is Ready (every node in service),
    whether slurmctld answers and which controller serves, which part of the control plane is up,
    whether a munge key rotation is unfinished, when the last backup succeeded and failed."""
    nodes = status.get("nodes") or {}
    gauges = [
        Gauge("cluster_nodes", (("kind", "desired"),), float(nodes.get("desired", 0))),
        Gauge("cluster_nodes", (("kind", "ready"),), float(nodes.get("ready", 0))),
        Gauge("cluster_ready", (), 1.0 if condition_true(status, "Ready") else 0.0),
        Gauge("controller_ready", (), 1.0 if condition_true(status, "ControllerReady") else 0.0),
        Gauge("munge_key_rotation_pending", (), 0.0 if condition_true(status, "MungeKeyInUse") else 1.0),
    ]
    gauges += [Gauge("control_plane_up", (("part", part),), 1.0 if up else 0.0)
               for part, up in sorted((status.get("controlPlane") or {}).items())]
    controller = status.get("controller") or {}
    up = ([controller["serving"]] if controller.get("serving") else []) + list(controller.get("standby") or [])
    gauges += [Gauge("controller_serving", (("pod", pod),), 1.0 if pod == controller.get("serving") else 0.0)
               for pod in sorted(up)]
    if "backup" in status:
        backup = status["backup"]
        gauges += [Gauge("backup_last_success_timestamp_seconds", (), unix_time(backup.get("lastSuccessTime"))),
                   Gauge("backup_last_failure_timestamp_seconds", (), unix_time(backup.get("lastFailureTime")))]
    for name, replicas in sorted(wanted.items()):
        counts = nodeset_status.get(name) or {}
        gauges += [
            Gauge("nodeset_replicas", (("kind", "desired"), ("node_set", name)), float(replicas)),
            Gauge("nodeset_replicas", (("kind", "pods_ready"), ("node_set", name)),
                  float(counts.get("readyReplicas", 0))),
            Gauge("nodeset_ready", (("node_set", name),), 1.0 if condition_true(counts, "Ready") else 0.0),
        ]
    return gauges
