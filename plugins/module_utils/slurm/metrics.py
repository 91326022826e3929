# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus metric families from Slurm's answers (scontrol and sdiag JSON, squeue lines): pure functions,
so the exporter only fetches, calls these and serves the result.

Labels stay bounded whatever the cluster does: node states and reasons fold into a few
kinds, users beyond the busiest few (and homes beyond the largest) fold into "other", and nothing
carries a job id, a node name or free text.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import AbstractSet, Any, Dict, FrozenSet, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.drain import parse_drain_reason
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.facts import number

Labels = Tuple[Tuple[str, str], ...]

MICROSECONDS = 1e-6
# A node's state as one word, the first that holds: down beats drain beats load.
NODE_STATES = ("down", "drain", "completing", "mixed", "allocated", "idle", "other")
# Users with the most jobs get a series each; the rest share user="other".
TOP_USERS = 20
# The largest homes of the jail get a series each; the rest share user="other".
TOP_HOMES = 50
OTHER = "other"
# The fast checks whose verdicts are exported (images/common/slurmkube-healthcheck's names).
HEALTH_CHECKS = frozenset(("munged", "slurmd", "jail", "scratch", "memory", "clock", "gpu"))
# A long check's result line (images/node/nodecheck.py result_line, and the shell's FAIL/SKIP).
RESULT_LINE = re.compile(r"^.*?slurmkube-result node=(?P<node>\S+)(?P<values>(?: [a-z_]+=[0-9.]+)*) "
                         r"(?P<verdict>PASS|FAIL|SKIP)\b", re.M)
MEASURE = re.compile(r"([a-z_]+)=([0-9.]+)")
# What a long check measures → the family, in base units.
LONG_CHECK_MEASURES = {
    "memory_mib_per_s": ("slurm_node_memory_bandwidth_bytes_per_second", 2.0 ** 20),
    "compute_mib_per_s": ("slurm_node_compute_bytes_per_second", 2.0 ** 20),
    "latency_us": ("slurm_node_latency_seconds", MICROSECONDS),
    "busbw_gb_per_s": ("slurm_node_gpu_bus_bandwidth_bytes_per_second", 1e9),
}
LONG_CHECK_HELP = {
    "slurm_node_memory_bandwidth_bytes_per_second": "Memory copy bandwidth the node's last long check measured.",
    "slurm_node_compute_bytes_per_second": "SHA-256 throughput per CPU the node's last long check measured.",
    "slurm_node_latency_seconds": "One-way TCP latency to its peer the node's last latency check measured.",
    "slurm_node_gpu_bus_bandwidth_bytes_per_second": "Peak NCCL all-reduce bus bandwidth the node's last long "
                                                     "check measured.",
}
GPU_GRES = re.compile(r"(?:^|,)gpu(?::[^:,()]+)?:(\d+)")


class Family(NamedTuple):
    """One metric family: its samples as (labels, value)."""

    name: str
    kind: str  # gauge or counter
    help: str
    samples: List[Tuple[Labels, float]]


def labels(**pairs: str) -> Labels:
    return tuple(sorted(pairs.items()))


def node_state(states: Iterable[str]) -> str:
    """One of NODE_STATES for Slurm's state list (base state plus flags)."""
    flags = set(states)
    if flags & {"DOWN", "NOT_RESPONDING", "ERROR", "FAIL"}:
        return "down"
    if "DRAIN" in flags:
        return "drain"
    for state in ("COMPLETING", "MIXED", "ALLOCATED", "IDLE"):
        if state in flags:
            return state.lower()
    return "other"


def reason_kind(reason: str) -> str:
    """Who set a node's reason, as a bounded label: a planned drain by its purpose, the long
    checks, the fast health check, a lost pod or Kubernetes node, or an admin ("other")."""
    if not reason:
        return "none"
    planned = parse_drain_reason(reason)
    if planned is not None:
        return "planned:" + planned[0]
    prefix = C.DRAIN_REASON_PREFIX + " "
    if not reason.startswith(prefix):
        return OTHER
    why = reason[len(prefix):]
    if why.startswith(C.DRAIN_REASON_LONG_CHECK):
        return "long-check"
    if why.startswith(("pod restarted", "pod stopping")):
        return "pod-lost"
    if why.startswith(C.REASON_NODE_LOST + " "):
        return "node-lost"
    return "health-check"


def gpus_in(gres: str) -> int:
    """GPUs in a gres string ('gpu:2', 'gpu:h100:8(S:0-1)', 'gpu:a100:4(IDX:0-3)')."""
    return sum(int(count) for count in GPU_GRES.findall(gres or ""))


def node_set_of(node: Mapping[str, Any]) -> str:
    """The node set a node registered with: its first feature (the worker's slurmd -Z --conf)."""
    features = node.get("active_features") or node.get("features") or []
    return features[0] if features else ""


# Capacity and use, one family each, so that sum() over one means something. The CPU and GPU
# names are those of the community exporter (vpenso/prometheus-slurm-exporter: slurm_cpus_total,
# slurm_cpus_alloc, slurm_gpus_total, slurm_gpus_alloc), here per node set; memory, which it has
# not, follows them with the unit Prometheus asks for.
RESOURCE_FAMILIES = (
    ("slurm_cpus_total", "CPUs of the nodes by node set."),
    ("slurm_cpus_alloc", "CPUs allocated to jobs by node set."),
    ("slurm_memory_total_bytes", "Memory of the nodes (RealMemory) by node set."),
    ("slurm_memory_alloc_bytes", "Memory allocated to jobs by node set."),
    ("slurm_gpus_total", "GPUs of the nodes by node set."),
    ("slurm_gpus_alloc", "GPUs allocated to jobs by node set."),
)


def node_families(nodes_json: str) -> List[Family]:
    """Nodes by state and node set, why the unavailable ones are, and what they hold."""
    nodes = json.loads(nodes_json).get("nodes") or []
    by_state: Counter = Counter()
    unavailable: Counter = Counter()
    resources: Dict[Tuple[str, str], float] = {}
    for node in nodes:
        node_set = node_set_of(node)
        state = node_state(node.get("state") or [])
        by_state[(node_set, state)] += 1
        if state in ("down", "drain"):
            unavailable[(node_set, state, reason_kind(node.get("reason") or ""))] += 1
        held = (
            ("slurm_cpus_total", number(node.get("cpus")) or 0),
            ("slurm_cpus_alloc", number(node.get("alloc_cpus")) or 0),
            ("slurm_memory_total_bytes", (number(node.get("real_memory")) or 0) * 2 ** 20),
            ("slurm_memory_alloc_bytes", (number(node.get("alloc_memory")) or 0) * 2 ** 20),
            ("slurm_gpus_total", gpus_in(node.get("gres") or "")),
            ("slurm_gpus_alloc", gpus_in(node.get("gres_used") or "")),
        )
        for name, value in held:
            resources[(name, node_set)] = resources.get((name, node_set), 0) + value
    return [
        Family("slurm_nodes", "gauge", "Slurm nodes by node set and state (down, drain, completing, mixed, "
               "allocated, idle, other).",
               [(labels(node_set=s, state=st), n) for (s, st), n in sorted(by_state.items())]),
        Family("slurm_nodes_unavailable", "gauge", "Down or drained nodes by node set, state and who set the "
               "reason (health-check, long-check, pod-lost, node-lost, planned:<purpose>, other, none).",
               [(labels(node_set=s, state=st, reason=r), n) for (s, st, r), n in sorted(unavailable.items())]),
        *(Family(name, "gauge", text,
                 [(labels(node_set=s), v) for (n, s), v in sorted(resources.items()) if n == name])
          for name, text in RESOURCE_FAMILIES),
    ]


# What the exporter asks squeue for, one job per line: squeue's own columns rather than its
# JSON, which costs the client about twenty times the CPU for a thousand jobs (measured:
# tests/bench/exporter.json) and carries nothing more that these families read.
SQUEUE_FORMAT = "%P|%T|%r|%u"


def job_families(squeue_lines: str, top_users: int = TOP_USERS) -> List[Family]:
    """Jobs by partition and state, pending ones by reason, and per user (the busiest only),
    from `squeue --noheader --format=SQUEUE_FORMAT` lines."""
    by_state: Counter = Counter()
    pending: Counter = Counter()
    per_user: Counter = Counter()
    for line in squeue_lines.splitlines():
        fields = line.split("|")
        if len(fields) != 4:
            continue
        partition, state, reason, user = fields[0], fields[1].lower(), fields[2] or "None", fields[3]
        by_state[(partition, state)] += 1
        if state == "pending":
            pending[(partition, reason)] += 1
        per_user[(user, state)] += 1
    totals: Counter = Counter()
    for (user, _state), count in per_user.items():
        totals[user] += count
    busiest = {user for user, _count in sorted(totals.items(), key=lambda t: (-t[1], t[0]))[:top_users]}
    folded: Counter = Counter()
    for (user, state), count in per_user.items():
        folded[(user if user in busiest else OTHER, state)] += count
    return [
        Family("slurm_jobs", "gauge", "Jobs in slurmctld's queue by partition and state.",
               [(labels(partition=p, state=s), n) for (p, s), n in sorted(by_state.items())]),
        Family("slurm_jobs_pending", "gauge", "Pending jobs by partition and Slurm's reason.",
               [(labels(partition=p, reason=r), n) for (p, r), n in sorted(pending.items())]),
        Family("slurm_user_jobs", "gauge", "Jobs per user and state: the %d users with the most jobs, the rest "
               "as user=\"other\"." % top_users,
               [(labels(user=u, state=s), n) for (u, s), n in sorted(folded.items())]),
    ]


def statistic(stats: Mapping[str, Any], key: str) -> float:
    return float(number(stats.get(key)) or 0)


def scheduler_families(sdiag_json: str) -> List[Family]:
    """slurmctld's scheduler and RPC statistics from `sdiag --json` (counters since its last reset)."""
    stats = json.loads(sdiag_json).get("statistics") or {}
    gauges = (
        ("slurm_scheduler_cycle_last_seconds", "Duration of the last main scheduling cycle.",
         "schedule_cycle_last", MICROSECONDS),
        ("slurm_scheduler_cycle_max_seconds", "Longest main scheduling cycle.", "schedule_cycle_max",
         MICROSECONDS),
        ("slurm_scheduler_cycle_mean_seconds", "Mean main scheduling cycle.", "schedule_cycle_mean",
         MICROSECONDS),
        ("slurm_scheduler_queue_length", "Jobs the main scheduler looked at last.", "schedule_queue_length", 1),
        ("slurm_backfill_cycle_last_seconds", "Duration of the last backfill cycle.", "bf_cycle_last",
         MICROSECONDS),
        ("slurm_backfill_cycle_mean_seconds", "Mean backfill cycle.", "bf_cycle_mean", MICROSECONDS),
        ("slurm_backfill_queue_length", "Jobs the backfill scheduler looked at last.", "bf_queue_len", 1),
        ("slurm_server_threads", "slurmctld's RPC threads at work.", "server_thread_count", 1),
        ("slurm_agent_queue_size", "Messages slurmctld waits to send to nodes.", "agent_queue_size", 1),
        ("slurm_dbd_agent_queue_size", "Records slurmctld holds that slurmdbd has not taken yet.",
         "dbd_agent_queue_size", 1),
    )
    counters = (
        ("slurm_scheduler_cycles_total", "Main scheduling cycles.", "schedule_cycle_total"),
        ("slurm_backfill_cycles_total", "Backfill cycles.", "bf_cycle_counter"),
        ("slurm_backfilled_jobs_total", "Jobs started by the backfill scheduler.", "bf_backfilled_jobs"),
        ("slurm_jobs_submitted_total", "Jobs submitted.", "jobs_submitted"),
        ("slurm_jobs_started_total", "Jobs started.", "jobs_started"),
        ("slurm_jobs_completed_total", "Jobs completed.", "jobs_completed"),
        ("slurm_jobs_failed_total", "Jobs failed.", "jobs_failed"),
    )
    families = [Family(name, "gauge", text, [((), statistic(stats, key) * scale)])
                for name, text, key, scale in gauges]
    families += [Family(name, "counter", text, [((), statistic(stats, key))]) for name, text, key in counters]
    rpcs = stats.get("rpcs_by_message_type") or []
    families.append(Family("slurm_rpcs_total", "counter", "RPCs slurmctld served, by message type.",
                           [(labels(type=str(r.get("message_type"))), float(number(r.get("count")) or 0))
                            for r in rpcs]))
    families.append(Family("slurm_rpc_seconds_total", "counter", "Time slurmctld spent on RPCs, by message type.",
                           [(labels(type=str(r.get("message_type"))),
                             float(number(r.get("total_time")) or 0) * MICROSECONDS) for r in rpcs]))
    return families


def node_names(nodes_json: str) -> FrozenSet[str]:
    """The nodes slurmctld knows: result files of nodes it no longer has are not exported."""
    return frozenset(n.get("name") or "" for n in json.loads(nodes_json).get("nodes") or [])


def jail_families(size: float, free: float, files: float, files_free: float) -> List[Family]:
    """The shared jail volume's space and inodes (statvfs of its mount, as an unprivileged user sees)."""
    return [
        Family("slurm_jail_volume_size_bytes", "gauge", "Size of the jail volume.", [((), size)]),
        Family("slurm_jail_volume_free_bytes", "gauge", "Space of the jail volume users can still write.",
               [((), free)]),
        Family("slurm_jail_volume_files", "gauge", "Inodes of the jail volume.", [((), files)]),
        Family("slurm_jail_volume_files_free", "gauge", "Free inodes of the jail volume.", [((), files_free)]),
    ]


def jail_usage_families(report: Mapping[str, Any], claim_bytes: Optional[float],
                        top_homes: int = TOP_HOMES) -> List[Family]:
    """The jail's usage as du counts it (the jail-usage container's last report: images/exporter/
    slurmkube_jail_usage.py), in all and per home (the largest only, the rest as user="other"),
    beside the size its claim asks for (none for a site's own claim): a storage class that does not
    enforce a claim's size lets the jail outgrow it while the volume's statvfs shows the host's
    filesystem."""
    homes: Dict[str, float] = {}
    by_size = sorted((report.get("homes") or {}).items(), key=lambda t: (-t[1], t[0]))
    for rank, (user, size) in enumerate(by_size):
        key = user if rank < top_homes else OTHER
        homes[key] = homes.get(key, 0.0) + float(size)
    return [
        Family("slurm_jail_used_bytes", "gauge", "Space the jail's files take, counted as du does.",
               [((), float(report["used_bytes"]))] if "used_bytes" in report else []),
        Family("slurm_jail_home_used_bytes", "gauge", "Space each home of the jail takes (/home/<user>), counted "
               "as du does.", [(labels(user=user), size) for user, size in sorted(homes.items())]),
        Family("slurm_jail_usage_counted_timestamp_seconds", "gauge", "When the jail's usage was last counted.",
               [((), float(report["time"]))] if "time" in report else []),
        Family("slurm_jail_claim_size_bytes", "gauge", "Size the cluster's jail claim asks for.",
               [((), claim_bytes)] if claim_bytes is not None else []),
    ]


def health_families(results: Mapping[str, str], nodes: AbstractSet[str]) -> List[Family]:
    """Each node's fast-check verdicts: the files the health check leaves in the jail
    (C.HEALTH_RESULTS_DIR/<node>: "time <epoch>" then "<check> pass|fail" lines)."""
    verdicts: List[Tuple[Labels, float]] = []
    times: List[Tuple[Labels, float]] = []
    for node in sorted(set(results) & set(nodes)):
        for line in results[node].splitlines():
            key, _blank, value = line.partition(" ")
            if key == "time" and value.isdigit():
                times.append((labels(node=node), float(value)))
            elif key in HEALTH_CHECKS and value in ("pass", "fail"):
                verdicts.append((labels(node=node, check=key), 1.0 if value == "fail" else 0.0))
    return [
        Family("slurm_node_health_check_failed", "gauge", "1 when the node's last fast health check failed this "
               "check.", verdicts),
        Family("slurm_node_health_check_timestamp_seconds", "gauge", "When the node's fast health check last ran.",
               times),
    ]


def long_check_families(results: Mapping[str, Tuple[float, str]], nodes: AbstractSet[str]) -> List[Family]:
    """The long checks' last results per node, from their logs in the jail
    (C.LONG_CHECK_RESULTS_DIR/<node>.log and <node>-latency.log: (mtime, text)). A pair's
    latency is measured, and its result line named, by the pair's second node."""
    verdicts: Dict[Tuple[str, str], List[str]] = {}
    times: Dict[Tuple[str, str], float] = {}
    measured: Dict[str, Dict[Labels, float]] = {name: {} for name, _scale in LONG_CHECK_MEASURES.values()}
    for file_name, (mtime, text) in sorted(results.items()):
        check = long_check_of(file_name)
        for line in RESULT_LINE.finditer(text):
            node = line.group("node")
            if node not in nodes:
                continue
            verdicts.setdefault((node, check), []).append(line.group("verdict"))
            times[(node, check)] = max(times.get((node, check), 0.0), mtime)
            for key, value in MEASURE.findall(line.group("values")):
                if key in LONG_CHECK_MEASURES:
                    name, scale = LONG_CHECK_MEASURES[key]
                    measured[name][labels(node=node)] = float(value) * scale
    return [
        Family("slurm_node_long_check_failed", "gauge", "1 when the node's last long check (check=node: "
               "scratch, CPU, memory, bandwidth, GPUs; check=latency: its pair's) failed.",
               [(labels(node=n, check=c), 1.0 if "FAIL" in v else 0.0) for (n, c), v in sorted(verdicts.items())]),
        Family("slurm_node_long_check_timestamp_seconds", "gauge", "When the node's long check last wrote its log.",
               [(labels(node=n, check=c), t) for (n, c), t in sorted(times.items())]),
        *(Family(name, "gauge", LONG_CHECK_HELP[name], sorted(samples.items()))
          for name, samples in sorted(measured.items())),
    ]


def long_check_of(file_name: str) -> str:
    """Which long check wrote a log: <node>-latency.log the latency pair's, <node>.log the node's."""
    return "latency" if file_name.endswith("-latency.log") else "node"


def up_family(answered: Mapping[str, bool]) -> List[Family]:
    """slurm_up: slurmctld answered at least one of the exporter's questions (one failing
    command is not a controller down); slurm_scrape_success: which of them it answered."""
    return [
        Family("slurm_up", "gauge", "1 when slurmctld answered the last scrape (any of its commands).",
               [((), 1.0 if any(answered.values()) else 0.0)]),
        Family("slurm_scrape_success", "gauge", "1 when the source's command answered the last scrape, by source "
               "(nodes: scontrol show nodes, jobs: squeue, sdiag: sdiag).",
               [(labels(source=source), 1.0 if ok else 0.0) for source, ok in sorted(answered.items())]),
    ]


def series_count(families: Sequence[Family]) -> int:
    return sum(len(f.samples) for f in families)
