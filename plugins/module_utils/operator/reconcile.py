# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make one Slurm cluster equal to its SlurmCluster and NodeSets: fetch → render → apply → act → report.

Used by the operator (on every event and on a timer) and by the modules. It writes only
what differs: an object whose live state already holds what we would apply is not
touched, and an unchanged status is not written, so a no-op pass makes no API writes.
"""

from __future__ import annotations

import copy
import datetime
import json
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import SeenEqual, apply_changed, owned_by
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube, KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import (
    pod_ready,
    pod_running,
    pod_terminating,
    pods_by_name,
)
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import (
    job_complete,
    statefulset_counts,
    statefulset_ready,
)
from ansible_collections.slurmkube.core.plugins.module_utils.keys import (
    key_fingerprint,
    new_munge_key,
    new_ssh_host_keys,
)
from ansible_collections.slurmkube.core.plugins.module_utils.labels import selector_labels
from ansible_collections.slurmkube.core.plugins.module_utils.model.spec import (
    NodeSet,
    NodeSetSpec,
    SlurmCluster,
    SpecError,
    check_references,
    munge_secret_name,
    nodeset_object_name,
    object_name,
    parse_cluster,
    parse_nodeset,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.keyroll import (
    KeyView,
    parse_key_status,
    plan_key_rollout,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.nodeplan import (
    NodeAction,
    PodView,
    ScalePlan,
    plan_replacements,
    plan_reregistration,
    plan_scale,
    plan_update,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import condition, phase_of
from ansible_collections.slurmkube.core.plugins.module_utils.render.cluster import render_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.render.jail import populate_job_name
from ansible_collections.slurmkube.core.plugins.module_utils.render.login import HOST_KEY_TYPES, host_keys_secret_name
from ansible_collections.slurmkube.core.plugins.module_utils.render.secrets import (
    render_host_keys_secret,
    render_munge_secret,
    secret_value,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import (
    SlurmControl,
    SlurmError,
    SlurmNode,
    nodes_by_name,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.drain import fast_check_may_drain, health_reason
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.facts import nodes_by_state
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.runner import controller_control, node_report

ANNOTATION_LAST_VALID = C.API_GROUP + "/last-valid-spec"
# The container that runs munged in each component's pods.
MUNGE_CONTAINERS = {C.COMPONENT_CONTROLLER: C.CONTAINER_CONTROLLER, C.COMPONENT_WORKER: C.CONTAINER_WORKER,
                    C.COMPONENT_LOGIN: C.CONTAINER_LOGIN}
# A deleted NodeSet has no drainTimeoutSeconds any more: its nodes get the model's default.
RETIRE_DRAIN_TIMEOUT_SECONDS = NodeSetSpec.__dataclass_fields__["drain_timeout_seconds"].default
REVISION_LABEL = "controller-revision-hash"

Clock = Callable[[], datetime.datetime]


def utc_now() -> datetime.datetime:
    """The current time in UTC."""
    return datetime.datetime.now(datetime.timezone.utc)


def parse_time(text: Optional[str]) -> Optional[datetime.datetime]:
    """A Kubernetes timestamp ('2026-11-22T04:00:00Z'), or None."""
    if not text:
        return None
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)


def may_explain(node: SlurmNode) -> bool:
    """An unresponsive node whose drain is the fast check's to set (see slurm/drain.py)."""
    return not node.responding and fast_check_may_drain(node)


class Event(NamedTuple):
    """A Kubernetes Event the caller should emit on the SlurmCluster."""

    kind: str  # Normal | Warning
    reason: str
    message: str


class KeyState(NamedTuple):
    """The munge key every daemon runs with, and why a rotation is not finished (None when it is)."""

    in_use: str
    pending: Optional[str]


class Outcome(NamedTuple):
    """What one reconcile pass found and did."""

    status: Dict[str, Any]
    nodeset_status: Dict[str, Dict[str, Any]]
    events: List[Event]
    applied: List[str]


class Scaling(NamedTuple):
    """A worker StatefulSet as it was at the start of the pass, and its scale plan."""

    live: Dict[str, Any]
    plan: ScalePlan


def with_scale_plan(obj: Dict[str, Any], scaling: Mapping[str, Scaling]) -> Dict[str, Any]:
    """A worker StatefulSet keeps pods whose nodes have not left Slurm yet."""
    found = scaling.get(obj["metadata"]["name"]) if obj["kind"] == "StatefulSet" else None
    if found is None or found.plan.replicas == obj["spec"]["replicas"]:
        return obj
    out = copy.deepcopy(obj)
    out["spec"]["replicas"] = found.plan.replicas
    return out


def config_digest(cluster: SlurmCluster, files: Mapping[str, str], slurm_nodes: Mapping[str, SlurmNode]) -> str:
    """What the running Slurm configuration should be, as a digest."""
    parts = ["%s\n%s" % kv for kv in sorted(files.items())]
    if cluster.spec.slurm.topology:
        parts.append(",".join(sorted(slurm_nodes)))
    return content_hash(parts)


def controller_has_config(slurm: SlurmControl, files: Mapping[str, str]) -> bool:
    """The controller pod's /etc/slurm holds exactly the files we render."""
    paths = ["%s/%s" % (C.SLURM_CONFIG_DIR, name) for name in sorted(files)]
    code, out = slurm.run(["cat", *paths])[:2]
    return code == 0 and out == "".join(files[name] for name in sorted(files))


def is_kept_on_delete(obj: Mapping[str, Any]) -> bool:
    """The jail claim has no owner: deleting the cluster never deletes users' data."""
    return obj["kind"] == "PersistentVolumeClaim"


class Reconciler:
    """One reconcile pass over one SlurmCluster."""

    def __init__(self, kube: Kube, clock: Clock = utc_now, seen: Optional[SeenEqual] = None) -> None:
        self.kube = kube
        self.clock = clock
        self.seen = seen

    # ----------------------------------------------------------------- entry point

    def reconcile(self, cluster_obj: Mapping[str, Any]) -> Outcome:
        """Bring the cluster one step closer to its spec and report where it is."""
        events: List[Event] = []
        try:
            cluster = parse_cluster(cluster_obj)
            nodesets, nodeset_status = self.nodesets_of(cluster)
            check_references(cluster, nodesets)
        except SpecError as exc:
            return self.invalid(cluster_obj, str(exc))
        self.ensure_secrets(cluster, cluster_obj, events)
        key = self.roll_munge_key(cluster, cluster_obj, events)
        slurm, slurm_nodes = self.slurm_state(cluster)
        rendered = render_cluster(cluster, nodesets)
        scaling = self.scale_plans(cluster, nodesets, slurm_nodes)
        desired = [with_scale_plan(obj, scaling) for obj in rendered.objects]
        desired = self.after_stale_populate_jobs(cluster, desired)
        applied = self.apply_all(desired, cluster_obj)
        config_hash = (cluster_obj.get("status") or {}).get("configHash", "")
        if slurm is not None and slurm_nodes is not None:
            self.act_on_nodes(cluster, nodesets, scaling, slurm, slurm_nodes, events)
            self.retire_removed_nodesets(cluster, {n.name for n in nodesets} | set(nodeset_status), slurm,
                                         slurm_nodes, events)
            config_hash = self.reconfigure_if_needed(cluster, rendered.config_files, config_hash, slurm,
                                                     slurm_nodes, events)
        status, per_nodeset = self.report(cluster, nodesets, cluster_obj, slurm_nodes, key)
        status["configHash"] = config_hash
        for name, counts in per_nodeset.items():
            nodeset_status[name] = dict(counts, **nodeset_status.get(name, {}))
        return Outcome(status, nodeset_status, events, applied)

    def invalid(self, cluster_obj: Mapping[str, Any], message: str) -> Outcome:
        """Report a bad spec and change nothing else."""
        previous = (cluster_obj.get("status") or {})
        status = dict(previous, phase=C.PHASE_INVALID, message=message,
                      observedGeneration=cluster_obj["metadata"].get("generation", 0))
        return Outcome(status, {}, [Event("Warning", "InvalidSpec", message)], [])

    # ----------------------------------------------------------------- inputs

    def nodesets_of(self, cluster: SlurmCluster) -> Tuple[List[NodeSet], Dict[str, Dict[str, Any]]]:
        """The cluster's NodeSets as models, and the status of the invalid ones.

        An invalid NodeSet keeps running as its last valid spec (kept in an annotation), so
        a bad edit changes nothing but its status; one never valid is left out.
        """
        models: List[NodeSet] = []
        invalid: Dict[str, Dict[str, Any]] = {}
        for obj in self.kube.list(C.GROUP_VERSION, C.KIND_NODESET, cluster.namespace):
            if (obj.get("spec") or {}).get("clusterName") != cluster.name:
                continue
            meta = obj["metadata"]
            last_valid = (meta.get("annotations") or {}).get(ANNOTATION_LAST_VALID)
            try:
                models.append(parse_nodeset(obj))
            except SpecError as exc:
                invalid[meta["name"]] = {"phase": C.PHASE_INVALID, "message": str(exc),
                                         "observedGeneration": meta.get("generation", 0)}
                if last_valid:
                    models.append(parse_nodeset(dict(obj, spec=json.loads(last_valid))))
                continue
            spec_text = json.dumps(obj["spec"], sort_keys=True)
            if spec_text != last_valid:
                self.kube.merge_patch(C.GROUP_VERSION, C.KIND_NODESET, meta["name"], cluster.namespace,
                                      {"metadata": {"annotations": {ANNOTATION_LAST_VALID: spec_text}}})
        return models, invalid

    def slurm_state(self, cluster: SlurmCluster) -> Tuple[Optional[SlurmControl], Optional[Dict[str, SlurmNode]]]:
        """Slurm's view of the nodes, through the controller pod; (None, None) while it is not up."""
        control = controller_control(self.kube, cluster.name, cluster.namespace)
        if control is None:
            return None, None
        try:
            return control, nodes_by_name(control.nodes())
        except (SlurmError, KubeError):
            return None, None

    # ----------------------------------------------------------------- secrets

    def ensure_secrets(self, cluster: SlurmCluster, owner: Mapping[str, Any], events: List[Event]) -> None:
        """Create the munge key and ssh host keys once; never replace existing ones."""
        if self.kube.get("v1", "Secret", munge_secret_name(cluster), cluster.namespace) is None:
            self.kube.apply(owned_by(render_munge_secret(cluster, new_munge_key()), owner))
            events.append(Event("Normal", "MungeKeyCreated", "generated munge key %s" % munge_secret_name(cluster)))
        if self.kube.get("v1", "Secret", host_keys_secret_name(cluster), cluster.namespace) is None:
            self.kube.apply(owned_by(render_host_keys_secret(cluster, new_ssh_host_keys(HOST_KEY_TYPES)), owner))
            events.append(Event("Normal", "HostKeysCreated", "generated ssh host keys"))

    def roll_munge_key(self, cluster: SlurmCluster, cluster_obj: Mapping[str, Any], events: List[Event]) -> KeyState:
        """Bring every daemon to the key in the munge Secret (see keyroll) and say which one runs.

        A pass where nothing changed reads only the Secret: the pods are asked only while
        the Secret's key differs from the one recorded in the status.
        """
        in_use = (cluster_obj.get("status") or {}).get("mungeKey", "")
        secret = self.kube.get("v1", "Secret", munge_secret_name(cluster), cluster.namespace)
        if secret is None:
            return KeyState(in_use, "the munge key Secret %s is missing" % munge_secret_name(cluster))
        target = key_fingerprint(secret_value(secret, C.MUNGE_KEY_SECRET_KEY))
        if not in_use or in_use == target:
            # A new cluster's pods start with the Secret's key.
            return KeyState(target, None)
        views, unreadable = self.key_views(cluster)
        if unreadable:
            return KeyState(in_use, "cannot read the munge key of %s" % "; ".join(unreadable))
        plan = plan_key_rollout(target, views)
        if plan.waiting:
            return KeyState(in_use, "munge key %s not mounted yet in %s" % (target, ", ".join(plan.waiting)))
        for batch in plan.batches:
            failed = [problem for problem in (self.switch_key(cluster, views, pod, target) for pod in batch) if problem]
            if failed:
                events.append(Event("Warning", "MungeKeyRotation", "; ".join(failed)))
                return KeyState(in_use, "; ".join(failed))
        events.append(Event("Normal", "MungeKeyRotated", "every daemon runs with munge key %s" % target))
        return KeyState(target, None)

    def key_views(self, cluster: SlurmCluster) -> Tuple[List[KeyView], List[str]]:
        """Each running pod's keys; and the pods that could not say, with why."""
        views: List[KeyView] = []
        unreadable: List[str] = []
        pods = self.kube.list("v1", "Pod", cluster.namespace, {C.LABEL_CLUSTER: cluster.name})
        for pod in pods:
            name = pod["metadata"]["name"]
            component = (pod["metadata"].get("labels") or {}).get(C.LABEL_COMPONENT, "")
            if component not in MUNGE_CONTAINERS or not pod_running(pod):
                continue
            try:
                code, out, err = self.kube.exec(cluster.namespace, name, MUNGE_CONTAINERS[component],
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

    def switch_key(self, cluster: SlurmCluster, views: Sequence[KeyView], pod: str, target: str) -> str:
        """Restart munged in POD with the mounted key; what went wrong, or ''."""
        component = next(v.component for v in views if v.pod == pod)
        try:
            code, out, err = self.kube.exec(cluster.namespace, pod, MUNGE_CONTAINERS[component],
                                            [C.MUNGE_KEY_PROGRAM, "switch", target])
        except KubeError as exc:
            return "%s: %s" % (pod, exc)
        return "" if code == 0 else "%s: %s" % (pod, (err or out).strip()[-200:])

    # ----------------------------------------------------------------- apply

    def scale_plans(self, cluster: SlurmCluster, nodesets: Sequence[NodeSet],
                    slurm_nodes: Optional[Mapping[str, SlurmNode]]) -> Dict[str, Scaling]:
        """Each live worker StatefulSet's scale plan, by name, made once per pass: it sets the
        replicas applied now and the node steps taken after the apply."""
        plans: Dict[str, Scaling] = {}
        now = self.clock()
        for nodeset in nodesets:
            name = nodeset_object_name(nodeset)
            live = self.kube.get("apps/v1", "StatefulSet", name, cluster.namespace)
            if live is None:
                continue
            current = int(live["spec"]["replicas"])
            if slurm_nodes is None:
                # Slurm cannot be asked: removing a pod now could kill a job.
                plan = ScalePlan(max(current, nodeset.spec.replicas), [], [])
            else:
                plan = plan_scale(name, nodeset.spec.replicas, current, slurm_nodes, now,
                                  nodeset.spec.drain_timeout_seconds)
            plans[name] = Scaling(live, plan)
        return plans

    def after_stale_populate_jobs(self, cluster: SlurmCluster, desired: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Delete an earlier jail image's populate Job; hold the new one back until it is gone.

        Two populate Jobs at once would copy two different trees into one jail.
        """
        current = populate_job_name(cluster)
        prefix = object_name(cluster, "jail-populate") + "-"
        stale = [job for job in self.kube.list("batch/v1", "Job", cluster.namespace,
                                               selector_labels(cluster.name, C.COMPONENT_JAIL))
                 if job["metadata"]["name"].startswith(prefix) and job["metadata"]["name"] != current]
        if not stale:
            return desired
        for job in stale:
            if not job["metadata"].get("deletionTimestamp"):
                # Foreground: the Job stays (and the new one waits) until its pods are gone.
                self.kube.delete("batch/v1", "Job", job["metadata"]["name"], cluster.namespace,
                                 propagation="Foreground")
        return [obj for obj in desired if not (obj["kind"] == "Job" and obj["metadata"]["name"] == current)]

    def apply_all(self, desired: Sequence[Mapping[str, Any]], owner: Mapping[str, Any]) -> List[str]:
        """Apply every object that differs; returns 'Kind/name' of those applied."""
        owned = [obj if is_kept_on_delete(obj) else owned_by(obj, owner) for obj in desired]
        applied = apply_changed(self.kube, owned, seen=self.seen)
        return ["%s/%s" % (a.obj["kind"], a.obj["metadata"]["name"]) for a in applied]

    # ----------------------------------------------------------------- Slurm

    def act_on_nodes(self, cluster: SlurmCluster, nodesets: Sequence[NodeSet], scaling: Mapping[str, Scaling],
                     slurm: SlurmControl, slurm_nodes: Mapping[str, SlurmNode], events: List[Event]) -> None:
        """Drain, requeue, delete and resume nodes for scale-downs and updates."""
        now = self.clock()
        for nodeset in nodesets:
            base = nodeset_object_name(nodeset)
            if base not in scaling:
                continue
            live, scale = scaling[base]
            pods = [p for p in self.worker_pods(cluster, nodeset) if p.name not in scale.leaving]
            target = (live.get("status") or {}).get("updateRevision") or ""
            update = plan_update(pods, target, slurm_nodes, now) if target else []
            # A rolling update replaces pods itself: replacements wait until it is done.
            replace = plan_replacements(pods, slurm_nodes, now) \
                if cluster.spec.health_checks.replace_drained_nodes and not update else []
            lost = plan_reregistration(base, nodeset.spec.replicas, pods, slurm_nodes, now)
            for action in scale.actions + update + replace + lost:
                self.perform(cluster, slurm, action, events)
            if cluster.spec.health_checks.enabled:
                self.explain_unresponsive(cluster, pods, slurm, slurm_nodes, events)

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

    def worker_pods(self, cluster: SlurmCluster, nodeset: NodeSet) -> List[PodView]:
        """The node set's pods as the update and replacement planners see them."""
        pods = pods_by_name(self.kube, cluster.namespace,
                            selector_labels(cluster.name, C.COMPONENT_WORKER, nodeset.name))
        return [PodView(p["metadata"]["name"], p["metadata"].get("labels", {}).get(REVISION_LABEL, ""),
                        pod_ready(p), pod_terminating(p),
                        parse_time(p["metadata"].get("creationTimestamp"))) for p in pods]

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
        if action.kind == "drain":
            slurm.drain([action.node], action.reason)
        elif action.kind == "resume":
            slurm.resume([action.node])
        elif action.kind == "requeue":
            slurm.requeue([job.job_id for job in slurm.jobs_on([action.node])])
        elif action.kind == "delete":
            slurm.delete([action.node])
        elif action.kind == "delete-pod":
            self.kube.delete("v1", "Pod", action.node, cluster.namespace)
        events.append(Event("Normal", "Node" + action.kind.title().replace("-", ""),
                            "%s %s%s" % (action.kind, action.node, (": " + action.reason) if action.reason else "")))

    def reconfigure_if_needed(self, cluster: SlurmCluster, files: Mapping[str, str], in_effect: str,
                              slurm: SlurmControl, slurm_nodes: Mapping[str, SlurmNode], events: List[Event]) -> str:
        """`scontrol reconfigure` once the controller sees new config files (ConfigMaps reach
        pods with a delay); also when nodes joined a cluster with a topology, whose tree only
        takes in dynamic nodes on reconfigure. Returns the digest of the config in effect."""
        wanted = config_digest(cluster, files, slurm_nodes)
        if in_effect == wanted or not controller_has_config(slurm, files):
            return in_effect
        slurm.reconfigure()
        events.append(Event("Normal", "Reconfigured", "scontrol reconfigure: new Slurm configuration in effect"))
        return wanted

    # ----------------------------------------------------------------- status

    def report(self, cluster: SlurmCluster, nodesets: Sequence[NodeSet], cluster_obj: Mapping[str, Any],
               slurm_nodes: Optional[Mapping[str, SlurmNode]], key: KeyState
               ) -> Tuple[Dict[str, Any], Dict[str, Dict[str, Any]]]:
        """The SlurmCluster's status and each NodeSet's, from what is live now."""
        controller = self.statefulset(cluster, object_name(cluster, C.COMPONENT_CONTROLLER))
        login = self.statefulset(cluster, object_name(cluster, C.COMPONENT_LOGIN))
        job = self.kube.get("batch/v1", "Job", populate_job_name(cluster), cluster.namespace)
        ready_nodes, desired_nodes, leaving, per_nodeset = 0, 0, 0, {}
        for nodeset in nodesets:
            sts = self.statefulset(cluster, nodeset_object_name(nodeset))
            registered = [n for n in (slurm_nodes or {}).values() if nodeset.name in n.features]
            idle = sum(1 for n in registered if n.responding and not n.draining)
            ready_nodes += min(idle, nodeset.spec.replicas)
            desired_nodes += nodeset.spec.replicas
            # A scale-down is done when its nodes have left Slurm, not when enough remain.
            leaving += max(0, len(registered) - nodeset.spec.replicas)
            per_nodeset[nodeset.name] = self.nodeset_status(cluster, nodeset, sts, registered)
        previous = (cluster_obj.get("status") or {}).get("conditions") or []
        generation = cluster_obj["metadata"].get("generation", 0)
        now = self.clock()
        conditions = [
            condition("ControllerReady", statefulset_ready(controller) and slurm_nodes is not None,
                      "Slurmctld", "slurmctld answers" if slurm_nodes is not None else "waiting for slurmctld",
                      generation, previous, now),
            condition("JailReady", job_complete(job) or bool(cluster.spec.jail.existing_claim and job is None),
                      "JailPopulated", "jail populated from %s" % cluster.spec.images.jail, generation, previous, now),
            condition("LoginReady", statefulset_ready(login), "Sshd",
                      "%(ready)d/%(desired)d login pods ready" % statefulset_counts(login), generation, previous, now),
            condition("NodesReady", ready_nodes == desired_nodes and not leaving, "SlurmNodes",
                      "%d/%d nodes in service" % (ready_nodes, desired_nodes)
                      + (", %d leaving" % leaving if leaving else ""), generation, previous, now),
            condition("MungeKeyInUse", key.pending is None, "MungeKey",
                      key.pending or "every daemon runs with munge key %s" % key.in_use, generation, previous, now),
        ]
        status = {
            "phase": phase_of(conditions),
            "message": "; ".join(c["message"] for c in conditions if c["status"] != "True"),
            "observedGeneration": generation,
            "conditions": conditions,
            "controller": statefulset_counts(controller),
            "login": statefulset_counts(login),
            "nodes": {"ready": ready_nodes, "desired": desired_nodes},
            "nodesByState": nodes_by_state(list((slurm_nodes or {}).values())),
            "mungeKey": key.in_use,
        }
        return status, per_nodeset

    def statefulset(self, cluster: SlurmCluster, name: str) -> Optional[Dict[str, Any]]:
        """A live StatefulSet of the cluster, or None."""
        return self.kube.get("apps/v1", "StatefulSet", name, cluster.namespace)

    def nodeset_status(self, cluster: SlurmCluster, nodeset: NodeSet, sts: Optional[Mapping[str, Any]],
                       registered: Sequence[SlurmNode]) -> Dict[str, Any]:
        """A NodeSet's status; replicas and selector serve `kubectl scale` and autoscalers."""
        counts = statefulset_counts(sts)
        selector = selector_labels(cluster.name, C.COMPONENT_WORKER, nodeset.name)
        in_service = sum(1 for n in registered if n.responding and not n.draining)
        return {
            "phase": "Ready" if in_service >= nodeset.spec.replicas and counts["desired"] == nodeset.spec.replicas
            else "Scaling",
            "replicas": counts["desired"],
            "readyReplicas": counts["ready"],
            "selector": ",".join("%s=%s" % kv for kv in sorted(selector.items())),
            "nodesByState": nodes_by_state(registered),
        }
