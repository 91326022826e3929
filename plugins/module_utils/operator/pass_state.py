# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One reconcile pass: what it read, planned, rendered and did.

reconcile.py runs the steps in order over one Pass; each step reads what the ones before it
left here and adds its own part. Nothing else is handed from step to step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils.jwt import KeySet
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import SeenEqual
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import NodeSet, SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_nodes import ScalePlan
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Clock, Event
from ansible_collections.slurmkube.core.plugins.module_utils.render.cluster import RenderedCluster
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmControl, SlurmNode


class KeyState(NamedTuple):
    """The munge key every daemon runs with, and why a rotation is not finished (None when it is)."""

    in_use: str
    pending: Optional[str]


class SlurmState(NamedTuple):
    """The Slurm images in effect (by spec.images key) and the release slurmctld runs; during a
    rollout in Slurm's order, its target images, their release and its stage; while a new
    controller image waits on its pre-flight Job (named) or was refused, what holds it; a worker
    image that failed its canary."""

    images: Mapping[str, str]
    version: str
    rollout: Optional[Mapping[str, Any]] = None
    preflight: str = ""
    waiting: Optional[str] = None
    refusal: Optional[str] = None
    # The images this pass renders, when not the spec's (a rollout's stage holds some back).
    render: Optional[Mapping[str, str]] = None
    # The images whose worker failed its canary ("images") and what was seen ("message"), while
    # the spec still names that worker image: the workers, login, jail and exporter stay as they are.
    canary_failure: Optional[Mapping[str, Any]] = None
    # A cluster an earlier release made: its images this pass still renders, by key, whose
    # workloads keep the templates that release made them with (plan_upgrade.kept_earlier).
    earlier: Optional[Mapping[str, str]] = None

    @property
    def pending(self) -> Optional[str]:
        """Why the new image may not replace the running one yet; None when nothing holds it."""
        return self.refusal or self.waiting


class Controllers(NamedTuple):
    """The controller pods as one pass found them (operator/controller.py). `serving`: the Ready
    one ("" when none is); `standing_by`: running, not serving; `down`: wanted but not running
    (absent, pending, being deleted); `outdated`: running a template older than the
    StatefulSet's (None while the StatefulSet has not yet taken in its latest spec); `leaving`:
    pods of ordinals beyond `desired`, which the StatefulSet is removing; `hand_over_unseen`: the
    serving one, outdated, does not see a backup to hand control to yet (operator/controller.py);
    `images`: what the pods run."""

    desired: int
    serving: str
    standing_by: Tuple[str, ...]
    down: Tuple[str, ...]
    outdated: Optional[Tuple[str, ...]]
    leaving: Tuple[str, ...] = ()
    hand_over_unseen: bool = False
    images: Tuple[str, ...] = ()

    def summary(self) -> Dict[str, Any]:
        """status.controller: controllers up (serving or standing by) of those wanted, which serves."""
        return {"ready": (1 if self.serving else 0) + len(self.standing_by), "desired": self.desired,
                "serving": self.serving, "standby": list(self.standing_by)}


class JobNotRequeued(NamedTuple):
    """A job the operator would have requeued, but which was sent with --no-requeue."""

    job_id: int
    node: str


class NodeTemplates:
    """The on-demand node sets' PodTemplates as the passes last rendered them, by cluster and base
    name: the only templates their pods are made from, by a pass or by the power loop between
    passes. The live PodTemplate is an object anyone who edits the namespace can change; a pod made
    from it would run what they wrote with the operator's hand. Kept in the operator's memory: after
    a restart the first pass renders them again (a deleted set's template is then gone, and a node
    Slurm still resumes from it gets no pod: its resume times out and Slurm requeues the job)."""

    def __init__(self) -> None:
        self._kept: Dict[Tuple[str, str], Dict[str, Dict[str, Any]]] = {}

    def of(self, namespace: str, cluster: str) -> Dict[str, Dict[str, Any]]:
        """The cluster's templates, by base name (a copy: the power loop reads while a pass keeps)."""
        return dict(self._kept.get((namespace, cluster), {}))

    def template(self, namespace: str, cluster: str, base: str) -> Optional[Dict[str, Any]]:
        """One on-demand set's template, by its base name; None when no pass rendered it."""
        return self._kept.get((namespace, cluster), {}).get(base)

    def keep(self, namespace: str, cluster: str, templates: Mapping[str, Dict[str, Any]]) -> None:
        """Replace the cluster's templates with these (one assignment: a reader sees old or new)."""
        if templates:
            self._kept[(namespace, cluster)] = dict(templates)
        else:
            self._kept.pop((namespace, cluster), None)

    def forget(self, namespace: str, cluster: str) -> None:
        """A deleted cluster's templates go with it."""
        self._kept.pop((namespace, cluster), None)


class Scaling(NamedTuple):
    """A worker StatefulSet as it was at the start of the pass, and its scale plan."""

    live: Dict[str, Any]
    plan: ScalePlan


@dataclass
class Pass:
    """The state of one pass over one SlurmCluster. `slurm` and `slurm_nodes` stay None while
    slurmctld cannot be asked: the steps that would act on Slurm then do nothing."""

    kube: Kube
    clock: Clock
    seen: Optional[SeenEqual]
    cluster_obj: Mapping[str, Any]
    cluster: SlurmCluster
    nodesets: List[NodeSet]
    # Every NodeSet object of the cluster as read, by name; the status of the invalid ones.
    live_nodesets: Dict[str, Dict[str, Any]]
    invalid_nodesets: Dict[str, Dict[str, Any]]
    events: List[Event] = field(default_factory=list)
    slurm: Optional[SlurmControl] = None
    slurm_nodes: Optional[Dict[str, SlurmNode]] = None
    key: KeyState = KeyState("", None)
    slurm_state: SlurmState = SlurmState({}, "")
    placement: Dict[str, str] = field(default_factory=dict)
    scaling: Dict[str, Scaling] = field(default_factory=dict)
    # A deleted on-demand set's PodTemplate and the plan that lets its nodes go, by base name.
    retiring: Dict[str, Scaling] = field(default_factory=dict)
    # The on-demand sets' templates as rendered, kept between passes (the operator's, or this pass's).
    templates: NodeTemplates = field(default_factory=NodeTemplates)
    rendered: RenderedCluster = field(default_factory=lambda: RenderedCluster([], {}))
    applied: List[str] = field(default_factory=list)
    # The digest of the Slurm configuration slurmctld runs with (status.configHash).
    config_hash: str = ""
    # Whether slurmctld's topology holds every node; None for a cluster without a topology.
    topology_ready: Optional[bool] = None
    not_requeued: List[JobNotRequeued] = field(default_factory=list)
    # The REST API's key set as the Secret holds it after this pass (rest_keys.py); None without one.
    rest_keys: Optional[KeySet] = None
    # The digest of the key set slurmctld checks tokens with (status.restKeys.inEffect).
    rest_keys_in_effect: str = ""
    # The controller pods as the pass read them (controller.py); None before that step.
    controllers: Optional[Controllers] = None
    # Whether the controllers' state claim can be mounted by several (a 0.3 claim cannot).
    state_claim_shared: bool = True
    # slurmdbd as the serving controller sees it (slurm/facts.accounting_facts); None without
    # accounting or while Slurm cannot be asked.
    accounting: Optional[Dict[str, Any]] = None
    # The last restore (status.restore, restores.py); None when none was asked for.
    restore: Optional[Dict[str, Any]] = None
    # The components a restore under way holds at no pods (their StatefulSets rendered at 0).
    held: FrozenSet[str] = frozenset()

    @property
    def previous_status(self) -> Mapping[str, Any]:
        """The SlurmCluster's status as the pass found it."""
        return self.cluster_obj.get("status") or {}
