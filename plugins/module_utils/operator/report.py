# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pass's last step: the SlurmCluster's status and conditions and each NodeSet's, from what
the pass read and did and the StatefulSets as they are after its apply."""

from __future__ import annotations

import datetime
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import key_set_summary
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import pod_ready, pod_terminating, pods_by_name
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import (
    deployment_available,
    job_complete,
    statefulset_counts,
    statefulset_ready,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import nodeset_object_name, on_demand
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import NodeSet, SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.operator.backups import backup_events, backup_status
from ansible_collections.slurmkube.core.plugins.module_utils.operator.images import images_condition
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import (
    Controllers,
    JobNotRequeued,
    Pass,
    SlurmState,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_power import wants_pod
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_upgrade import (
    STAGE_IMAGE_KEY,
    STAGE_SNAPSHOT,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import (
    Event,
    condition,
    phase_of,
    ready_condition,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.jail import populate_job_name
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import (
    SlurmNode,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.facts import nodes_by_state


def report(p: Pass) -> Tuple[Dict[str, Any], Dict[str, Dict[str, Any]]]:
    """The SlurmCluster's status and each NodeSet's (the invalid ones say why), from what the pass
    read and did; a Warning for each job newly found unrequeueable."""
    status, per_nodeset = cluster_status(p)
    status["configHash"] = p.config_hash
    status["slurm"] = slurm_status(p.slurm_state)
    # Slurm could not be asked, or the pass stopped before acting on its nodes: what was found
    # before still holds.
    if p.slurm_nodes is None or p.slurm_state.pending:
        status["jobsNotRequeued"] = p.previous_status.get("jobsNotRequeued") or []
    p.events.extend(newly_not_requeued(p.previous_status, p.not_requeued))
    statuses = dict(p.invalid_nodesets)
    for name, counts in per_nodeset.items():
        statuses[name] = dict(counts, **statuses.get(name, {}))
    return status, statuses


def newly_not_requeued(previous_status: Mapping[str, Any], found: Sequence[JobNotRequeued]) -> List[Event]:
    """A Warning for each job found unrequeueable that the live status does not list yet: one
    Event per job, not one per pass."""
    known = {(held.get("jobId"), held.get("node")) for held in previous_status.get("jobsNotRequeued") or []}
    return [Event("Warning", "JobNotRequeued",
                  "job %d on %s was sent with --no-requeue: it runs on past the drain timeout and its node "
                  "leaves when it ends (scancel it to end it now)" % (held.job_id, held.node))
            for held in found if (held.job_id, held.node) not in known]


def cluster_status(p: Pass) -> Tuple[Dict[str, Any], Dict[str, Dict[str, Any]]]:
    """The SlurmCluster's status and each valid NodeSet's, from the objects live after the apply
    and Slurm's nodes."""
    cluster, slurm_nodes, key, not_requeued = p.cluster, p.slurm_nodes, p.key, p.not_requeued
    topology_ready = p.topology_ready
    # Every StatefulSet of the cluster, as it is after the apply: one list call.
    sets = {s["metadata"]["name"]: s for s in p.kube.list("apps/v1", "StatefulSet", cluster.namespace,
                                                          {C.LABEL_CLUSTER: cluster.name})}
    controller = sets.get(names.controller(cluster.name))
    login = sets.get(names.login(cluster.name))
    job = p.kube.get("batch/v1", "Job", populate_job_name(cluster), cluster.namespace)
    ready_nodes, ready_pods, desired_nodes, leaving, per_nodeset = 0, 0, 0, 0, {}
    now = p.clock()
    awake = on_demand_pods(p)
    for nodeset in p.nodesets:
        counts = worker_counts(nodeset, sets, awake.get(nodeset.name, []))
        registered = [n for n in (slurm_nodes or {}).values() if nodeset.name in n.features]
        if on_demand(nodeset):
            registered = [n for n in registered if wants_pod(n)]  # a powered-down node runs nowhere
        idle = sum(1 for n in registered if n.responding and not n.draining)
        ready_nodes += min(idle, nodeset.spec.replicas)
        # Slurm may count a node in service a few seconds before the kubelet's probe does.
        ready_pods += min(counts["ready"], nodeset.spec.replicas)
        desired_nodes += nodeset.spec.replicas
        # A scale-down is done when its nodes have left Slurm, not when enough remain (an
        # on-demand set's nodes beyond replicas are up for jobs).
        if not on_demand(nodeset):
            leaving += max(0, len(registered) - nodeset.spec.replicas)
        per_nodeset[nodeset.name] = nodeset_status(cluster, nodeset, counts, registered,
                                                   p.live_nodesets.get(nodeset.name) or {}, now)
    previous = p.previous_status.get("conditions") or []
    generation = p.cluster_obj["metadata"].get("generation", 0)
    nodes_message = "%d/%d nodes in service" % (ready_nodes, desired_nodes)
    if ready_pods != desired_nodes:
        nodes_message += ", %d/%d worker pods ready" % (ready_pods, desired_nodes)
    if leaving:
        nodes_message += ", %d leaving" % leaving
    nodes_message += "".join("; job %d on %s was sent with --no-requeue: its node leaves when it ends"
                             % held for held in not_requeued)
    # First: a pod that cannot pull its image is why the others are not ready (Ready's reason).
    images, image_events = images_condition(p, generation, previous, now)
    p.events.extend(image_events)
    conditions = [
        images,
        controller_condition(p, slurm_nodes is not None, generation, previous, now),
        condition("JailReady", job_complete(job) or bool(cluster.spec.jail.existing_claim and job is None),
                  "JailPopulated", "jail populated from %s" % cluster.spec.images.jail, generation, previous, now),
        condition("LoginReady", statefulset_ready(login), "Sshd",
                  "%(ready)d/%(desired)d login pods ready" % statefulset_counts(login), generation, previous, now),
        condition("NodesReady", ready_nodes == desired_nodes == ready_pods and not leaving, "SlurmNodes",
                  nodes_message, generation, previous, now),
        condition("MungeKeyInUse", key.pending is None, "MungeKey",
                  key.pending or "every daemon runs with munge key %s" % key.in_use, generation, previous, now),
        upgrade_condition(p.slurm_state, generation, previous, now),
    ]
    if topology_ready is not None:
        # topology/tree refuses every job while no registered node is in its tree.
        conditions.append(condition("TopologyReady", topology_ready, "TopologyConf",
                                    "slurmctld's topology holds every node" if topology_ready
                                    else "waiting for slurmctld to read topology.conf", generation, previous, now))
    if cluster.spec.accounting.enabled:
        conditions.append(accounting_condition(p.accounting, generation, previous, now))
    rest = own_deployment(p, cluster.spec.rest.enabled, names.rest(cluster.name))
    rest_ready = ready_replicas(rest)
    if cluster.spec.rest.enabled:
        conditions.append(deployment_condition("RestReady", rest, cluster.spec.rest.replicas, "Slurmrestd",
                                               "slurmrestd", generation, previous, now))
    if cluster.spec.exporter.enabled:
        conditions.append(deployment_condition("ExporterReady", own_deployment(p, True, names.exporter(cluster.name)),
                                               1, "Exporter", "exporter", generation, previous, now))
    parts = control_plane(p, slurm_nodes is not None, statefulset_counts(login)["ready"], rest_ready)
    p.events.extend(control_plane_events(p.previous_status.get("controlPlane") or {}, parts, conditions))
    conditions.append(ready_condition(conditions, generation, previous, now))
    status = {
        "phase": phase_of(conditions),
        "message": "; ".join(c["message"] for c in conditions[:-1] if c["status"] != "True"),
        "observedGeneration": generation,
        "conditions": conditions,
        "controlPlane": parts,
        "controller": p.controllers.summary() if p.controllers else statefulset_counts(controller),
        "login": statefulset_counts(login),
        "nodes": {"ready": ready_nodes, "desired": desired_nodes},
        "nodesByState": nodes_by_state(list((slurm_nodes or {}).values())),
        "mungeKey": key.in_use,
        "jobsNotRequeued": [{"jobId": held.job_id, "node": held.node} for held in not_requeued],
    }
    if p.rest_keys is not None:
        # Key ids and times only, never a key.
        status["restKeys"] = dict(key_set_summary(p.rest_keys), inEffect=p.rest_keys_in_effect)
    if cluster.spec.backup.enabled:
        # The CronJob's job template labels its Jobs (a run started by hand from it too).
        status["backup"] = backup_status(p.kube.list("batch/v1", "Job", cluster.namespace,
                                                     names.selector_labels(cluster.name, C.COMPONENT_BACKUP)))
        p.events.extend(backup_events(p.previous_status.get("backup") or {}, status["backup"]))
    if p.restore:
        status["restore"] = p.restore
    return status, per_nodeset


def controller_condition(p: Pass, answers: bool, generation: int, previous: Sequence[Mapping[str, Any]],
                         now: datetime.datetime) -> Dict[str, Any]:
    """ControllerReady: a controller serves and answers, every backup stands by, and none waits to
    be replaced for a new template; the message names which serves and which are down, and a
    state claim backups cannot mount."""
    c = p.controllers or Controllers(0, "", (), (), None)
    if not c.serving:
        message = "no slurmctld serves"
    elif not answers:
        message = "slurmctld on %s does not answer" % c.serving
    else:
        message = "slurmctld serves on %s" % c.serving
    if c.standing_by:
        message += "; %s standing by" % ", ".join(c.standing_by)
    if c.down:
        message += "; %s not running" % ", ".join(c.down)
    if c.outdated:
        message += "; %s to be replaced for the new template" % ", ".join(c.outdated)
        if c.hand_over_unseen:
            message += " (%s once its slurm.conf names a backup that answers, to hand control to)" % c.serving
    elif c.outdated is None:
        message += "; waiting for the StatefulSet to take in its new spec"
    if p.cluster.spec.controller.replicas > 1 and not p.state_claim_shared:
        message += ("; spec.controller.replicas: the state claim %s is not ReadWriteMany (made by an earlier "
                    "release): a backup cannot mount it" % names.controller_state_claim(p.cluster.name))
    if C.COMPONENT_CONTROLLER in p.held and p.restore:
        message += "; held down while restore %s runs (status.restore)" % p.restore["name"]
    return condition("ControllerReady", bool(c.serving) and answers and not c.down and c.outdated == (),
                     "Slurmctld", message, generation, previous, now)


def accounting_condition(facts: Optional[Mapping[str, Any]], generation: int, previous: Sequence[Mapping[str, Any]],
                         now: datetime.datetime) -> Dict[str, Any]:
    """AccountingReady: slurmdbd answers from its database, and how many records slurmctld holds
    for it (they are sent once it answers again)."""
    if facts is None:
        return condition("AccountingReady", False, "SlurmctldDown", "waiting for slurmctld to ask slurmdbd",
                         generation, previous, now)
    queue = facts.get("dbd_agent_queue_size")
    queued = "" if queue is None else "; %d records queued at slurmctld" % queue
    if facts.get("slurmdbd_reachable"):
        message = "slurmdbd answers" + queued
    else:
        error = (str(facts.get("slurmdbd_error") or "").splitlines() or [""])[0][:200]
        message = "accounting unavailable: %s%s, sent once slurmdbd answers" % (error, queued)
    return condition("AccountingReady", bool(facts.get("slurmdbd_reachable")), "Slurmdbd", message, generation,
                     previous, now)


# The parts of the control plane a user reaches (status.controlPlane), each up or not, and the
# condition whose message says why. Up is what users need of a part; its condition may ask more
# (ControllerReady: every backup standing by; LoginReady: every login pod ready).
PART_CONDITIONS = {"controller": "ControllerReady", "accounting": "AccountingReady", "rest": "RestReady",
                   "login": "LoginReady"}


def control_plane(p: Pass, answers: bool, login_ready: int, rest_ready: int) -> Dict[str, bool]:
    """Each part the spec asks for, up or not: a slurmctld serves and answers; slurmdbd answers
    from its database (as last known while slurmctld cannot ask it); a login pod, a slurmrestd
    pod takes connections."""
    spec, c = p.cluster.spec, p.controllers
    parts = {"controller": bool(c and c.serving) and answers}
    if spec.accounting.enabled:
        known = (p.previous_status.get("controlPlane") or {}).get("accounting")
        parts["accounting"] = bool(p.accounting.get("slurmdbd_reachable")) if p.accounting is not None else known
    if spec.rest.enabled:
        parts["rest"] = rest_ready > 0
    if spec.login.replicas > 0:
        parts["login"] = login_ready > 0
    return {part: up for part, up in parts.items() if up is not None}


def control_plane_events(before: Mapping[str, Any], now: Mapping[str, bool],
                         conditions: Sequence[Mapping[str, Any]]) -> List[Event]:
    """A Warning when a part goes down (<Part>Unavailable), a Normal Event when it is back
    (<Part>Available), with its condition's message."""
    messages = {c["type"]: c["message"] for c in conditions}
    events = []
    for part, up in now.items():
        if before.get(part) is None or before[part] == up:
            continue
        reason = "%s%s" % (part.capitalize(), "Available" if up else "Unavailable")
        events.append(Event("Normal" if up else "Warning", reason, messages.get(PART_CONDITIONS[part], "")))
    return events


def own_deployment(p: Pass, enabled: bool, name: str) -> Optional[Dict[str, Any]]:
    """A Deployment of the cluster's (the REST API's, the exporter's) as it is after the apply."""
    return p.kube.get("apps/v1", "Deployment", name, p.cluster.namespace) if enabled else None


def ready_replicas(deployment: Optional[Mapping[str, Any]]) -> int:
    """Its pods that take requests (slurmrestd's Service needs one to serve)."""
    return int(((deployment or {}).get("status") or {}).get("readyReplicas") or 0)


def deployment_condition(kind: str, deployment: Optional[Mapping[str, Any]], replicas: int, reason: str, pods: str,
                         generation: int, previous: Sequence[Mapping[str, Any]],
                         now: datetime.datetime) -> Dict[str, Any]:
    """True once the Deployment's latest spec runs on all its pods, available: a new spec whose pods
    cannot start (an image no node can pull) keeps it false while the old pods still serve, so a
    wait for Ready sees the failure instead of the old pods."""
    ready = ready_replicas(deployment)
    message = "%d/%d %s pods ready" % (ready, replicas, pods)
    done = deployment_available(deployment, replicas)
    if not done and ready >= replicas:
        message += ", not yet on the latest spec (the new pods' Events say why)"
    return condition(kind, done, reason, message, generation, previous, now)


def slurm_status(state: SlurmState) -> Dict[str, Any]:
    """status.slurm: the images and release in effect; the rollout, pre-flight and refusal, while any;
    the images of an earlier release whose workloads keep that release's templates, while any."""
    out: Dict[str, Any] = {"images": dict(state.images), "version": state.version}
    if state.rollout:
        out["rollout"] = dict(state.rollout)
    if state.preflight:
        out["preflight"] = state.preflight
    if state.refusal:
        out["refusal"] = state.refusal
    if state.canary_failure:
        out["canaryFailure"] = dict(state.canary_failure)
    if state.earlier:
        out["earlierRelease"] = dict(state.earlier)
    return out


def upgrade_condition(state: SlurmState, generation: int, previous: Sequence[Mapping[str, Any]],
                      now: datetime.datetime) -> Dict[str, Any]:
    """SlurmImageInUse: the controller image asked for runs, or what holds it (its pre-flight, a
    refusal, the rollout's stage)."""
    image = state.images.get("controller", "")
    if state.pending:
        reason, message = ("UpgradeRefused" if state.refusal else "PreFlight"), state.pending
    elif state.canary_failure:
        reason, message = "CanaryFailed", state.canary_failure["message"]
    elif state.rollout:
        reason = "Upgrading"
        stage = state.rollout["stage"]
        first = "a backup (Job %s)" % state.rollout["snapshot"] if stage == STAGE_SNAPSHOT \
            else "%s (%s)" % (stage, state.rollout["images"][STAGE_IMAGE_KEY[stage]])
        message = "rolling out Slurm %s in Slurm's order: %s first" % (state.rollout["version"], first)
    else:
        reason = "SlurmImage"
        message = "Slurm %s runs from %s" % (state.version, image) if state.version else "%s runs" % image
    done = reason == "SlurmImage"
    return condition("SlurmImageInUse", done, reason, message, generation, previous, now)


def on_demand_pods(p: Pass) -> Dict[str, List[Dict[str, Any]]]:
    """The on-demand sets' pods not being deleted, by node set: one list call for the cluster's worker
    pods, none when it has no on-demand set."""
    if not any(on_demand(nodeset) for nodeset in p.nodesets):
        return {}
    found: Dict[str, List[Dict[str, Any]]] = {}
    for pod in pods_by_name(p.kube, p.cluster.namespace, names.selector_labels(p.cluster.name, C.COMPONENT_WORKER)):
        if not pod_terminating(pod):
            found.setdefault((pod["metadata"].get("labels") or {}).get(C.LABEL_NODESET, ""), []).append(pod)
    return found


def worker_counts(nodeset: NodeSet, sets: Mapping[str, Dict[str, Any]],
                  awake: Sequence[Mapping[str, Any]]) -> Dict[str, int]:
    """Ready and desired pods of a node set: its StatefulSet's (among the cluster's `sets`), or an
    on-demand set's pods (`awake`, those not being deleted: every one is wanted while its node is
    powered up)."""
    if not on_demand(nodeset):
        return statefulset_counts(sets.get(nodeset_object_name(nodeset)))
    return {"ready": sum(1 for pod in awake if pod_ready(pod)), "desired": len(awake)}


def nodeset_status(cluster: SlurmCluster, nodeset: NodeSet, counts: Mapping[str, int],
                   registered: Sequence[SlurmNode], live: Mapping[str, Any],
                   now: datetime.datetime) -> Dict[str, Any]:
    """A NodeSet's status; replicas and selector serve `kubectl scale` and autoscalers; its
    Ready condition serves `kubectl wait`. An on-demand set is Ready with its `replicas` nodes
    in service, however many more Slurm resumed."""
    selector = names.selector_labels(cluster.name, C.COMPONENT_WORKER, nodeset.name)
    in_service = sum(1 for n in registered if n.responding and not n.draining)
    wanted = nodeset.spec.replicas
    if on_demand(nodeset):
        ready = in_service >= wanted and counts["ready"] >= wanted
    else:
        ready = in_service >= wanted and counts["desired"] == wanted and counts["ready"] >= wanted \
            and len(registered) <= wanted
    message = "%d/%d nodes in service, %d/%d pods ready" % (
        min(in_service, wanted), wanted, min(counts["ready"], wanted), wanted)
    if on_demand(nodeset):
        message += ", %d powered up of at most %d" % (len(registered), nodeset.spec.max_replicas or 0)
    elif len(registered) > wanted:
        message += ", %d leaving" % (len(registered) - wanted)
    generation = (live.get("metadata") or {}).get("generation", 0)
    previous = (live.get("status") or {}).get("conditions") or []
    return {
        "phase": "Ready" if ready else "Scaling",
        "conditions": [condition("Ready", ready, "NodesInService" if ready else "BelowReplicas", message,
                                 generation, previous, now)],
        "replicas": counts["desired"],
        "readyReplicas": counts["ready"],
        "selector": ",".join("%s=%s" % kv for kv in sorted(selector.items())),
        "nodesByState": nodes_by_state(registered),
    }
