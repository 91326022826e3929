# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make one Slurm cluster equal to its SlurmCluster and NodeSets: fetch → render → apply → act → report.

One pass, step by step: read the spec and node sets (here), make the cluster's secrets
(here), roll the munge key (munge_rollout.py), read Slurm's nodes through the controller
(here), see which switch each worker's machine is labelled with (topology.py), render the
objects once and apply what differs (here, with each node set's scale plan), act on Slurm's
nodes (nodes.py), have the kubelets refresh the pods' config files while new ones are not in
effect (volume_refresh.py), reconfigure slurmctld once it reads them (nodes.py), and report
statuses (report.py). The operator runs it on every event and on
a timer. It writes only what differs, so a no-op pass makes no API writes.
"""

from __future__ import annotations

import copy
import datetime
import json
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import SeenEqual, apply_changed, owned_by
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube, KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.keys import (
    new_db_password,
    new_munge_key,
    new_ssh_host_keys,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    accounting_db_secret_name,
    has_topology,
    munge_secret_name,
    nodeset_object_name,
    runs_slurmdbd,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.model.rules import check_references
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import NodeSet, SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.operator.munge_rollout import MungeKeyRollout
from ansible_collections.slurmkube.core.plugins.module_utils.operator.nodeplan import (
    ScalePlan,
    plan_scale,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.nodes import (
    JobNotRequeued,
    NodeSteps,
    Scaling,
    config_digest,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.report import StatusReport
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Clock, Event
from ansible_collections.slurmkube.core.plugins.module_utils.operator.topology import read_switch_placement
from ansible_collections.slurmkube.core.plugins.module_utils.render.cluster import render_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.render.jail import populate_job_name
from ansible_collections.slurmkube.core.plugins.module_utils.render.login import HOST_KEY_TYPES
from ansible_collections.slurmkube.core.plugins.module_utils.render.secrets import (
    render_db_password_secret,
    render_host_keys_secret,
    render_munge_secret,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import (
    SlurmControl,
    SlurmError,
    SlurmNode,
    nodes_by_name,
)
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.runner import controller_control

ANNOTATION_LAST_VALID = C.API_GROUP + "/last-valid-spec"


def utc_now() -> datetime.datetime:
    """The current time in UTC."""
    return datetime.datetime.now(datetime.timezone.utc)


class Outcome(NamedTuple):
    """What one reconcile pass found and did."""

    status: Dict[str, Any]
    nodeset_status: Dict[str, Dict[str, Any]]
    events: List[Event]
    applied: List[str]


def with_scale_plan(obj: Dict[str, Any], scaling: Mapping[str, Scaling]) -> Dict[str, Any]:
    """A worker StatefulSet keeps pods whose nodes have not left Slurm yet."""
    found = scaling.get(obj["metadata"]["name"]) if obj["kind"] == "StatefulSet" else None
    if found is None or found.plan.replicas == obj["spec"]["replicas"]:
        return obj
    out = copy.deepcopy(obj)
    out["spec"]["replicas"] = found.plan.replicas
    return out


def topology_in_effect(cluster: SlurmCluster, files: Mapping[str, str], config_hash: str,
                       slurm_nodes: Optional[Mapping[str, SlurmNode]]) -> Optional[bool]:
    """Whether slurmctld reconfigured with this pass's files and nodes (its tree takes dynamic
    nodes in only then); None for a cluster without a topology."""
    if not has_topology(cluster):
        return None
    return slurm_nodes is not None and config_hash == config_digest(cluster, files, slurm_nodes)


def is_kept_on_delete(obj: Mapping[str, Any]) -> bool:
    """The jail claim has no owner: deleting the cluster never deletes users' data."""
    return obj["kind"] == "PersistentVolumeClaim"


def newly_not_requeued(cluster_obj: Mapping[str, Any], found: Sequence[JobNotRequeued]) -> List[Event]:
    """A Warning for each job found unrequeueable that the live status does not list yet: one
    Event per job, not one per pass."""
    known = {(held.get("jobId"), held.get("node"))
             for held in (cluster_obj.get("status") or {}).get("jobsNotRequeued") or []}
    return [Event("Warning", "JobNotRequeued",
                  "job %d on %s was sent with --no-requeue: it runs on past the drain timeout and its node "
                  "leaves when it ends (scancel it to end it now)" % (held.job_id, held.node))
            for held in found if (held.job_id, held.node) not in known]


class Reconciler:
    """One reconcile pass over one SlurmCluster."""

    def __init__(self, kube: Kube, clock: Clock = utc_now, seen: Optional[SeenEqual] = None) -> None:
        self.kube = kube
        self.clock = clock
        self.seen = seen
        self.keys = MungeKeyRollout(kube)
        self.nodes = NodeSteps(kube, clock)
        self.status = StatusReport(kube, clock)

    # ----------------------------------------------------------------- entry point

    def reconcile(self, cluster_obj: Mapping[str, Any]) -> Outcome:
        """Bring the cluster one step closer to its spec and report where it is."""
        events: List[Event] = []
        try:
            cluster = parse_cluster(cluster_obj)
            nodesets, nodeset_status, live_nodesets = self.nodesets_of(cluster)
            check_references(cluster, nodesets)
        except SpecError as exc:
            return self.invalid(cluster_obj, str(exc))
        self.ensure_secrets(cluster, cluster_obj, events)
        key = self.keys.roll_munge_key(cluster, cluster_obj, events)
        slurm, slurm_nodes = self.slurm_state(cluster)
        rendered = render_cluster(cluster, nodesets, read_switch_placement(self.kube, cluster))
        scaling = self.scale_plans(cluster, nodesets, slurm_nodes)
        desired = [with_scale_plan(obj, scaling) for obj in rendered.objects]
        desired = self.after_stale_populate_jobs(cluster, desired)
        applied = self.apply_all(desired, cluster_obj)
        config_hash = (cluster_obj.get("status") or {}).get("configHash", "")
        if slurm is not None and slurm_nodes is not None:
            self.nodes.act_on_nodes(cluster, nodesets, scaling, slurm, slurm_nodes, events)
            self.nodes.retire_removed_nodesets(cluster, {n.name for n in nodesets} | set(nodeset_status), slurm,
                                               slurm_nodes, events)
            config_hash = self.nodes.reconfigure_if_needed(cluster, rendered.config_files, config_hash, slurm,
                                                           slurm_nodes, events)
        status, per_nodeset = self.status.report(cluster, nodesets, cluster_obj, slurm_nodes, key, live_nodesets,
                                                 self.nodes.not_requeued,
                                                 topology_in_effect(cluster, rendered.config_files, config_hash,
                                                                    slurm_nodes))
        status["configHash"] = config_hash
        if slurm_nodes is None:  # Slurm could not be asked: what was found before still holds
            status["jobsNotRequeued"] = (cluster_obj.get("status") or {}).get("jobsNotRequeued") or []
        events.extend(newly_not_requeued(cluster_obj, self.nodes.not_requeued))
        for name, counts in per_nodeset.items():
            nodeset_status[name] = dict(counts, **nodeset_status.get(name, {}))
        return Outcome(status, nodeset_status, events, applied)

    def invalid(self, cluster_obj: Mapping[str, Any], message: str) -> Outcome:
        """Report a bad spec and change nothing else. The Warning goes out once per generation:
        the status already says it for the passes after (every resync and node event)."""
        previous = (cluster_obj.get("status") or {})
        generation = cluster_obj["metadata"].get("generation", 0)
        status = dict(previous, phase=C.PHASE_INVALID, message=message, observedGeneration=generation)
        told = previous.get("phase") == C.PHASE_INVALID and previous.get("observedGeneration") == generation
        return Outcome(status, {}, [] if told else [Event("Warning", "InvalidSpec", message)], [])

    # ----------------------------------------------------------------- inputs

    def nodesets_of(self, cluster: SlurmCluster
                    ) -> Tuple[List[NodeSet], Dict[str, Dict[str, Any]], Dict[str, Dict[str, Any]]]:
        """The cluster's NodeSets as models, the status of the invalid ones, and the live objects.

        An invalid NodeSet keeps running as its last valid spec (kept in an annotation), so
        a bad edit changes nothing but its status; one never valid is left out.
        """
        models: List[NodeSet] = []
        invalid: Dict[str, Dict[str, Any]] = {}
        live: Dict[str, Dict[str, Any]] = {}
        for obj in self.kube.list(C.GROUP_VERSION, C.KIND_NODESET, cluster.namespace):
            if (obj.get("spec") or {}).get("clusterName") != cluster.name:
                continue
            meta = obj["metadata"]
            live[meta["name"]] = obj
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
        return models, invalid, live

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
        """Create the munge key, ssh host keys and the accounting database password once; never
        replace existing ones."""
        if self.kube.get("v1", "Secret", munge_secret_name(cluster), cluster.namespace) is None:
            self.kube.apply(owned_by(render_munge_secret(cluster, new_munge_key()), owner))
            events.append(Event("Normal", "MungeKeyCreated", "generated munge key %s" % munge_secret_name(cluster)))
        if self.kube.get("v1", "Secret", names.ssh_host_keys_secret(cluster.name), cluster.namespace) is None:
            self.kube.apply(owned_by(render_host_keys_secret(cluster, new_ssh_host_keys(HOST_KEY_TYPES)), owner))
            events.append(Event("Normal", "HostKeysCreated", "generated ssh host keys"))
        # An admin's Secret (spec.accounting.database.passwordSecret) is never made here.
        generated = runs_slurmdbd(cluster) and not cluster.spec.accounting.database.password_secret
        if generated and self.kube.get("v1", "Secret", accounting_db_secret_name(cluster), cluster.namespace) is None:
            self.kube.apply(owned_by(render_db_password_secret(cluster, new_db_password()), owner))
            events.append(Event("Normal", "DatabasePasswordCreated",
                                "generated accounting database password %s" % accounting_db_secret_name(cluster)))

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
        stale = [job for job in self.kube.list("batch/v1", "Job", cluster.namespace,
                                               names.selector_labels(cluster.name, C.COMPONENT_JAIL))
                 if names.is_jail_populate_job(cluster.name, job["metadata"]["name"])
                 and job["metadata"]["name"] != current]
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
