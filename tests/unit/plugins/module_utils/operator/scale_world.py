"""A cluster of many node sets, steady, on the in-memory API, with a Slurm that answers every node
as slurmctld 26.05 printed one on kind (fixtures/slurm/node-26.05.json): for what a pass costs as
node sets and nodes grow (test_reconcile_scale.py, tests/bench/bench_operator_pass.py). The caller
stubs secrets.new_ssh_host_keys (the first pass makes host keys)."""

from __future__ import annotations

import collections
import copy
import datetime
import json
import time
from pathlib import Path
from typing import Any, Callable, Dict, Tuple

from test_reconcile_health import SlurmKube

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R

NODE_ANSWER = Path(__file__).resolve().parents[3] / "fixtures" / "slurm" / "node-26.05.json"
T0 = datetime.datetime(2026, 12, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)
NAMESPACE, CLUSTER = "research", "cpu"
# The calls a pass makes through the Kube client, by verb; exec into the controller is a Slurm call.
VERBS = ("get", "list", "apply", "create", "replace", "merge_patch", "delete", "post_event", "exec")


class CountingKube(SlurmKube):
    """SlurmKube whose controller answers every node as slurmctld 26.05 printed one, counting calls."""

    def __init__(self, node_template: Dict[str, Any]) -> None:
        super().__init__()
        self.node_template = node_template
        self.calls: Dict[str, int] = collections.Counter()
        self.slurm_bytes = 0
        # CPU seconds spent answering (the in-memory API's copies and filters, Slurm's table):
        # the API server's and slurmctld's share, taken out of the pass's.
        self.answering = 0.0

    def exec(self, namespace, pod, container, command, timeout=60):
        answer = super().exec(namespace, pod, container, command, timeout)
        self.slurm_bytes += len(answer[1])
        return answer

    def node(self, name, *states, reason=""):
        self.nodes[name] = dict(copy.deepcopy(self.node_template), name=name, hostname=name,
                                state=list(states), reason=reason)


def counted(kube: CountingKube) -> None:
    """Count every call of the verbs on this instance."""
    for verb in VERBS:
        method = getattr(kube, verb)

        def call(*args: Any, _method: Callable[..., Any] = method, _verb: str = verb, **kwargs: Any) -> Any:
            kube.calls[_verb] += 1
            started = time.process_time()
            try:
                return _method(*args, **kwargs)
            finally:
                kube.answering += time.process_time() - started

        setattr(kube, verb, call)


def steady_world(sets: int, per_set: int) -> Tuple[CountingKube, Dict[str, Any]]:
    """A cluster of `sets` node sets of `per_set` idle nodes each, every pod ready, after the passes
    that made its objects: the next pass has nothing to do."""
    kube = CountingKube(json.loads(NODE_ANSWER.read_text()))
    cluster = {"apiVersion": C.GROUP_VERSION, "kind": C.KIND_CLUSTER,
               "metadata": {"name": CLUSTER, "namespace": NAMESPACE, "uid": "u-1", "generation": 1},
               "spec": {"slurm": {"maxNodeCount": sets * per_set}}}
    for index in range(sets):
        kube.apply({"apiVersion": C.GROUP_VERSION, "kind": C.KIND_NODESET,
                    "metadata": {"name": "s%03d" % index, "namespace": NAMESPACE},
                    "spec": {"clusterName": CLUSTER, "replicas": per_set, "resources": {"cpu": 1, "memory": "1Gi"}}})
    R.Reconciler(kube, clock=lambda: T0).reconcile(cluster)
    kube.pod("%s-controller-0" % CLUSTER, T0 - datetime.timedelta(days=3))
    for index in range(sets):
        base = "%s-s%03d" % (CLUSTER, index)
        for ordinal in range(per_set):
            kube.pod("%s-%d" % (base, ordinal), T0 - datetime.timedelta(days=2))
            kube.node("%s-%d" % (base, ordinal), "IDLE", "DYNAMIC_NORM")
        kube.objects[("StatefulSet", NAMESPACE, base)]["status"] = {"readyReplicas": per_set, "replicas": per_set}
    for _settling in range(2):
        R.Reconciler(kube, clock=lambda: T0).reconcile(cluster)
    counted(kube)
    return kube, cluster
