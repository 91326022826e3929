"""The operator program's metrics as Prometheus reads them: the names telemetry.py declares, a
cluster's state gauges set after a pass and gone once the cluster is."""

from __future__ import annotations

import importlib.util
import logging

import pytest
from collection_path import REPO
from prometheus_client import REGISTRY, generate_latest

from ansible_collections.slurmkube.core.plugins.module_utils.operator import telemetry
from ansible_collections.slurmkube.core.plugins.module_utils.operator.bridge import CycleReport
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_nodes import NodeAction
from ansible_collections.slurmkube.core.plugins.module_utils.operator.power import PowerReport

PROGRAM = REPO / "images" / "operator" / "slurmkube_operator.py"
SPEC = importlib.util.spec_from_file_location("slurmkube_operator", PROGRAM)
OPERATOR = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(OPERATOR)

READY = {"type": "Ready", "status": "True"}


def samples() -> dict:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in generate_latest(REGISTRY).decode().splitlines() if line.startswith("slurmkube_")}


def test_served_names_are_the_declared_ones():
    OPERATOR.PASSES.labels("hpc", "a", "ok").inc()
    OPERATOR.PASS_SECONDS.labels("hpc", "a").observe(0.2)
    OPERATOR.WRITES.labels("hpc", "a", "status").inc()
    OPERATOR.API_CALLS.labels("get").inc()
    OPERATOR.EVENTS.labels("hpc", "a", "NodeDrain").inc()
    cluster = {"nodes": {"desired": 1, "ready": 1}, "controller": {"serving": "a-controller-0", "standby": []},
               "conditions": [READY], "controlPlane": {"controller": True, "rest": True},
               "backup": {"lastSuccessTime": "2026-12-01T02:31:00Z"}}
    OPERATOR.record_state("hpc", "a", cluster, {"cpu": {"readyReplicas": 1, "conditions": [READY]}}, {"cpu": 1})
    OPERATOR.record_bridge("hpc", "a", CycleReport(slurm_calls=1, api_calls=3, bind_seconds=[4.0]))
    names = {key.split("{")[0] for key in samples()}
    assert names == set(telemetry.served_names())


def test_a_cluster_gone_from_the_resync_takes_its_gauges_along():
    status = {"nodes": {"desired": 2, "ready": 1}, "conditions": []}
    OPERATOR.record_state("hpc", "b", status, {"cpu": {"readyReplicas": 1}}, {"cpu": 2})
    OPERATOR.record_state("hpc", "c", status, {}, {})
    ready = 'slurmkube_nodeset_ready{node_set="cpu",slurmkube_cluster="b",slurmkube_namespace="hpc"}'
    assert samples()[ready] == 0
    # A node set that left is forgotten at the next pass.
    OPERATOR.record_state("hpc", "b", status, {}, {})
    assert ready not in samples()
    OPERATOR.forget_deleted_clusters([{"metadata": {"namespace": "hpc", "name": "c"}}])
    clusters = {key for key in samples() if key.startswith("slurmkube_cluster_nodes")}
    assert clusters and all('slurmkube_cluster="c"' in key for key in clusters), clusters


def test_the_bridges_queue_waits_and_calls_are_served_and_its_gauges_go_with_it():
    report = CycleReport(slurm_calls=2, api_calls=5, bind_seconds=[3.0, 40.0], seconds=2.5, slurm_seconds=1.5)
    report.queue.update(pending=3, held=1, bound=2)
    OPERATOR.record_bridge("hpc", "d", report)
    labels = 'slurmkube_cluster="d",slurmkube_namespace="hpc"'
    now = samples()
    assert now['slurmkube_bridge_pods{%s,state="pending"}' % labels] == 3
    assert now['slurmkube_bridge_pods{%s,state="held"}' % labels] == 1
    assert now['slurmkube_bridge_bind_latency_seconds_count{%s}' % labels] == 2
    assert now['slurmkube_bridge_bind_latency_seconds_bucket{le="5.0",%s}' % labels] == 1
    assert now['slurmkube_bridge_calls_total{kind="slurm",%s}' % labels] == 2
    assert now['slurmkube_bridge_cycle_seconds_count{%s}' % labels] == 1
    assert now['slurmkube_bridge_cycle_seconds_sum{%s}' % labels] == 2.5
    assert now['slurmkube_bridge_slurm_seconds_total{%s}' % labels] == 1.5
    OPERATOR.record_bridge("hpc", "d", None)  # the cluster's bridge turned off
    assert not [key for key in samples() if key.startswith("slurmkube_bridge_pods") and labels in key]


def test_a_power_cycle_counts_its_events_as_a_pass_does(monkeypatch):
    report = PowerReport([NodeAction("make-pod", "hpc-burst-0", "Slurm resumed hpc-burst-0")])
    # The loop makes pods only from the templates the operator's passes rendered.
    monkeypatch.setattr(OPERATOR, "power_cycle",
                        lambda kube, cluster, kept: report if kept is OPERATOR.NODE_TEMPLATES else None)
    monkeypatch.setattr(OPERATOR, "kube", lambda: None)
    before = samples().get('slurmkube_operator_events_total{reason="NodeMakePod",slurmkube_cluster="e",'
                           'slurmkube_namespace="hpc"}', 0)
    OPERATOR.power_cluster({"metadata": {"namespace": "hpc", "name": "e"}}, logging.getLogger("test"))
    assert samples()['slurmkube_operator_events_total{reason="NodeMakePod",slurmkube_cluster="e",'
                     'slurmkube_namespace="hpc"}'] == before + 1


class Pass(Exception):
    """What the stand-in reconciler raises: a pass ran."""


def test_a_change_seen_before_a_pass_began_makes_no_pass_of_its_own(monkeypatch):
    cluster = {"metadata": {"namespace": "hpc", "name": "f"}}
    passes = []

    class Counting:
        def __init__(self, *args, **kwargs):
            pass

        def reconcile(self, live):
            passes.append(OPERATOR.time.monotonic())
            raise Pass()

    class Api:
        def get(self, *args):
            return cluster

    monkeypatch.setattr(OPERATOR, "leading", lambda: True)
    monkeypatch.setattr(OPERATOR, "kube", Api)
    monkeypatch.setattr(OPERATOR, "Reconciler", Counting)
    seen_before = OPERATOR.time.monotonic()
    for seen_at in (seen_before, None):  # a change, then the resync (which always runs)
        with pytest.raises(Pass):
            OPERATOR.reconcile_cluster(cluster, logging.getLogger("test"), seen_at=seen_at)
    assert len(passes) == 2
    # Seen before the last pass began (one of 100 NodeSets scaled at once): read by it already.
    OPERATOR.reconcile_cluster(cluster, logging.getLogger("test"), seen_at=seen_before)
    assert len(passes) == 2
    with pytest.raises(Pass):  # seen after it began: a pass of its own
        OPERATOR.reconcile_cluster(cluster, logging.getLogger("test"), seen_at=OPERATOR.time.monotonic())
    assert len(passes) == 3
