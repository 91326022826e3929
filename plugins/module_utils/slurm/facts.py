# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What slurmctld reports, as plain facts: nodes, partitions, jobs, node counts by state.

Read from the JSON output of scontrol and squeue (the one-line partition form only for the
Default flag, which the JSON lacks).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set

from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmControl, SlurmNode, parse_nodes

NODES_COMMAND = ("scontrol", "show", "nodes", "--json")
PARTITIONS_COMMAND = ("scontrol", "show", "partitions", "--json")
# Slurm's partition JSON has no Default flag; the one-line text form has it.
PARTITION_LINES_COMMAND = ("scontrol", "--oneliner", "show", "partitions")
JOBS_COMMAND = ("squeue", "--json")
SDIAG_COMMAND = ("sdiag", "--json")
# -i: a query sacctmgr doubts would otherwise wait for an answer (slurm/sacctmgr.py). A query
# slurmdbd takes from its database: it fails while slurmdbd or the database is away. At most
# ACCOUNTING_ANSWER_SECONDS: the operator asks every pass, and a hung database must not hold it.
ACCOUNTING_ANSWER_SECONDS = 10
CLUSTERS_COMMAND = ("timeout", str(ACCOUNTING_ANSWER_SECONDS), "sacctmgr", "-i", "-n", "-P", "show", "cluster",
                    "format=Cluster")


def number(value: Any) -> Optional[int]:
    """A Slurm JSON number: plain, or {set, infinite, number}; None when unset or infinite."""
    if isinstance(value, Mapping):
        if not value.get("set") or value.get("infinite"):
            return None
        return int(value.get("number") or 0)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def node_facts(text: str) -> List[Dict[str, Any]]:
    """Nodes from `scontrol show nodes --json`, sorted by name."""
    nodes = json.loads(text).get("nodes") or []
    return sorted(({
        "name": node["name"],
        "state": list(node.get("state") or []),
        "reason": node.get("reason") or "",
        "cpus": number(node.get("cpus")),
        "alloc_cpus": number(node.get("alloc_cpus")),
        "real_memory_mb": number(node.get("real_memory")),
        "partitions": list(node.get("partitions") or []),
        "features": list(node.get("active_features") or node.get("features") or []),
    } for node in nodes), key=lambda n: n["name"])


def default_partitions(text: str) -> Set[str]:
    """Names of the partitions whose one-line form says Default=YES."""
    names = set()
    for line in text.splitlines():
        words = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if words.get("Default") == "YES" and "PartitionName" in words:
            names.add(words["PartitionName"])
    return names


def partition_facts(text: str, defaults: Set[str]) -> List[Dict[str, Any]]:
    """Partitions from `scontrol show partitions --json`, in slurm.conf order."""
    out = []
    for part in json.loads(text).get("partitions") or []:
        nodes = part.get("nodes") or {}
        out.append({
            "name": part["name"],
            "state": list((part.get("partition") or {}).get("state") or []),
            "default": part["name"] in defaults,
            "nodes": nodes.get("configured") or "",
            "total_nodes": number(nodes.get("total")),
            "total_cpus": number((part.get("cpus") or {}).get("total")),
            "node_sets": [s for s in (part.get("node_sets") or "").split(",") if s],
            "max_time_minutes": number((part.get("maximums") or {}).get("time")),
        })
    return out


def job_facts(text: str) -> List[Dict[str, Any]]:
    """Jobs from `squeue --json`, by id."""
    jobs = json.loads(text).get("jobs") or []
    return sorted(({
        "job_id": int(job["job_id"]),
        "name": job.get("name") or "",
        "user": job.get("user_name") or "",
        "state": list(job.get("job_state") or []),
        "state_reason": job.get("state_reason") or "",
        "partition": job.get("partition") or "",
        "nodes": job.get("nodes") or "",
        "node_count": number(job.get("node_count")),
    } for job in jobs), key=lambda j: j["job_id"])


def nodes_by_state(nodes: Sequence[SlurmNode]) -> Dict[str, int]:
    """Count of Slurm nodes per base state plus drain (idle, allocated, mixed, down, drain)."""
    counts: Dict[str, int] = {}
    for node in nodes:
        base = sorted(s for s in node.states if s in ("IDLE", "ALLOCATED", "MIXED", "DOWN", "FUTURE"))
        for state in base + (["DRAIN"] if node.draining else []):
            counts[state.lower()] = counts.get(state.lower(), 0) + 1
    return counts


def slurm_release(text: str) -> Optional[str]:
    """The release of the Slurm that answered ("26.05.5"), from the meta of its JSON output."""
    release = ((json.loads(text).get("meta") or {}).get("slurm") or {}).get("release")
    return str(release) if release else None


def slurm_facts(slurm: SlurmControl, include_jobs: bool) -> Dict[str, Any]:
    """Slurm's release, nodes, partitions, jobs and node counts by state, as slurmctld reports them."""
    nodes_text = slurm.output(NODES_COMMAND)
    defaults = default_partitions(slurm.output(PARTITION_LINES_COMMAND))
    facts: Dict[str, Any] = {
        "slurm_version": slurm_release(nodes_text),
        "nodes": node_facts(nodes_text),
        "nodes_by_state": nodes_by_state(parse_nodes(nodes_text)),
        "partitions": partition_facts(slurm.output(PARTITIONS_COMMAND), defaults),
        "jobs": job_facts(slurm.output(JOBS_COMMAND)) if include_jobs else [],
    }
    return facts


def accounting_facts(slurm: SlurmControl) -> Dict[str, Any]:
    """slurmdbd as the controller pod sees it: whether sacctmgr reaches it (and the clusters it
    serves), and how many records slurmctld holds that slurmdbd has not taken yet (its DBD
    agent queue; it grows while slurmdbd or its database is away, and drains when back)."""
    code, out, err = slurm.run(list(CLUSTERS_COMMAND))
    facts: Dict[str, Any] = {"slurmdbd_reachable": code == 0, "clusters": out.split() if code == 0 else []}
    if code != 0:
        facts["slurmdbd_error"] = (err or out).strip() or (
            "no answer in %d s" % ACCOUNTING_ANSWER_SECONDS if code == 124 else "sacctmgr exited %d" % code)
    statistics = json.loads(slurm.output(SDIAG_COMMAND)).get("statistics") or {}
    facts["dbd_agent_queue_size"] = number(statistics.get("dbd_agent_queue_size"))
    return facts
