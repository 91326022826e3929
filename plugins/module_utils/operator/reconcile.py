# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make one Slurm cluster equal to its SlurmCluster and NodeSets, one pass at a time.

A pass is named steps over one Pass (pass_state.py), in this order:
    read       the spec and node sets (read.py): an invalid spec ends the pass here
    apply      the cluster's secrets once (secrets.py), the REST API's key set completed and
               pruned (rest_keys.py), the munge key rolled to the Secret's (munge_key.py)
    read       the controller pods: which serves (controller.py); Slurm's nodes through the
               controller, whether slurmdbd answers, the workers' switches (read.py)
    plan       each worker StatefulSet's replicas and scale-down steps (scale.py)
    restore    a restore asked for or under way (restores.py): the daemons that write what it
               restores held at no pods, its Job once they are gone
    check      a new controller image against its pre-flight Job (upgrade.py): while it waits or
               was refused, the pass ends here and applies nothing; once it passed, which images
               this stage of the rollout (Slurm's order) renders
    render     every object and config file, once (apply.py → render/cluster.py)
    apply      what differs (apply.py)
    act        replace an outdated controller pod (controller.py), on Slurm's nodes (nodes.py),
               reconfigure once slurmctld reads the new files (reconfigure.py)
    report     the statuses (report.py)
The operator runs a pass on every event and on a timer. It writes only what differs, so a
no-op pass makes no API writes.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import SeenEqual
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import utc_now
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.operator.apply import apply_objects, render_objects
from ansible_collections.slurmkube.core.plugins.module_utils.operator.controller import (
    read_controllers,
    replace_outdated_controller,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.munge_key import roll_munge_key
from ansible_collections.slurmkube.core.plugins.module_utils.operator.nodes import (
    act_on_nodes,
    retire_removed_nodesets,
    retire_removed_on_demand_sets,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import NodeTemplates, Pass
from ansible_collections.slurmkube.core.plugins.module_utils.operator.read import (
    read_accounting,
    read_placement,
    read_slurm,
    read_spec,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.reconfigure import reconfigure_if_needed
from ansible_collections.slurmkube.core.plugins.module_utils.operator.report import report
from ansible_collections.slurmkube.core.plugins.module_utils.operator.rest_keys import keep_rest_keys
from ansible_collections.slurmkube.core.plugins.module_utils.operator.restores import check_restore
from ansible_collections.slurmkube.core.plugins.module_utils.operator.scale import plan_scaling
from ansible_collections.slurmkube.core.plugins.module_utils.operator.secrets import ensure_secrets
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Clock, Event
from ansible_collections.slurmkube.core.plugins.module_utils.operator.upgrade import check_upgrade

# The steps after the read of the spec, in order.
STEPS: Tuple[Callable[[Pass], None], ...] = (
    ensure_secrets,
    keep_rest_keys,
    roll_munge_key,
    read_controllers,
    read_slurm,
    read_accounting,
    read_placement,
    plan_scaling,
    check_restore,
    check_upgrade,
    render_objects,
    apply_objects,
    replace_outdated_controller,
    act_on_nodes,
    retire_removed_nodesets,
    retire_removed_on_demand_sets,
    reconfigure_if_needed,
)


class Outcome(NamedTuple):
    """What one reconcile pass found and did: the statuses to write (the NodeSets' as read by the
    pass, by name), the Events to post, the objects applied."""

    status: Dict[str, Any]
    nodeset_status: Dict[str, Dict[str, Any]]
    events: List[Event]
    applied: List[str]
    nodesets: Dict[str, Dict[str, Any]]


class Reconciler:
    """One reconcile pass over one SlurmCluster."""

    def __init__(self, kube: Kube, clock: Clock = utc_now, seen: Optional[SeenEqual] = None,
                 templates: Optional[NodeTemplates] = None) -> None:
        self.kube = kube
        self.clock = clock
        self.seen = seen
        # The operator's, shared with its power loop; a pass of its own otherwise (a module's run).
        self.templates = templates if templates is not None else NodeTemplates()

    def reconcile(self, cluster_obj: Mapping[str, Any]) -> Outcome:
        """Bring the cluster one step closer to its spec and report where it is."""
        try:
            p = read_spec(self.kube, self.clock, self.seen, cluster_obj)
        except SpecError as exc:
            return invalid(cluster_obj, str(exc))
        p.templates = self.templates
        for step in STEPS:
            step(p)
            if p.slurm_state.pending:
                break
        status, nodeset_status = report(p)
        return Outcome(status, nodeset_status, p.events, p.applied, p.live_nodesets)


def invalid(cluster_obj: Mapping[str, Any], message: str) -> Outcome:
    """Report a bad spec and change nothing else. The Warning goes out once per generation:
    the status already says it for the passes after (every resync and node event)."""
    previous = (cluster_obj.get("status") or {})
    generation = cluster_obj["metadata"].get("generation", 0)
    status = dict(previous, phase=C.PHASE_INVALID, message=message, observedGeneration=generation)
    told = previous.get("phase") == C.PHASE_INVALID and previous.get("observedGeneration") == generation
    return Outcome(status, {}, [] if told else [Event("Warning", "InvalidSpec", message)], [], {})
