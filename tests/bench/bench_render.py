#!/usr/bin/env python
"""Benchmark: render a 1,000-node cluster (10 node sets of 100) against a 10-node baseline.

Prints one JSON object: time per render of both, their ratio, and slurm.conf sizes. The
ratio is the number to watch: it stays near 1 because slurm.conf and the manifests grow
with node sets, not nodes. No assertion on wall-clock time.

Usage: python tests/bench/bench_render.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from collection_path import ensure_importable

ensure_importable()
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset  # noqa: E402
from ansible_collections.slurmkube.core.plugins.module_utils.render.cluster import render_cluster  # noqa: E402
from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import (  # noqa: E402
    render_slurm_conf,
)


def resources(sets: int, nodes_per_set: int) -> tuple[dict, list[dict]]:
    cluster = {"metadata": {"name": "bench", "namespace": "hpc"}, "spec": {"slurm": {"maxNodeCount": 5000}}}
    nodesets = [
        {"metadata": {"name": "set%d" % i, "namespace": "hpc"},
         "spec": {"clusterName": "bench", "replicas": nodes_per_set,
                  "resources": {"cpu": 64, "memory": "256Gi", "gpus": 8 if i % 2 else 0}}}
        for i in range(sets)
    ]
    return cluster, nodesets


def time_render(sets: int, nodes_per_set: int, repeat: int) -> dict:
    cluster_raw, nodesets_raw = resources(sets, nodes_per_set)
    best = float("inf")
    for _attempt in range(repeat):
        start = time.perf_counter()
        cluster = parse_cluster(cluster_raw)
        nodesets = [parse_nodeset(n) for n in nodesets_raw]
        objects = render_cluster(cluster, nodesets).objects
        best = min(best, time.perf_counter() - start)
    conf = render_slurm_conf(cluster, nodesets)
    return {"nodes": sets * nodes_per_set, "node_sets": sets, "objects": len(objects),
            "seconds": round(best, 6), "slurm_conf_bytes": len(conf.encode()),
            "slurm_conf_lines": conf.count("\n")}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    baseline = time_render(1, 10, args.repeat)
    large = time_render(10, 100, args.repeat)
    print(json.dumps({"baseline": baseline, "large": large,
                      "time_ratio_large_vs_baseline": round(large["seconds"] / baseline["seconds"], 2),
                      "slurm_conf_size_ratio": round(large["slurm_conf_bytes"] / baseline["slurm_conf_bytes"], 2)},
                     indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
