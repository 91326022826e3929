# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reconcile step that acts on Slurm's nodes: drain, requeue, delete and resume them for
scale-downs, updates, replacements and evictions (decided by nodeplan.py), mark the worker pods
an eviction may take, retire deleted node sets, explain unresponsive nodes, and `scontrol
reconfigure` when the configuration changed."""

from __future__ import annotations

import datetime
from typing import Any, Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Sequence, Set

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube, KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import (
    pod_ready,
    pod_terminating,
    pods_by_name,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    has_topology,
    nodeset_object_name,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import (
    NodeSet,
    NodeSetSpec,
    SlurmCluster,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.nodeplan import (
    NodeAction,
    PodView,
    ScalePlan,
    evictable,
    plan_evictions,
    plan_lost_hosts,
    plan_replacements,
    plan_reregistration,
    plan_scale,
    plan_update,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Clock, Event, JobNotRequeued
from ansible_collections.slurmkube.core.plugins.module_utils.operator.volume_refresh import refresh_config_volumes
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import (
    SlurmControl,
    SlurmError,
    SlurmNode,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.drain import fast_check_may_drain, health_reason
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.runner import node_report

# A deleted NodeSet has no drainTimeoutSeconds any more: its nodes get the model's default.
RETIRE_DRAIN_TIMEOUT_SECONDS = NodeSetSpec.__dataclass_fields__["drain_timeout_seconds"].default
REVISION_LABEL = "controller-revision-hash"
# NoSchedule taints that announce a node's removal (cluster-autoscaler, Karpenter) before
# its pods are evicted; `kubectl drain` cordons instead (spec.unschedulable).
REMOVAL_TAINTS = frozenset(("ToBeDeletedByClusterAutoscaler", "karpenter.sh/disrupted", "karpenter.sh/disruption"))
ACTIVE_JOB_STATES = frozenset(("RUNNING", "SUSPENDED"))


def host_is_leaving(node: Mapping[str, Any]) -> bool:
    """A Kubernetes node being emptied: cordoned, or tainted for removal."""
    spec = node.get("spec") or {}
    return bool(spec.get("unschedulable")) or any(t.get("key") in REMOVAL_TAINTS for t in spec.get("taints") or [])


def host_lost_since(node: Mapping[str, Any]) -> Optional[datetime.datetime]:
    """Since when a Kubernetes node has not reported Ready (its kubelet is gone or failing), or None."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return None if condition.get("status") == "True" else parse_time(condition.get("lastTransitionTime"))
    return None


def parse_time(text: Optional[str]) -> Optional[datetime.datetime]:
    """A Kubernetes timestamp ('2026-11-22T04:00:00Z'), or None."""
    if not text:
        return None
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)


def may_explain(node: SlurmNode) -> bool:
    """An unresponsive node whose drain is the fast check's to set (see slurm/drain.py)."""
    return not node.responding and fast_check_may_drain(node)


class Scaling(NamedTuple):
    """A worker StatefulSet as it was at the start of the pass, and its scale plan."""

    live: Dict[str, Any]
    plan: ScalePlan


def config_digest(cluster: SlurmCluster, files: Mapping[str, str], slurm_nodes: Mapping[str, SlurmNode]) -> str:
    """What the running Slurm configuration should be, as a digest."""
    parts = ["%s\n%s" % kv for kv in sorted(files.items())]
    if has_topology(cluster):
        parts.append(",".join(sorted(slurm_nodes)))
    return content_hash(parts)


def controller_has_config(slurm: SlurmControl, files: Mapping[str, str]) -> bool:
    """The controller pod's /etc/slurm holds exactly the files we render."""
    paths = ["%s/%s" % (C.SLURM_CONFIG_DIR, name) for name in sorted(files)]
    code, out = slurm.run(["cat", *paths])[:2]
    return code == 0 and out == "".join(files[name] for name in sorted(files))


class NodeSteps:
    """What one pass does to a cluster's Slurm nodes, with the events it leaves."""

    def __init__(self, kube: Kube, clock: Clock) -> None:
        self.kube = kube
        self.clock = clock
        # Found by this pass; the report names them and the reconciler posts an Event once each.
        self.not_requeued: List[JobNotRequeued] = []

    def act_on_nodes(self, cluster: SlurmCluster, nodesets: Sequence[NodeSet], scaling: Mapping[str, Scaling],
                     slurm: SlurmControl, slurm_nodes: Mapping[str, SlurmNode], events: List[Event]) -> None:
        """Drain, requeue, delete and resume nodes for scale-downs, updates, replacements and
        evictions; mark the pods an eviction may take now."""
        now = self.clock()
        hosts = self.kube.list("v1", "Node")
        leaving_hosts = frozenset(h["metadata"]["name"] for h in hosts if host_is_leaving(h))
        lost_hosts = {h["metadata"]["name"]: host_lost_since(h) for h in hosts if host_lost_since(h) is not None}
        for nodeset in nodesets:
            base = nodeset_object_name(nodeset)
            if base not in scaling:
                continue
            live, scale = scaling[base]
            every_pod = self.worker_pods(cluster, nodeset, leaving_hosts, lost_hosts)
            pods = [p for p in every_pod if p.name not in scale.leaving]
            target = (live.get("status") or {}).get("updateRevision") or ""
            update = plan_update(pods, target, slurm_nodes, now) if target else []
            # A rolling update replaces pods itself: replacements wait until it is done.
            replace = plan_replacements(pods, slurm_nodes, now) \
                if cluster.spec.health_checks.replace_drained_nodes and not update else []
            lost = plan_reregistration(base, nodeset.spec.replicas, pods, slurm_nodes, now)
            evict = plan_evictions(pods, slurm_nodes, now, nodeset.spec.drain_timeout_seconds)
            gone = plan_lost_hosts(every_pod, slurm_nodes, now, nodeset.spec.lost_node_timeout_seconds)
            actions = scale.actions + update + replace + lost + evict + gone
            for action in actions:
                self.perform(cluster, slurm, action, events)
            deleted = {a.node for a in actions if a.kind in ("delete-pod", "force-delete-pod")}
            self.mark_evictable(cluster, [p for p in every_pod if p.name not in deleted], slurm_nodes)
            if cluster.spec.health_checks.enabled:
                self.explain_unresponsive(cluster, pods, slurm, slurm_nodes, events)

    def mark_evictable(self, cluster: SlurmCluster, pods: Sequence[PodView],
                       slurm_nodes: Mapping[str, SlurmNode]) -> None:
        """Label the pods whose nodes run no job, unlabel the busy ones (writes only changes).

        A job may start on a labelled node before the next pass: if an eviction takes the pod
        then, its stop hook (slurmkube-worker-stop) hands the job back to Slurm to requeue."""
        for pod in pods:
            wanted = evictable(slurm_nodes.get(pod.name))
            if wanted != pod.evictable and not pod.terminating:
                self.kube.merge_patch("v1", "Pod", pod.name, cluster.namespace,
                                      {"metadata": {"labels": {C.LABEL_EVICTABLE: "true" if wanted else None}}})

    def retire_removed_nodesets(self, cluster: SlurmCluster, known: Set[str], slurm: SlurmControl,
                                slurm_nodes: Mapping[str, SlurmNode], events: List[Event]) -> None:
        """A deleted NodeSet's nodes leave like a scale-down to 0; then its objects go.

        Its StatefulSet is owned by the cluster, not by the NodeSet, so nothing disappears
        before Slurm has let go of the nodes.
        """
        labels = {C.LABEL_CLUSTER: cluster.name, C.LABEL_COMPONENT: C.COMPONENT_WORKER}
        for sts in self.kube.list("apps/v1", "StatefulSet", cluster.namespace, labels):
            meta = sts["metadata"]
            if meta["labels"].get(C.LABEL_NODESET) in known:
                continue
            current = int(sts["spec"]["replicas"])
            plan = plan_scale(meta["name"], 0, current, slurm_nodes, self.clock(), RETIRE_DRAIN_TIMEOUT_SECONDS)
            for action in plan.actions:
                self.perform(cluster, slurm, action, events)
            if plan.replicas != current:
                self.kube.merge_patch("apps/v1", "StatefulSet", meta["name"], cluster.namespace,
                                      {"spec": {"replicas": plan.replicas}})
            elif current == 0:
                for api_version, kind in (("apps/v1", "StatefulSet"), ("v1", "Service"),
                                          ("policy/v1", "PodDisruptionBudget")):
                    self.kube.delete(api_version, kind, meta["name"], cluster.namespace)
                events.append(Event("Normal", "NodeSetRetired", "removed %s" % meta["name"]))

    def worker_pods(self, cluster: SlurmCluster, nodeset: NodeSet, leaving_hosts: FrozenSet[str],
                    lost_hosts: Mapping[str, datetime.datetime]) -> List[PodView]:
        """The node set's pods as the node planners see them."""
        pods = pods_by_name(self.kube, cluster.namespace,
                            names.selector_labels(cluster.name, C.COMPONENT_WORKER, nodeset.name))
        views = []
        for pod in pods:
            labels = pod["metadata"].get("labels") or {}
            host = (pod.get("spec") or {}).get("nodeName") or ""
            views.append(PodView(pod["metadata"]["name"], labels.get(REVISION_LABEL, ""), pod_ready(pod),
                                 pod_terminating(pod), parse_time(pod["metadata"].get("creationTimestamp")),
                                 leaving_host=host in leaving_hosts, evictable=labels.get(C.LABEL_EVICTABLE) == "true",
                                 host=host, host_lost_since=lost_hosts.get(host)))
        return views

    def explain_unresponsive(self, cluster: SlurmCluster, pods: Sequence[PodView], slurm: SlurmControl,
                             slurm_nodes: Mapping[str, SlurmNode], events: List[Event]) -> None:
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
                code, out = node_report(self.kube, cluster.namespace, pod.name)[:2]
            except KubeError:
                continue  # the pod's container is not running: nothing to ask
            problems = [line.strip() for line in out.splitlines() if line.strip()]
            reason = health_reason(problems)
            if code == 1 and problems and node.reason != reason:
                self.perform(cluster, slurm, NodeAction("drain", pod.name, reason), events)

    def perform(self, cluster: SlurmCluster, slurm: SlurmControl, action: NodeAction, events: List[Event]) -> None:
        """Carry out one node step and say so in an Event."""
        if action.kind == "requeue":
            self.requeue_jobs(slurm, action, events)
            return
        if action.kind == "drain":
            slurm.drain([action.node], action.reason)
        elif action.kind == "down":
            slurm.down([action.node], action.reason)
        elif action.kind == "resume":
            slurm.resume([action.node])
        elif action.kind == "delete":
            slurm.delete([action.node])
        elif action.kind == "delete-pod":
            self.kube.delete("v1", "Pod", action.node, cluster.namespace)
        elif action.kind == "force-delete-pod":
            self.kube.delete("v1", "Pod", action.node, cluster.namespace, grace_period_seconds=0)
        events.append(Event("Normal", "Node" + action.kind.title().replace("-", ""),
                            "%s %s%s" % (action.kind, action.node, (": " + action.reason) if action.reason else "")))

    def requeue_jobs(self, slurm: SlurmControl, action: NodeAction, events: List[Event]) -> None:
        """Requeue the node's running jobs, one Event each; a job sent with --no-requeue is left
        to finish and noted (the node leaves when it ends, or when an admin cancels it)."""
        for job in slurm.jobs_on([action.node]):
            if not job.states & ACTIVE_JOB_STATES:
                continue
            if not job.requeue:
                self.not_requeued.append(JobNotRequeued(job.job_id, action.node))
                continue
            try:
                slurm.requeue([job.job_id])
            except SlurmError as exc:
                events.append(Event("Warning", "JobRequeueFailed", "job %d on %s: %s" % (job.job_id, action.node, exc)))
                continue
            events.append(Event("Normal", "JobRequeued", "requeued job %d from %s (%s)"
                                % (job.job_id, action.node, action.reason)))

    def reconfigure_if_needed(self, cluster: SlurmCluster, files: Mapping[str, str], in_effect: str,
                              slurm: SlurmControl, slurm_nodes: Mapping[str, SlurmNode], events: List[Event]) -> str:
        """`scontrol reconfigure` once the controller sees new config files (ConfigMaps reach
        pods with a delay, which volume_refresh.py shortens); also when nodes joined a cluster
        with a topology, whose tree only takes in dynamic nodes on reconfigure. Returns the
        digest of the config in effect."""
        wanted = config_digest(cluster, files, slurm_nodes)
        if in_effect == wanted:
            return in_effect
        refresh_config_volumes(self.kube, cluster, files)
        if not controller_has_config(slurm, files):
            return in_effect
        slurm.reconfigure()
        events.append(Event("Normal", "Reconfigured", "scontrol reconfigure: new Slurm configuration in effect"))
        return wanted
