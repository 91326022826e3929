"""The shipped dashboards are what tools/gen_dashboards.py makes, and they and the alert rules
ask only for metrics the exporter or the operator serves (or Prometheus' own `up`)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import yaml
from example_clusters import FIXTURES

from ansible_collections.slurmkube.core.plugins.module_utils.operator import telemetry
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.metrics import (
    health_families,
    jail_families,
    jail_usage_families,
    job_families,
    long_check_families,
    node_families,
    scheduler_families,
    up_family,
)

REPO = FIXTURES.parents[2]


def generator():
    """tools/gen_dashboards.py, imported from its file (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location("gen_dashboards", REPO / "tools" / "gen_dashboards.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def served_names() -> set:
    """Every family name the exporter serves (each family is there even with no samples) and
    every sample name of the operator."""
    slurm = FIXTURES / "slurm"
    families = node_families((slurm / "nodes-drained.json").read_text()) + \
        job_families("main|PENDING|Priority|alice\n") + \
        scheduler_families((slurm / "sdiag.json").read_text()) + up_family({"nodes": True}) + \
        jail_families(1, 1, 1, 1) + jail_usage_families({}, None) + health_families({}, set()) + \
        long_check_families({}, set())
    return {f.name for f in families} | set(telemetry.served_names())


def asked(expression: str) -> set:
    return set(re.findall(r"\b(slurm(?:kube)?_[a-z_]+)\b", expression)) - {"slurmkube_cluster", "slurmkube_namespace"}


def rule_expressions() -> list:
    rules = yaml.safe_load((REPO / "monitoring" / "prometheus" / "slurmkube.rules.yml").read_text())
    return [r["expr"] for group in rules["groups"] for r in group["rules"]]


def test_committed_dashboards_equal_generated():
    result = subprocess.run([sys.executable, str(REPO / "tools" / "gen_dashboards.py"), "--check"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_dashboards_and_rules_ask_for_served_metrics_only():
    wanted = {name for expr in generator().expressions() + rule_expressions() for name in asked(expr)}
    assert wanted <= served_names(), wanted - served_names()


def test_there_is_a_dashboard_for_the_overview_nodes_queue_and_operator():
    assert set(generator().DASHBOARDS) == {"slurmkube-overview", "slurmkube-nodes", "slurmkube-queue",
                                           "slurmkube-operator"}


def groupings(expression: str) -> list:
    """The label lists of every `by (...)` in an expression."""
    return [[label.strip() for label in found.split(",")] for found in re.findall(r"\bby \(([^)]*)\)", expression)]


def test_two_clusters_of_one_name_in_two_namespaces_stay_apart_in_every_panel():
    """Issue 39: each cluster panel selects the namespace and the cluster, every sum keeps both,
    and its legend names both; only the operator's own panels are not per cluster."""
    gen = generator()
    for _title, panels in gen.DASHBOARDS.values():
        for title, expr, legend, _kind in panels:
            if title in gen.OPERATOR_WIDE:
                assert "slurmkube_cluster" not in expr, title
                continue
            assert 'slurmkube_namespace=~"$namespace",slurmkube_cluster=~"$cluster"' in expr, title
            assert all({"slurmkube_namespace", "slurmkube_cluster"} <= set(by) for by in groupings(expr)), title
            assert legend.startswith("{{slurmkube_namespace}}/{{slurmkube_cluster}}"), title


def test_every_rule_that_sums_keeps_the_namespace_and_the_cluster_and_every_alert_has_a_runbook():
    rules = yaml.safe_load((REPO / "monitoring" / "prometheus" / "slurmkube.rules.yml").read_text())
    runbooks = (REPO / "docs" / "runbooks.md").read_text()
    for rule in (r for group in rules["groups"] for r in group["rules"]):
        assert all({"slurmkube_namespace", "slurmkube_cluster"} <= set(by) for by in groupings(rule["expr"])), rule
        annotations = rule["annotations"]
        assert annotations["description"] and annotations["summary"], rule["alert"]
        assert annotations["runbook"] == "docs/runbooks.md#" + rule["alert"].lower(), rule["alert"]
        assert "\n## %s\n" % rule["alert"] in runbooks, rule["alert"]
        if "slurmkube_cluster" in annotations["summary"]:
            assert "{{ $labels.slurmkube_namespace }}/{{ $labels.slurmkube_cluster }}" in annotations["summary"]


def test_every_family_the_exporter_serves_is_in_the_community_name_mapping():
    """docs/metrics.md maps the exporter's names to the community exporter's: no family left out."""
    documented = set(re.findall(r"`(slurm_[a-z_]+)", (REPO / "docs" / "metrics.md").read_text()))
    exporter = {name for name in served_names() if not name.startswith("slurmkube_")}
    assert sorted(exporter - documented) == []
