#!/usr/bin/env python
"""Benchmark (issue 37): what one steady reconcile pass costs the operator as node sets and nodes
grow: 10 node sets of 10 nodes (the baseline, measured in the same run), 100 sets of 10 (1,000 nodes)
and 10 sets of 100 (1,000 nodes in few sets). What grows with nodes rather than node sets shows as
the difference between the last two.

The pass is the operator's own (operator/reconcile.py) over an in-memory API (tests/unit/memory_kube.py)
and a Slurm that answers as slurmctld 26.05 does: every node as `scontrol show nodes --json` printed
it on kind (tests/unit/fixtures/slurm/node-26.05.json, one idle dynamic node, copied per node with its
name). Measured: the CPU seconds of a pass in this process less those spent answering it (the
operator's Python: parsing, planning, rendering, comparing with what is live), its API calls by verb
and its Slurm calls (execs into the controller), and the bytes Slurm printed. The passes remember
what they applied as the operator does (k8s/apply.SeenEqual), so a steady pass is measured as the
operator runs it. Not measured here: the API server's and slurmctld's time to
answer, and the transfers (the bytes stand for those); the kind bench (tests/k8s/test_scale_bench.py)
measures them with a real slurmctld.

Prints one JSON object; no assertion on time. Last measured: tests/bench/operator_pass.json. First
run (2026-12-01): 0.14 CPU-s a pass at 1,000 nodes in 100 sets, but 631 API calls (91 for 10 sets):
six a set, a get of each set's StatefulSet, Service and PodDisruptionBudget to compare, two more of
its StatefulSet (plan, status) and a list of its pods. Since the pass lists each kind once
(k8s/apply.listed_live, scale.live_workers, one list of every worker pod and StatefulSet): 26 calls
a pass whatever the number of sets and nodes (test_reconcile_scale.py holds that).

Usage: python tests/bench/bench_operator_pass.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "unit"))
from collection_path import ensure_importable  # noqa: E402

ensure_importable()
sys.path.insert(0, str(TESTS / "unit" / "plugins" / "module_utils" / "operator"))
from scale_world import T0, steady_world  # noqa: E402

from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import SeenEqual  # noqa: E402
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R  # noqa: E402
from ansible_collections.slurmkube.core.plugins.module_utils.operator import secrets as operator_secrets  # noqa: E402


def measure(sets: int, per_set: int, repeat: int) -> Dict[str, Any]:
    """The median CPU seconds of a steady pass, and what one pass calls."""
    kube, cluster = steady_world(sets, per_set)
    seen = SeenEqual()  # the operator's: an object applied and found equal is not sent again
    seconds = []
    for _round in range(repeat):
        kube.calls.clear()
        kube.slurm_bytes, kube.answering = 0, 0.0
        writes = kube.writes
        started = time.process_time()
        R.Reconciler(kube, clock=lambda: T0, seen=seen).reconcile(cluster)
        seconds.append(time.process_time() - started - kube.answering)
        assert kube.writes == writes, "a steady pass wrote"
    calls = dict(sorted(kube.calls.items()))
    return {"node_sets": sets, "nodes": sets * per_set, "cpu_seconds": round(statistics.median(seconds), 4),
            "api_calls": sum(n for verb, n in calls.items() if verb != "exec"), "slurm_calls": calls.get("exec", 0),
            "calls": calls, "slurm_bytes": kube.slurm_bytes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    keys = {"ssh_host_ed25519_key": b"k", "ssh_host_ed25519_key.pub": b"p"}
    operator_secrets.new_ssh_host_keys = lambda types: keys  # the pass makes none: a steady cluster has them
    base = measure(10, 10, args.repeat)
    many_sets = measure(100, 10, args.repeat)
    big_sets = measure(10, 100, args.repeat)
    print(json.dumps({
        "what": "one steady reconcile pass, in-process (tests/bench/bench_operator_pass.py)",
        "baseline": base, "sets_100_of_10": many_sets, "sets_10_of_100": big_sets,
        "ratio_cpu_1000_nodes_in_100_sets": round(many_sets["cpu_seconds"] / base["cpu_seconds"], 1),
        "ratio_cpu_1000_nodes_in_10_sets": round(big_sets["cpu_seconds"] / base["cpu_seconds"], 1),
        "ratio_api_calls_100_sets": round(many_sets["api_calls"] / base["api_calls"], 1),
        "ratio_api_calls_10_sets_of_100": round(big_sets["api_calls"] / base["api_calls"], 1),
    }, indent=2))


if __name__ == "__main__":
    main()
