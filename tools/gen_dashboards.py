"""Write the Grafana dashboards (monitoring/grafana/*.json) from the panel lists below.

    python tools/gen_dashboards.py           write them
    python tools/gen_dashboards.py --check   exit 1 when a committed file differs

Every panel is one PromQL expression over the exporter's and the operator's metrics; a k8s
test runs each against a live Prometheus. Dashboards take the cluster as a variable.
Dashboards: cluster overview, nodes and health, queue and scheduler, operator.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

OUT = Path(__file__).resolve().parent.parent / "monitoring" / "grafana"
# Every cluster panel selects and groups by both labels a cluster's samples carry: two clusters of
# one name in two namespaces are never summed together.
CLUSTER = 'slurmkube_namespace=~"$namespace",slurmkube_cluster=~"$cluster"'
BY = "slurmkube_namespace, slurmkube_cluster"
WHO = "{{slurmkube_namespace}}/{{slurmkube_cluster}}"

# (title, expression, legend, kind) per panel; kind is timeseries or stat.
Panel = Tuple[str, str, str, str]
DASHBOARDS: Dict[str, Tuple[str, Sequence[Panel]]] = {
    "slurmkube-overview": ("Slurm cluster overview", (
        ("slurmctld up", "slurm_up{%s}" % CLUSTER, WHO, "stat"),
        ("Nodes by state", "sum by (%s, state) (slurm_nodes{%s})" % (BY, CLUSTER), WHO + " {{state}}", "timeseries"),
        ("CPUs allocated", "sum by (%s) (slurm_cpus_alloc{%s}) / sum by (%s) (slurm_cpus_total{%s})"
         % (BY, CLUSTER, BY, CLUSTER), WHO, "stat"),
        ("Jobs by state", "sum by (%s, state) (slurm_jobs{%s})" % (BY, CLUSTER), WHO + " {{state}}", "timeseries"),
        ("GPUs allocated", "sum by (%s, node_set) (slurm_gpus_alloc{%s})" % (BY, CLUSTER), WHO + " {{node_set}}",
         "timeseries"),
        ("Control plane parts up", "slurmkube_control_plane_up{%s}" % CLUSTER, WHO + " {{part}}", "stat"),
    )),
    "slurmkube-nodes": ("Slurm nodes and health", (
        ("Unavailable nodes by reason", "sum by (%s, node_set, state, reason) (slurm_nodes_unavailable{%s})"
         % (BY, CLUSTER), WHO + " {{node_set}} {{state}} {{reason}}", "timeseries"),
        ("Nodes by node set", "sum by (%s, node_set, state) (slurm_nodes{%s})" % (BY, CLUSTER),
         WHO + " {{node_set}} {{state}}", "timeseries"),
        ("Failing health checks", "sum by (%s, node, check) (slurm_node_health_check_failed{%s}) > 0"
         % (BY, CLUSTER), WHO + " {{node}} {{check}}", "timeseries"),
        ("Seconds since each node's health check", "time() - slurm_node_health_check_timestamp_seconds{%s}"
         % CLUSTER, WHO + " {{node}}", "timeseries"),
        ("Failed long checks", "sum by (%s, node, check) (slurm_node_long_check_failed{%s})" % (BY, CLUSTER),
         WHO + " {{node}} {{check}}", "timeseries"),
        ("Memory bandwidth (long check)", "slurm_node_memory_bandwidth_bytes_per_second{%s}" % CLUSTER,
         WHO + " {{node}}", "timeseries"),
        ("GPU all-reduce bus bandwidth (long check)", "slurm_node_gpu_bus_bandwidth_bytes_per_second{%s}"
         % CLUSTER, WHO + " {{node}}", "timeseries"),
        ("Jail volume used", "1 - slurm_jail_volume_free_bytes{%s} / slurm_jail_volume_size_bytes{%s}"
         % (CLUSTER, CLUSTER), WHO, "stat"),
        ("Memory allocated", "sum by (%s, node_set) (slurm_memory_alloc_bytes{%s})" % (BY, CLUSTER),
         WHO + " {{node_set}}", "timeseries"),
    )),
    "slurmkube-queue": ("Slurm queue and scheduler", (
        ("Pending jobs by reason", "sum by (%s, reason) (slurm_jobs_pending{%s})" % (BY, CLUSTER),
         WHO + " {{reason}}", "timeseries"),
        ("Jobs per user", "sum by (%s, user) (slurm_user_jobs{%s})" % (BY, CLUSTER), WHO + " {{user}}",
         "timeseries"),
        ("Scheduling cycle", "slurm_scheduler_cycle_last_seconds{%s}" % CLUSTER, WHO + " main", "timeseries"),
        ("Backfill cycle", "slurm_backfill_cycle_last_seconds{%s}" % CLUSTER, WHO + " backfill", "timeseries"),
        ("RPC rate", "sum by (%s, type) (rate(slurm_rpcs_total{%s}[5m]))" % (BY, CLUSTER), WHO + " {{type}}",
         "timeseries"),
        ("Accounting records waiting", "slurm_dbd_agent_queue_size{%s}" % CLUSTER, WHO + " dbd queue",
         "timeseries"),
        ("Exporter sources answering", "slurm_scrape_success{%s}" % CLUSTER, WHO + " {{source}}", "stat"),
    )),
    "slurmkube-operator": ("slurmkube operator", (
        # The operator itself serves every cluster: these two are not per cluster.
        ("Operators answering", "sum(up{component=\"operator\"})", "up", "stat"),
        ("Leader", "max(slurmkube_operator_leader)", "leader", "stat"),
        ("Reconcile passes by result", "sum by (%s, result) "
         "(rate(slurmkube_operator_reconcile_passes_total{%s}[5m]))" % (BY, CLUSTER),
         WHO + " {{result}}", "timeseries"),
        ("Reconcile pass duration (p90)", "histogram_quantile(0.9, sum by (%s, le) "
         "(rate(slurmkube_operator_reconcile_duration_seconds_bucket{%s}[5m])))" % (BY, CLUSTER),
         WHO, "timeseries"),
        ("API writes", "sum by (%s, kind) (rate(slurmkube_operator_api_writes_total{%s}[5m]))"
         % (BY, CLUSTER), WHO + " {{kind}}", "timeseries"),
        ("API calls by verb (exec: Slurm's commands among them)",
         "sum by (verb) (rate(slurmkube_operator_api_calls_total[5m]))", "{{verb}}", "timeseries"),
        ("Drains, replacements, requeues", "sum by (%s, reason) "
         "(increase(slurmkube_operator_events_total{%s}[1h]))" % (BY, CLUSTER), WHO + " {{reason}}",
         "timeseries"),
        ("Node sets: replicas and in service", "slurmkube_nodeset_replicas{%s}" % CLUSTER,
         WHO + " {{node_set}} {{kind}}", "timeseries"),
        ("Munge key rotation pending", "max by (%s) (slurmkube_munge_key_rotation_pending{%s})"
         % (BY, CLUSTER), WHO, "stat"),
        ("Bridge: pods by state", "sum by (%s, state) (slurmkube_bridge_pods{%s})" % (BY, CLUSTER),
         WHO + " {{state}}", "timeseries"),
        ("Bridge: pod created to bound (p90)", "histogram_quantile(0.9, sum by (%s, le) "
         "(rate(slurmkube_bridge_bind_latency_seconds_bucket{%s}[15m])))" % (BY, CLUSTER), WHO,
         "timeseries"),
    )),
}

# Panels over the operator itself, not one cluster (the test of the dashboards skips them).
OPERATOR_WIDE = ("Operators answering", "Leader", "API calls by verb (exec: Slurm's commands among them)")


def panel(index: int, spec: Panel) -> Dict[str, Any]:
    title, expr, legend, kind = spec
    return {
        "id": index + 1,
        "type": kind,
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": (index % 2) * 12, "y": (index // 2) * 8},
        "targets": [{"refId": "A", "expr": expr, "legendFormat": legend}],
    }


def dashboard(uid: str, title: str, panels: Sequence[Panel]) -> Dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "tags": ["slurm", "slurmkube"],
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus"},
            {"name": "namespace", "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
             "query": "label_values(slurm_up, slurmkube_namespace)", "includeAll": True, "multi": True},
            {"name": "cluster", "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
             "query": "label_values(slurm_up{slurmkube_namespace=~\"$namespace\"}, slurmkube_cluster)",
             "includeAll": True, "multi": True},
        ]},
        "panels": [panel(i, p) for i, p in enumerate(panels)],
    }


def rendered() -> Dict[str, str]:
    return {uid + ".json": json.dumps(dashboard(uid, title, panels), indent=2, sort_keys=True) + "\n"
            for uid, (title, panels) in DASHBOARDS.items()}


def expressions() -> List[str]:
    return [p[1] for _title, panels in DASHBOARDS.values() for p in panels]


def main(argv: Sequence[str]) -> int:
    files = rendered()
    if "--check" in argv:
        stale = [name for name, text in files.items()
                 if not (OUT / name).exists() or (OUT / name).read_text() != text]
        if stale:
            print("stale dashboards (run tools/gen_dashboards.py): %s" % ", ".join(stale), file=sys.stderr)
            return 1
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (OUT / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
