"""The slurmkube operator: kopf handlers that call the collection's reconciler.

Run: kopf run --all-namespaces images/operator/slurmkube_operator.py
(the collection must be importable as ansible_collections.slurmkube.core).
Handlers stay thin: every decision lives in plugins/module_utils/reconcile.py.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Dict, Mapping

import kopf

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.compare import is_subset
from ansible_collections.slurmkube.core.plugins.module_utils.kube import Kube, api_client
from ansible_collections.slurmkube.core.plugins.module_utils.reconcile import Reconciler

RECONCILE_INTERVAL_SECONDS = 10

_kube: Dict[str, Kube] = {}
_locks: Dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def kube() -> Kube:
    """One client per process, made on first use (in-cluster config or KUBECONFIG)."""
    if "client" not in _kube:
        _kube["client"] = Kube(api_client())
    return _kube["client"]


def cluster_lock(namespace: str, name: str) -> threading.Lock:
    """Event and timer handlers of one cluster never reconcile it at the same time."""
    with _locks_guard:
        return _locks.setdefault("%s/%s" % (namespace, name), threading.Lock())


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Keep kopf's bookkeeping in annotations: the status belongs to the reconciler."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=C.API_GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=C.API_GROUP)
    settings.persistence.finalizer = C.API_GROUP + "/operator"
    settings.posting.level = logging.INFO


def write_status_if_changed(obj: Mapping[str, Any], status: Mapping[str, Any]) -> None:
    """A status equal to the live one is not written (no-op passes make no API writes)."""
    if not is_subset(dict(status), obj.get("status") or {}):
        kube().apply_status(obj, status)


def reconcile_cluster(body: Mapping[str, Any], logger: logging.Logger) -> None:
    """One reconcile pass, its events and status."""
    meta = body["metadata"]
    with cluster_lock(meta["namespace"], meta["name"]):
        live = kube().get(C.GROUP_VERSION, C.KIND_CLUSTER, meta["name"], meta["namespace"])
        if live is None or live["metadata"].get("deletionTimestamp"):
            return
        outcome = Reconciler(kube()).reconcile(live)
        for event in outcome.events:
            kopf.event(body, type=event.kind, reason=event.reason, message=event.message)
        if outcome.applied:
            logger.info("applied %s", ", ".join(outcome.applied))
        write_status_if_changed(live, outcome.status)
        for name, status in outcome.nodeset_status.items():
            nodeset = kube().get(C.GROUP_VERSION, C.KIND_NODESET, name, meta["namespace"])
            if nodeset is not None:
                status = dict(status, observedGeneration=nodeset["metadata"].get("generation", 0))
                write_status_if_changed(nodeset, status)


@kopf.on.resume(C.API_GROUP, C.API_VERSION, C.PLURAL_CLUSTER)
@kopf.on.create(C.API_GROUP, C.API_VERSION, C.PLURAL_CLUSTER)
@kopf.on.update(C.API_GROUP, C.API_VERSION, C.PLURAL_CLUSTER, field="spec")
def cluster_changed(body: kopf.Body, logger: logging.Logger, **_: Any) -> None:
    """A SlurmCluster appeared or its spec changed."""
    reconcile_cluster(body, logger)


@kopf.timer(C.API_GROUP, C.API_VERSION, C.PLURAL_CLUSTER, interval=RECONCILE_INTERVAL_SECONDS)
def cluster_tick(body: kopf.Body, logger: logging.Logger, **_: Any) -> None:
    """Drains, rolls and registrations progress without events: look again regularly."""
    reconcile_cluster(body, logger)


@kopf.on.create(C.API_GROUP, C.API_VERSION, C.PLURAL_NODESET)
@kopf.on.update(C.API_GROUP, C.API_VERSION, C.PLURAL_NODESET, field="spec")
@kopf.on.delete(C.API_GROUP, C.API_VERSION, C.PLURAL_NODESET, optional=True)
def nodeset_changed(body: kopf.Body, logger: logging.Logger, **_: Any) -> None:
    """A NodeSet changed: reconcile the cluster it belongs to."""
    name = (body.get("spec") or {}).get("clusterName")
    cluster = kube().get(C.GROUP_VERSION, C.KIND_CLUSTER, name, body["metadata"]["namespace"]) if name else None
    if cluster is not None:
        reconcile_cluster(cluster, logger)
