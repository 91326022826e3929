"""The slurmkube operator: kopf handlers that call the collection's reconciler.

Run: kopf run --all-namespaces --standalone images/operator/slurmkube_operator.py
(the collection must be importable as ansible_collections.slurmkube.core).
Handlers stay thin: every decision lives in plugins/module_utils/operator/reconcile.py.

Replicas elect a leader through a Lease (plugins/module_utils/operator/leader.py) in the namespace
named by SLURMKUBE_OPERATOR_NAMESPACE; without it (a local `kopf run`) the process leads
alone. Every handler is filtered on leadership and a standby writes nothing, not even
kopf's own annotations, so what it skipped is still news to the leader.

Prometheus metrics (C.OPERATOR_METRICS_PORT): reconcile passes and their durations, API
writes, node steps and requeues by event reason, and where each cluster stands
(plugins/module_utils/operator/telemetry.py).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import kopf
from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics, start_http_server

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import SeenEqual
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube, KubeError, api_client
from ansible_collections.slurmkube.core.plugins.module_utils.operator import telemetry
from ansible_collections.slurmkube.core.plugins.module_utils.operator.bridge import (
    BridgeMemory,
    CycleReport,
    bridge_cycle,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.leader import LeaderElector
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import NodeTemplates
from ansible_collections.slurmkube.core.plugins.module_utils.operator.power import event_reason, power_cycle
from ansible_collections.slurmkube.core.plugins.module_utils.operator.reconcile import Reconciler
from ansible_collections.slurmkube.core.plugins.module_utils.operator.serving import stopping_pod_patch
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import status_unchanged, without_empty_maps
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmError

RECONCILE_INTERVAL_SECONDS = 10
# The bridge's cycle: how soon a pod's Slurm job is submitted, and a started job's pods bound.
BRIDGE_INTERVAL_SECONDS = 2
# The power loop's: how soon a node Slurm resumed for a job gets its pod (the pass comes every 10 s).
POWER_INTERVAL_SECONDS = 2
ELECTION_RETRY_SECONDS = 2

_kube: Dict[str, Kube] = {}
_election: Dict[str, Optional[LeaderElector]] = {}
_locks: Dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()
# Objects a dry run found applied, kept across passes: a timer pass over an unchanged cluster
# then costs reads only (passes of different clusters touch different objects).
SEEN_EQUAL = SeenEqual()
# The on-demand sets' templates the passes rendered: the only ones the power loop makes pods from.
NODE_TEMPLATES = NodeTemplates()

KINDS = {"counter": Counter, "gauge": Gauge, "histogram": Histogram}
disable_created_metrics()  # *_created series would double what Prometheus stores, for nothing we read


def served(metric: telemetry.Metric, labels: Sequence[str] = telemetry.CLUSTER_LABELS) -> Any:
    """The prometheus-client object of one of telemetry's metrics."""
    extra = {"buckets": telemetry.BUCKETS[metric.name]} if metric.kind == "histogram" else {}
    return KINDS[metric.kind](metric.name, metric.help, tuple(labels) + metric.labels, **extra)


LEADER = served(telemetry.LEADER, ())
PASSES = served(telemetry.PASSES)
PASS_SECONDS = served(telemetry.PASS_SECONDS)
WRITES = served(telemetry.WRITES)
API_CALLS = served(telemetry.API_CALLS, ())
EVENTS = served(telemetry.EVENTS)
STATE = {name: served(metric) for name, metric in telemetry.STATE.items()}
BRIDGE_PODS = served(telemetry.BRIDGE_PODS)
BRIDGE_BIND_SECONDS = served(telemetry.BRIDGE_BIND_SECONDS)
BRIDGE_CYCLE_SECONDS = served(telemetry.BRIDGE_CYCLE_SECONDS)
BRIDGE_SLURM_SECONDS = served(telemetry.BRIDGE_SLURM_SECONDS)
BRIDGE_CALLS = served(telemetry.BRIDGE_CALLS)
# The clusters whose bridge gauges are set (namespace/name), so they go when the bridge does.
_bridged: set = set()
# The label values each cluster's state gauges were set with, so a deleted cluster's go too.
_state_labels: Dict[str, set] = {}


def kube() -> Kube:
    """One client per process, made on first use (in-cluster config or KUBECONFIG)."""
    if "client" not in _kube:
        _kube["client"] = Kube(api_client(), observe=lambda verb: API_CALLS.labels(verb).inc())
    return _kube["client"]


def cluster_lock(namespace: str, name: str) -> threading.Lock:
    """Event and timer handlers of one cluster never reconcile it at the same time."""
    with _locks_guard:
        return _locks.setdefault("%s/%s" % (namespace, name), threading.Lock())


def leading(**_: Any) -> bool:
    """Whether this process may act now (the filter of every handler)."""
    elector = _election.get("elector")
    return elector is None or elector.is_leader()


class LeaderOnlyDiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    """kopf records a change as seen even when filters skipped every handler; a standby must not."""

    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        if leading():
            super().store(body=body, patch=patch, essence=essence)


def campaign(elector: LeaderElector, logger: logging.Logger) -> None:
    """Try for the Lease, then renew it, until the process ends.

    A leader that cannot renew in time exits: work in flight must stop before a standby
    may take over, and a fresh process comes back as a standby.
    """
    was_leader = False
    while True:
        try:
            elector.attempt()
        except KubeError as exc:
            logger.warning("leader election: %s", exc)
        if elector.is_leader() and not was_leader:
            logger.info("leading as %s", elector.identity)
        elif was_leader and not elector.is_leader():
            logger.error("lost the lease %s/%s: exiting", elector.namespace, elector.name)
            os._exit(1)
        was_leader = elector.is_leader()
        LEADER.set(1 if was_leader else 0)
        time.sleep(ELECTION_RETRY_SECONDS)


def start_election(logger: logging.Logger) -> None:
    """Elect through a Lease when deployed (the namespace is given), else lead alone."""
    namespace = os.environ.get(C.ENV_OPERATOR_NAMESPACE)
    if not namespace:
        _election["elector"] = None
        LEADER.set(1)
        return
    identity = os.environ.get(C.ENV_OPERATOR_IDENTITY) or socket.gethostname()
    elector = LeaderElector(kube(), namespace, C.OPERATOR_NAME, identity)
    _election["elector"] = elector
    threading.Thread(target=campaign, args=(elector, logger), name="leader-election", daemon=True).start()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, logger: logging.Logger, **_: Any) -> None:
    """Keep kopf's bookkeeping in annotations: the status belongs to the reconciler."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=C.API_GROUP)
    settings.persistence.diffbase_storage = LeaderOnlyDiffBaseStorage(prefix=C.API_GROUP)
    settings.persistence.finalizer = C.API_GROUP + "/operator"
    # Only warnings become Kubernetes Events by themselves: kopf would otherwise post one for
    # every handler that succeeds. Our transitions are posted explicitly.
    settings.posting.level = logging.WARNING
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)  # probes every few seconds
    # Told which namespaces to watch, the operator may not list namespaces or CRDs at cluster
    # scope: kopf's restricted mode takes the names as given instead of retrying refused lists.
    if os.environ.get(C.ENV_WATCH_NAMESPACES):
        settings.scanning.disabled = True
    start_http_server(C.OPERATOR_METRICS_PORT)
    start_election(logger)
    threading.Thread(target=resync_forever, args=(logger,), name="resync", daemon=True).start()
    threading.Thread(target=bridge_forever, args=(logger,), name="bridge", daemon=True).start()
    threading.Thread(target=power_forever, args=(logger,), name="power", daemon=True).start()


@kopf.on.cleanup()
def hand_over(**_: Any) -> None:
    """A leader stopping (rolling update, pod deleted) gives the Lease back: no wait for expiry."""
    elector = _election.get("elector")
    if elector is not None:
        elector.release()


def write_status_if_changed(obj: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """A status equal to the live one is not written (no-op passes make no API writes)."""
    status = without_empty_maps(status)
    if status_unchanged(status, obj.get("status") or {}):
        return False
    kube().apply_status(obj, status)
    return True


def write_nodeset_status(nodeset: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """write_status_if_changed for a NodeSet, which may have been deleted since the pass read it."""
    try:
        return write_status_if_changed(nodeset, status)
    except KubeError:
        meta = nodeset["metadata"]
        if kube().get(C.GROUP_VERSION, C.KIND_NODESET, meta["name"], meta["namespace"]) is None:
            return False
        raise


def forget_cluster(namespace: str, name: str) -> None:
    """A deleted cluster's state gauges go with it (alerts must not fire on what is gone)."""
    for gauge_name, values in _state_labels.pop("%s/%s" % (namespace, name), set()):
        STATE[gauge_name].remove(*values)
    forget_bridge(namespace, name)
    NODE_TEMPLATES.forget(namespace, name)
    _pass_began.pop("%s/%s" % (namespace, name), None)


def forget_bridge(namespace: str, name: str) -> None:
    if "%s/%s" % (namespace, name) in _bridged:
        _bridged.discard("%s/%s" % (namespace, name))
        for state in telemetry.BRIDGE_POD_STATES:
            BRIDGE_PODS.remove(namespace, name, state)


def record_bridge(namespace: str, name: str, report: Optional[CycleReport]) -> None:
    """The bridge's queue, its pods' waits and its calls after a cycle (None: no bridge, no gauges)."""
    if report is None:
        forget_bridge(namespace, name)
        return
    for state, count in report.queue.items():
        BRIDGE_PODS.labels(namespace, name, state).set(count)
    _bridged.add("%s/%s" % (namespace, name))
    for seconds in report.bind_seconds:
        BRIDGE_BIND_SECONDS.labels(namespace, name).observe(seconds)
    BRIDGE_CALLS.labels(namespace, name, "slurm").inc(report.slurm_calls)
    BRIDGE_CALLS.labels(namespace, name, "api").inc(report.api_calls)
    BRIDGE_CYCLE_SECONDS.labels(namespace, name).observe(report.seconds)
    BRIDGE_SLURM_SECONDS.labels(namespace, name).inc(report.slurm_seconds)


def forget_deleted_clusters(clusters: List[Mapping[str, Any]]) -> None:
    """Deleting a cluster calls no handler of ours: the resync notices it is gone."""
    live = {"%s/%s" % (c["metadata"]["namespace"], c["metadata"]["name"]) for c in clusters}
    for key in set(_state_labels) - live:
        namespace, name = key.split("/", 1)
        with cluster_lock(namespace, name):
            forget_cluster(namespace, name)


def record_state(namespace: str, name: str, status: Mapping[str, Any],
                 nodeset_status: Mapping[str, Mapping[str, Any]], wanted: Mapping[str, int]) -> None:
    """Set the cluster's state gauges; a node set that left is forgotten."""
    now = {(g.name, (namespace, name) + tuple(value for _name, value in g.labels)): g.value
           for g in telemetry.cluster_gauges(status, nodeset_status, wanted)}
    key = "%s/%s" % (namespace, name)
    for gone in _state_labels.get(key, set()) - set(now):
        STATE[gone[0]].remove(*gone[1])
    for (gauge_name, values), value in now.items():
        STATE[gauge_name].labels(*values).set(value)
    _state_labels[key] = set(now)


# When each cluster's last pass began (time.monotonic()), by namespace/name.
_pass_began: Dict[str, float] = {}


def reconcile_cluster(body: Mapping[str, Any], logger: logging.Logger, seen_at: Optional[float] = None) -> None:
    """One reconcile pass, its events and status; nothing at all on a standby. A change seen at
    `seen_at` needs no pass of its own once one has begun since: that pass read it (a `kubectl
    scale` of 100 NodeSets is 100 events, and made 100 passes of the whole cluster one after another)."""
    if not leading():
        return
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    key = "%s/%s" % (namespace, name)
    with cluster_lock(namespace, name):
        if seen_at is not None and _pass_began.get(key, float("-inf")) > seen_at:
            return
        _pass_began[key] = time.monotonic()
        live = kube().get(C.GROUP_VERSION, C.KIND_CLUSTER, name, namespace)
        if live is None or live["metadata"].get("deletionTimestamp"):
            forget_cluster(namespace, name)
            return
        started = time.monotonic()
        try:
            outcome = Reconciler(kube(), seen=SEEN_EQUAL, templates=NODE_TEMPLATES).reconcile(live)
        except Exception:
            PASSES.labels(namespace, name, telemetry.RESULT_ERROR).inc()
            raise
        finally:
            PASS_SECONDS.labels(namespace, name).observe(time.monotonic() - started)
        PASSES.labels(namespace, name, telemetry.pass_result(outcome.status)).inc()
        for event in outcome.events:
            kube().post_event(live, event.kind, event.reason, event.message, C.OPERATOR_NAME)
            EVENTS.labels(namespace, name, event.reason).inc()
        WRITES.labels(namespace, name, "event").inc(len(outcome.events))
        WRITES.labels(namespace, name, "object").inc(len(outcome.applied))
        if outcome.applied:
            logger.info("applied %s (pass of %.1f s)", ", ".join(outcome.applied), time.monotonic() - started)
        statuses = int(write_status_if_changed(live, outcome.status))
        wanted: Dict[str, int] = {}
        # The NodeSets as the pass read them: their status says what the pass acted on.
        for nodeset_name, status in outcome.nodeset_status.items():
            nodeset = outcome.nodesets[nodeset_name]
            wanted[nodeset_name] = int((nodeset.get("spec") or {}).get("replicas", 0))
            status = dict(status, observedGeneration=nodeset["metadata"].get("generation", 0))
            statuses += write_nodeset_status(nodeset, status)
        WRITES.labels(namespace, name, "status").inc(statuses)
        record_state(namespace, name, outcome.status, outcome.nodeset_status, wanted)


@kopf.on.resume(C.API_GROUP, C.API_VERSION, C.PLURAL_CLUSTER, when=leading)
@kopf.on.create(C.API_GROUP, C.API_VERSION, C.PLURAL_CLUSTER, when=leading)
@kopf.on.update(C.API_GROUP, C.API_VERSION, C.PLURAL_CLUSTER, field="spec", when=leading)
def cluster_changed(body: kopf.Body, logger: logging.Logger, **_: Any) -> None:
    """A SlurmCluster appeared or its spec changed."""
    reconcile_cluster(body, logger, seen_at=time.monotonic())


def watched_clusters() -> List[Dict[str, Any]]:
    """Every SlurmCluster this operator manages (the namespaces kopf was told to watch)."""
    namespaces = [ns for ns in os.environ.get(C.ENV_WATCH_NAMESPACES, "").split(",") if ns] or [None]
    return [obj for ns in namespaces for obj in kube().list(C.GROUP_VERSION, C.KIND_CLUSTER, ns)]


def every_cluster_forever(interval: float, what: str, act: Callable[[Mapping[str, Any], logging.Logger], None],
                          logger: logging.Logger, expected: Tuple[type, ...] = (),
                          seen: Callable[[List[Dict[str, Any]]], None] = lambda clusters: None) -> None:
    """ACT on every watched cluster each INTERVAL while this process leads. SEEN gets the clusters
    first; an EXPECTED error of one cluster is a warning, any other is logged with its trace, and
    neither stops the others' turns."""
    while True:
        time.sleep(interval)
        if not leading():
            continue
        try:
            clusters = watched_clusters()
        except KubeError as exc:
            logger.warning("%s: %s", what, exc)
            continue
        seen(clusters)
        for cluster in clusters:
            meta = cluster["metadata"]
            try:
                act(cluster, logger)
            except expected as exc:  # the next turn tries again
                logger.warning("%s of %s/%s: %s", what, meta["namespace"], meta["name"], exc)
            except Exception:  # one broken cluster must not stop the others' turns
                logger.exception("%s of %s/%s failed", what, meta["namespace"], meta["name"])


def resync_forever(logger: logging.Logger) -> None:
    """Drains, rolls and registrations progress without events: look at every cluster regularly.

    Not a kopf timer: kopf puts a finalizer on every object with a timer, and a cluster
    whose operator is gone (uninstalled first, or its namespace deleted) could never be
    deleted. Nothing here needs one: owner references delete what a cluster owns.
    """
    every_cluster_forever(RECONCILE_INTERVAL_SECONDS, "resync", reconcile_cluster, logger,
                          seen=forget_deleted_clusters)


_bridge_memory: Dict[str, BridgeMemory] = {}


def bridge_cluster(cluster: Mapping[str, Any], logger: logging.Logger) -> None:
    """One bridge cycle of a cluster, logged when it acted."""
    namespace, name = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
    report = bridge_cycle(kube(), cluster, _bridge_memory)
    record_bridge(namespace, name, report)
    if report is not None and report.acted:
        logger.info("bridge of %s/%s: %s", namespace, name, report.summary())


def bridge_forever(logger: logging.Logger) -> None:
    """The bridge's cycles, apart from the reconcile passes: a pod waits seconds, not a resync."""
    every_cluster_forever(BRIDGE_INTERVAL_SECONDS, "bridge", bridge_cluster, logger, expected=(KubeError, SlurmError))


def power_cluster(cluster: Mapping[str, Any], logger: logging.Logger) -> None:
    """One power cycle of a cluster (operator/power.py), never beside its pass; logged when it acted."""
    namespace, name = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
    with cluster_lock(namespace, name):
        report = power_cycle(kube(), cluster, NODE_TEMPLATES)
    if report is not None and report.actions:
        for action in report.actions:
            EVENTS.labels(namespace, name, event_reason(action.kind)).inc()
        WRITES.labels(namespace, name, "event").inc(len(report.actions))
        logger.info("power of %s/%s: %s", namespace, name,
                    ", ".join("%s %s" % (a.kind, a.node) for a in report.actions))


def power_forever(logger: logging.Logger) -> None:
    """The power cycles, apart from the passes: a resumed node's pod is made within seconds."""
    every_cluster_forever(POWER_INTERVAL_SECONDS, "power", power_cluster, logger, expected=(KubeError, SlurmError))


@kopf.on.create(C.API_GROUP, C.API_VERSION, C.PLURAL_NODESET, when=leading)
@kopf.on.update(C.API_GROUP, C.API_VERSION, C.PLURAL_NODESET, field="spec", when=leading)
@kopf.on.delete(C.API_GROUP, C.API_VERSION, C.PLURAL_NODESET, optional=True, when=leading)
def nodeset_changed(body: kopf.Body, logger: logging.Logger, **_: Any) -> None:
    """A NodeSet changed: reconcile the cluster it belongs to."""
    seen_at = time.monotonic()
    name = (body.get("spec") or {}).get("clusterName")
    cluster = kube().get(C.GROUP_VERSION, C.KIND_CLUSTER, name, body["metadata"]["namespace"]) if name else None
    if cluster is not None:
        reconcile_cluster(cluster, logger, seen_at=seen_at)


@kopf.on.event("v1", "pods", labels={C.LABEL_COMPONENT: C.COMPONENT_CONTROLLER, C.LABEL_SERVING: "true"},
               when=leading)
def controller_pod_seen(body: kopf.Body, logger: logging.Logger, **_: Any) -> None:
    """A slurmctld pod being deleted leaves its Service now, not when it stops (operator/serving.py)."""
    patch = stopping_pod_patch(body)
    if patch is None:
        return
    try:
        kube().merge_patch("v1", "Pod", body["metadata"]["name"], body["metadata"]["namespace"], patch)
    except KubeError as exc:  # gone already: nothing left to route to
        logger.warning("could not take stopping pod %s out of its Service: %s", body["metadata"]["name"], exc)
        return
    logger.info("stopping pod %s is out of its Service", body["metadata"]["name"])
