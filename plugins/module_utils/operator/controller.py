# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The slurmctld pods: which one serves, which stand by, a failover seen, and their replacement
when their template changed.

Only the serving controller is Ready (render/controller.py), so the StatefulSet cannot roll its
pods and the operator does (OnDelete): one pod at a time, only while every controller is up and
one serves, the standbys first and the serving one last. A primary that starts takes control back
from a backup (Slurm's own behaviour), so a cluster rolled this way ends with its primary serving.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import apply_changed, owned_by
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import (
    last_ready_pod,
    pod_ready,
    pod_running,
    pods_by_name,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import Controllers, Pass
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_upgrade import is_slurm_config
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Event


def serving_pod(pods: Sequence[Mapping[str, Any]]) -> str:
    """The serving controller's name: the Ready one, of two the one Ready last (k8s/pods.py)."""
    pod = last_ready_pod(pods)
    return pod["metadata"]["name"] if pod else ""


def outdated_pods(sts: Optional[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]) -> Optional[Tuple[str, ...]]:
    """The pods whose revision is not the StatefulSet's latest; None while its controller has not
    seen its latest spec (its revision may be about to change)."""
    if not sts:
        return None
    status = sts.get("status") or {}
    if status.get("observedGeneration") != sts["metadata"].get("generation") or not status.get("updateRevision"):
        return None
    return tuple(pod["metadata"]["name"] for pod in pods
                 if (pod["metadata"].get("labels") or {}).get(C.REVISION_LABEL) != status["updateRevision"])


def controllers_of(sts: Optional[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], cluster: str,
                   desired: int) -> Controllers:
    """Where each wanted controller stands (pods of ordinals beyond `desired` count only as outdated
    or serving: they are on their way out)."""
    serving = serving_pod(pods)
    running = {pod["metadata"]["name"] for pod in pods if pod_running(pod) or pod_ready(pod)}
    wanted = [names.controller_pod(cluster, i) for i in range(desired)]
    return Controllers(
        desired=desired,
        serving=serving,
        standing_by=tuple(name for name in wanted if name in running and name != serving),
        down=tuple(name for name in wanted if name not in running),
        outdated=outdated_pods(sts, pods),
        leaving=tuple(pod["metadata"]["name"] for pod in pods if pod["metadata"]["name"] not in wanted),
        images=tuple(sorted({container["image"] for pod in pods
                             for container in (pod.get("spec") or {}).get("containers") or ()
                             if container["name"] == C.CONTAINER_CONTROLLER})),
    )


def next_replacement(c: Optional[Controllers]) -> Optional[str]:
    """The controller pod to replace now: none while one is down, none serves or one is leaving
    (a replacement would leave the cluster without a controller, or without the one that is
    coming up; and a serving controller hands control to a backup that answers as it stops, which
    must not be one on its way out); a standing-by one first, the serving one last."""
    if c is None or not c.outdated or c.down or not c.serving or c.leaving:
        return None
    standing = [name for name in c.standing_by if name in c.outdated]
    if standing:
        return standing[0]
    return c.serving if c.serving in c.outdated else None


def put_held_slurm_config(p: Pass) -> None:
    """The Slurm configuration files this release renders, held while an earlier release's
    slurmctld ran (apply.without_slurm_config), written before its pod goes: the new one reads
    them as it starts. Not reconfigured: the earlier slurmctld stops with the files it read."""
    objects = [owned_by(obj, p.cluster_obj) for obj in p.rendered.objects if is_slurm_config(p.cluster.name, obj)]
    p.applied.extend("%s/%s" % (a.obj["kind"], a.obj["metadata"]["name"])
                     for a in apply_changed(p.kube, objects, seen=p.seen))


def failover_events(previous: Mapping[str, Any], c: Controllers) -> List[Event]:
    """A Warning when another controller serves than the last pass found serving."""
    before = str((previous.get("controller") or {}).get("serving") or "")
    if not before or not c.serving or before == c.serving:
        return []
    return [Event("Warning", "ControllerFailover", "slurmctld on %s serves; %s served before" % (c.serving, before))]


def read_controllers(p: Pass) -> None:
    """Find which controller serves and which stand by (a Warning when another serves than before)."""
    cluster = p.cluster
    sts = p.kube.get("apps/v1", "StatefulSet", names.controller(cluster.name), cluster.namespace)
    pods = pods_by_name(p.kube, cluster.namespace, names.selector_labels(cluster.name, C.COMPONENT_CONTROLLER))
    p.controllers = controllers_of(sts, pods, cluster.name, cluster.spec.controller.replicas)
    p.events.extend(failover_events(p.previous_status, p.controllers))


def sees_a_backup(p: Pass, pod: str) -> bool:
    """Whether the serving controller POD would hand control to a backup as it stops: its stop
    hook's own answer (its slurm.conf names the backup, which answers a ping)."""
    rc, _out, _err = p.kube.exec(p.cluster.namespace, pod, C.CONTAINER_CONTROLLER,
                                 [C.CONTROLLER_STOP_PROGRAM, "--hand-over-to", str(C.SLURMCTLD_PORT)])
    return rc == 0


def replace_outdated_controller(p: Pass) -> None:
    """Delete one controller pod whose template is outdated, when next_replacement allows it (as
    the pass read them: a template this pass applied is taken up by the next one). The serving
    one, with backups standing by, only once it sees one to hand control to: a primary made
    before its first backup learns of it when the kubelet refreshes its slurm.conf (a minute or
    so); replaced before, it would leave the cluster without a controller for SlurmctldTimeout
    and more (the stop hook's header)."""
    c = p.controllers
    pod = next_replacement(c)
    if pod is None or c is None:
        return
    if pod == c.serving and c.standing_by and not sees_a_backup(p, pod):
        p.controllers = c._replace(hand_over_unseen=True)
        return
    if "controller" in (p.slurm_state.earlier or {}):
        put_held_slurm_config(p)
    p.kube.delete("v1", "Pod", pod, p.cluster.namespace)
    role = "the serving controller" if pod == c.serving else "a standby controller"
    p.events.append(Event("Normal", "ControllerReplaced", "replacing %s, %s, for its new template" % (pod, role)))
