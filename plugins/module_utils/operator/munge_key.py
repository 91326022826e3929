# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pass's step that brings every daemon to the munge key in the cluster's Secret: it asks
each pod which key it runs and has mounted, has the kubelets of pods that have not mounted the
new key yet refresh their volumes (volume_refresh.py), and restarts munged in place in the order
plan_munge_key.py plans."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube, KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import (
    pod_running,
)
from ansible_collections.slurmkube.core.plugins.module_utils.keys import (
    key_fingerprint,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import munge_secret_name
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import KeyState, Pass
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_munge_key import (
    KeyView,
    parse_key_status,
    plan_key_rollout,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Event
from ansible_collections.slurmkube.core.plugins.module_utils.operator.volume_refresh import refresh_pods
from ansible_collections.slurmkube.core.plugins.module_utils.render.secrets import (
    secret_value,
)


def roll_munge_key(p: Pass) -> None:
    """Bring every daemon to the key in the munge Secret (see plan_munge_key) and note which one runs.

    A pass where nothing changed reads only the Secret: the pods are asked only while
    the Secret's key differs from the one recorded in the status.
    """
    p.key = munge_key_state(p.kube, p.cluster, p.previous_status.get("mungeKey", ""), p.events)


def munge_key_state(kube: Kube, cluster: SlurmCluster, in_use: str, events: List[Event]) -> KeyState:
    """The key the daemons run with once this pass's part of a rotation is done."""
    secret = kube.get("v1", "Secret", munge_secret_name(cluster), cluster.namespace)
    if secret is None:
        return KeyState(in_use, "the munge key Secret %s is missing" % munge_secret_name(cluster))
    target = key_fingerprint(secret_value(secret, C.MUNGE_KEY_SECRET_KEY))
    if not in_use or in_use == target:
        # A new cluster's pods start with the Secret's key.
        return KeyState(target, None)
    pods = munge_pods(kube, cluster)
    views, unreadable = key_views(kube, cluster, pods)
    if unreadable:
        return KeyState(in_use, "cannot read the munge key of %s" % "; ".join(unreadable))
    plan = plan_key_rollout(target, views)
    if plan.waiting:
        refresh_pods(kube, cluster.namespace, [pod for pod in pods if pod["metadata"]["name"] in plan.waiting],
                     C.ANNOTATION_MUNGE_KEY, target)
        return KeyState(in_use, "munge key %s not mounted yet in %s" % (target, ", ".join(plan.waiting)))
    for batch in plan.batches:
        failed = [problem for problem in (switch_key(kube, cluster, views, pod, target) for pod in batch) if problem]
        if failed:
            events.append(Event("Warning", "MungeKeyRotation", "; ".join(failed)))
            return KeyState(in_use, "; ".join(failed))
    events.append(Event("Normal", "MungeKeyRotated", "every daemon runs with munge key %s" % target))
    return KeyState(target, None)


def munge_pods(kube: Kube, cluster: SlurmCluster) -> List[Dict[str, Any]]:
    """The cluster's running pods that run a munged."""
    pods = kube.list("v1", "Pod", cluster.namespace, {C.LABEL_CLUSTER: cluster.name})
    return [pod for pod in pods if pod_running(pod)
            and (pod["metadata"].get("labels") or {}).get(C.LABEL_COMPONENT) in C.MUNGE_DAEMON_CONTAINERS]


def key_views(kube: Kube, cluster: SlurmCluster, pods: Sequence[Mapping[str, Any]]) -> Tuple[List[KeyView], List[str]]:
    """The keys of these running pods with a munged; and the pods that could not say, with why."""
    views: List[KeyView] = []
    unreadable: List[str] = []
    for pod in pods:
        name = pod["metadata"]["name"]
        component = pod["metadata"]["labels"][C.LABEL_COMPONENT]
        try:
            code, out, err = kube.exec(cluster.namespace, name, C.MUNGE_DAEMON_CONTAINERS[component],
                                       [C.MUNGE_KEY_PROGRAM, "status"])
        except KubeError as exc:
            unreadable.append("%s (%s)" % (name, exc))
            continue
        keys = parse_key_status(out) if code == 0 else None
        if keys is None:
            unreadable.append("%s (%s)" % (name, (err or out).strip()[-200:]))
            continue
        views.append(KeyView(name, component, keys[0], keys[1]))
    return views, unreadable


def switch_key(kube: Kube, cluster: SlurmCluster, views: Sequence[KeyView], pod: str, target: str) -> str:
    """Restart munged in POD with the mounted key; what went wrong, or ''."""
    component = next(v.component for v in views if v.pod == pod)
    try:
        code, out, err = kube.exec(cluster.namespace, pod, C.MUNGE_DAEMON_CONTAINERS[component],
                                   [C.MUNGE_KEY_PROGRAM, "switch", target])
    except KubeError as exc:
        return "%s: %s" % (pod, exc)
    return "" if code == 0 else "%s: %s" % (pod, (err or out).strip()[-200:])
