# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pass's steps that act on Slurm's nodes: drain, requeue, delete and resume them for
scale-downs, updates, replacements and evictions (decided by plan_nodes.py), mark the worker pods
an eviction may take, explain unresponsive nodes, and retire deleted node sets."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import (
    host_lost_since,
    pods_by_name,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    nodeset_object_name,
    on_demand,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import JobNotRequeued, Pass
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_nodes import (
    RETIRE_DRAIN_TIMEOUT_SECONDS,
    NodeAction,
    PodView,
    evictable,
    plan_evictions,
    plan_lost_hosts,
    plan_replacements,
    plan_reregistration,
    plan_scale,
    plan_update,
    worker_pods,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_power import (
    node_pod,
    plan_power,
    plan_powered_down_updates,
    template_revision,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Event
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import (
    SlurmControl,
    SlurmError,
    SlurmNode,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.drain import fast_check_may_drain, health_reason
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.runner import node_report

# NoSchedule taints that announce a node's removal (cluster-autoscaler, Karpenter) before
# its pods are evicted; `kubectl drain` cordons instead (spec.unschedulable).
REMOVAL_TAINTS = frozenset(("ToBeDeletedByClusterAutoscaler", "karpenter.sh/disrupted", "karpenter.sh/disruption"))
ACTIVE_JOB_STATES = frozenset(("RUNNING", "SUSPENDED"))


def host_is_leaving(node: Mapping[str, Any]) -> bool:
    """A Kubernetes node being emptied: cordoned, or tainted for removal."""
    spec = node.get("spec") or {}
    return bool(spec.get("unschedulable")) or any(t.get("key") in REMOVAL_TAINTS for t in spec.get("taints") or [])


def may_explain(node: SlurmNode) -> bool:
    """An unresponsive node whose drain is the fast check's to set (see slurm/drain.py)."""
    return not node.responding and fast_check_may_drain(node)


def act_on_nodes(p: Pass) -> None:
    """Drain, requeue, delete and resume nodes for scale-downs, updates, replacements and
    evictions; mark the pods an eviction may take now. Nothing while Slurm cannot be asked."""
    slurm, slurm_nodes = p.slurm, p.slurm_nodes
    if slurm is None or slurm_nodes is None:
        return
    cluster, now = p.cluster, p.clock()
    hosts = p.kube.list("v1", "Node")
    leaving_hosts = frozenset(h["metadata"]["name"] for h in hosts if host_is_leaving(h))
    lost_hosts = {h["metadata"]["name"]: host_lost_since(h) for h in hosts if host_lost_since(h) is not None}
    # One list call for every node set's pods.
    by_nodeset: Dict[str, List[Dict[str, Any]]] = {}
    for pod in pods_by_name(p.kube, cluster.namespace, names.selector_labels(cluster.name, C.COMPONENT_WORKER)):
        by_nodeset.setdefault((pod["metadata"].get("labels") or {}).get(C.LABEL_NODESET, ""), []).append(pod)
    for nodeset in p.nodesets:
        if nodeset.name not in p.scaling:
            continue
        live, scale = p.scaling[nodeset.name]
        base = nodeset_object_name(nodeset)
        every_pod = worker_pods(by_nodeset.get(nodeset.name, []), leaving_hosts, lost_hosts)
        pods = [pod for pod in every_pod if pod.name not in scale.leaving]
        template = rendered_template(p, base) if on_demand(nodeset) else None
        target = template_revision(template) if template is not None \
            else (live.get("status") or {}).get("updateRevision") or ""
        update = plan_update(pods, target, slurm_nodes, now) if target else []
        # A rolling update replaces pods itself: replacements wait until it is done.
        replace = plan_replacements(pods, slurm_nodes, now) \
            if cluster.spec.health_checks.replace_drained_nodes and not update else []
        evict = plan_evictions(pods, slurm_nodes, now, nodeset.spec.drain_timeout_seconds)
        gone = plan_lost_hosts(every_pod, slurm_nodes, now, nodeset.spec.lost_node_timeout_seconds)
        if template is not None:
            # Slurm's power states decide which nodes have pods; a deleted pod of a node that stays
            # up (an update, a replacement, a lost host) is made again from the template.
            power = plan_power(base, scale.replicas, nodeset.spec.replicas, every_pod, slurm_nodes) \
                + plan_powered_down_updates(base, scale.replicas, slurm_nodes)
            actions = scale.actions + update + replace + evict + gone + power
        else:
            lost = plan_reregistration(base, nodeset.spec.replicas, pods, slurm_nodes, now)
            actions = scale.actions + update + replace + lost + evict + gone
        actions = without_repeated_pod_steps(actions)
        for action in actions:
            if action.kind == "make-pod" and template is not None:
                make_node_pod(p, template, action)
            else:
                perform(p, slurm, action)
        deleted = {a.node for a in actions if a.kind in ("delete-pod", "force-delete-pod")}
        mark_evictable(p, slurm_nodes, [pod for pod in every_pod if pod.name not in deleted])
        if cluster.spec.health_checks.enabled:
            explain_unresponsive(p, slurm, slurm_nodes, pods)


def without_repeated_pod_steps(actions: Sequence[NodeAction]) -> List[NodeAction]:
    """The steps in order, a pod deleted or made once: two planners may ask for the same pod step
    (a powered-down node's pod is also an update's)."""
    seen, kept = set(), []
    for action in actions:
        key = (action.kind, action.node)
        if action.kind in ("delete-pod", "make-pod") and key in seen:
            continue
        seen.add(key)
        kept.append(action)
    return kept


def rendered_template(p: Pass, base: str) -> Optional[Dict[str, Any]]:
    """The on-demand node set's PodTemplate as this pass rendered it."""
    for obj in p.rendered.objects:
        if obj["kind"] == "PodTemplate" and obj["metadata"]["name"] == base:
            return obj
    return None


def make_node_pod(p: Pass, template: Mapping[str, Any], action: NodeAction) -> None:
    """Make the pod of a node Slurm resumed, and say so in an Event."""
    p.kube.create(node_pod(template, action.node, p.cluster_obj))
    p.events.append(Event("Normal", "NodeMakePod", "make-pod %s: %s" % (action.node, action.reason)))


def mark_evictable(p: Pass, slurm_nodes: Mapping[str, SlurmNode], pods: Sequence[PodView]) -> None:
    """Label the pods whose nodes run no job, unlabel the busy ones (writes only changes).

    A job may start on a labelled node before the next pass: if an eviction takes the pod
    then, its stop hook (slurmkube-worker-stop) hands the job back to Slurm to requeue."""
    for pod in pods:
        wanted = evictable(slurm_nodes.get(pod.name))
        if wanted != pod.evictable and not pod.terminating:
            p.kube.merge_patch("v1", "Pod", pod.name, p.cluster.namespace,
                               {"metadata": {"labels": {C.LABEL_EVICTABLE: "true" if wanted else None}}})


def retire_removed_nodesets(p: Pass) -> None:
    """A deleted NodeSet's nodes leave like a scale-down to 0; then its objects go.

    Its StatefulSet is owned by the cluster, not by the NodeSet, so nothing disappears
    before Slurm has let go of the nodes. Nothing while Slurm cannot be asked.
    """
    slurm, slurm_nodes = p.slurm, p.slurm_nodes
    if slurm is None or slurm_nodes is None:
        return
    cluster = p.cluster
    known = {n.name for n in p.nodesets} | set(p.invalid_nodesets)
    for sts in p.kube.list("apps/v1", "StatefulSet", cluster.namespace,
                           names.selector_labels(cluster.name, C.COMPONENT_WORKER)):
        meta = sts["metadata"]
        if meta["labels"].get(C.LABEL_NODESET) in known:
            continue
        current = int(sts["spec"]["replicas"])
        plan = plan_scale(meta["name"], 0, current, slurm_nodes, p.clock(), RETIRE_DRAIN_TIMEOUT_SECONDS)
        for action in plan.actions:
            perform(p, slurm, action)
        if plan.replicas != current:
            p.kube.merge_patch("apps/v1", "StatefulSet", meta["name"], cluster.namespace,
                               {"spec": {"replicas": plan.replicas}})
        elif current == 0:
            for api_version, kind in (("apps/v1", "StatefulSet"), ("v1", "Service"),
                                      ("policy/v1", "PodDisruptionBudget")):
                p.kube.delete(api_version, kind, meta["name"], cluster.namespace)
            p.events.append(Event("Normal", "NodeSetRetired", "removed %s" % meta["name"]))


def retire_removed_on_demand_sets(p: Pass) -> None:
    """A deleted on-demand set's nodes leave like a smaller maxReplicas (scale.plan_retiring): drained,
    powered down once idle, their pods deleted then, a pod still made for a node Slurm resumed for a
    job given it before the drain (from the template the operator rendered; after a restart it has
    none, and the resume times out); its PodTemplate says how many nodes slurm.conf still declares,
    and once none is, its objects go. Nothing while Slurm cannot be asked."""
    slurm, slurm_nodes = p.slurm, p.slurm_nodes
    if slurm is None or slurm_nodes is None:
        return
    cluster = p.cluster
    kept = p.templates.of(cluster.namespace, cluster.name)
    for base, (template, plan) in sorted(p.retiring.items()):
        selector = names.selector_labels(cluster.name, C.COMPONENT_WORKER, template["metadata"]["labels"].get(
            C.LABEL_NODESET))
        pods = pods_by_name(p.kube, cluster.namespace, selector)
        for action in plan.actions + plan_power(base, plan.replicas, 0, worker_pods(pods), slurm_nodes):
            if action.kind != "make-pod":
                perform(p, slurm, action)
            elif base in kept:
                # Only from the template as rendered (pass_state.NodeTemplates), never the live one.
                make_node_pod(p, kept[base], action)
        if str(plan.replicas) != (template["metadata"].get("annotations") or {}).get(C.ANNOTATION_NODES):
            p.kube.merge_patch("v1", "PodTemplate", base, cluster.namespace,
                               {"metadata": {"annotations": {C.ANNOTATION_NODES: str(plan.replicas)}}})
        if plan.replicas == 0 and not pods:
            for api_version, kind in (("v1", "PodTemplate"), ("v1", "Service"), ("policy/v1", "PodDisruptionBudget")):
                p.kube.delete(api_version, kind, base, cluster.namespace)
            p.events.append(Event("Normal", "NodeSetRetired", "removed %s" % base))


def explain_unresponsive(p: Pass, slurm: SlurmControl, slurm_nodes: Mapping[str, SlurmNode],
                         pods: Sequence[PodView]) -> None:
    """Drain an unresponsive node with its health check's reason.

    A node whose munged or slurmd died cannot drain itself (its check needs both to reach
    slurmctld), so its check runs here, in its pod, and the drain comes from the controller.
    When the node answers again, its own check resumes it.
    """
    for pod in pods:
        node = slurm_nodes.get(pod.name)
        # A pod not ready has no slurmd listening yet (starting, restarting): nothing to explain.
        if node is None or pod.terminating or not pod.ready or not may_explain(node):
            continue
        try:
            code, out = node_report(p.kube, p.cluster.namespace, pod.name)[:2]
        except KubeError:
            continue  # the pod's container is not running: nothing to ask
        problems = [line.strip() for line in out.splitlines() if line.strip()]
        reason = health_reason(problems)
        if code == 1 and problems and node.reason != reason:
            perform(p, slurm, NodeAction("drain", pod.name, reason))


def perform(p: Pass, slurm: SlurmControl, action: NodeAction) -> None:
    """Carry out one node step and say so in an Event."""
    if action.kind == "requeue":
        requeue_jobs(p, slurm, action)
        return
    if action.kind == "drain":
        slurm.drain([action.node], action.reason)
    elif action.kind == "down":
        slurm.down([action.node], action.reason)
    elif action.kind == "resume":
        slurm.resume([action.node])
    elif action.kind == "power-up":
        slurm.power_up([action.node])
    elif action.kind == "power-down":
        slurm.power_down([action.node])
    elif action.kind == "resume-failed":
        slurm.down([action.node], action.reason)
        p.events.append(Event("Warning", "NodeResumeFailed", "%s did not register within Slurm's ResumeTimeout: %s; "
                              "Slurm requeued its jobs. Once the cause is fixed: scontrol update nodename=%s "
                              "state=resume" % (action.node, action.reason, action.node)))
        return
    elif action.kind == "delete":
        slurm.delete([action.node])
    elif action.kind == "delete-pod":
        p.kube.delete("v1", "Pod", action.node, p.cluster.namespace)
    elif action.kind == "force-delete-pod":
        p.kube.delete("v1", "Pod", action.node, p.cluster.namespace, grace_period_seconds=0)
    p.events.append(Event("Normal", "Node" + action.kind.title().replace("-", ""),
                          "%s %s%s" % (action.kind, action.node, (": " + action.reason) if action.reason else "")))


def requeue_jobs(p: Pass, slurm: SlurmControl, action: NodeAction) -> None:
    """Requeue the node's running jobs, one Event each; a job sent with --no-requeue is left
    to finish and noted (the node leaves when it ends, or when an admin cancels it). Kubernetes
    pods' jobs (the bridge's external jobs, which Slurm cannot requeue) are cancelled: the bridge
    then ends their pods, and the pods their controller makes again wait for Slurm anew."""
    for job in slurm.jobs_on([action.node]):
        if not job.states & ACTIVE_JOB_STATES:
            continue
        if job.external:
            cancel_pods_job(p, slurm, job.job_id, action)
            continue
        if not job.requeue:
            p.not_requeued.append(JobNotRequeued(job.job_id, action.node))
            continue
        try:
            slurm.requeue([job.job_id])
        except SlurmError as exc:
            p.events.append(Event("Warning", "JobRequeueFailed", "job %d on %s: %s" % (job.job_id, action.node, exc)))
            continue
        p.events.append(Event("Normal", "JobRequeued", "requeued job %d from %s (%s)"
                              % (job.job_id, action.node, action.reason)))


def cancel_pods_job(p: Pass, slurm: SlurmControl, job_id: int, action: NodeAction) -> None:
    try:
        slurm.cancel([job_id])
    except SlurmError as exc:
        p.events.append(Event("Warning", "JobCancelFailed", "job %d on %s: %s" % (job_id, action.node, exc)))
        return
    p.events.append(Event("Normal", "JobCancelled", "cancelled job %d of Kubernetes pods on %s (%s): Slurm requeues "
                          "no external job; the bridge ends its pods" % (job_id, action.node, action.reason)))
