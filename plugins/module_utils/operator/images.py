# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Images a cluster's pods cannot pull: the ImagesPulled condition, which the slurm_cluster module
fails on at once (not after its whole wait), and a Warning Event when it turns false."""

from __future__ import annotations

import datetime
from dataclasses import fields
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import image_pull_failures, pods_by_name
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import Pass
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Event, condition

EVENT_REASON = "ImagePullFailed"
# A message names this many pods at most (a node set of hundreds fails alike).
NAMED_PODS = 3


def spec_images(cluster: SlurmCluster) -> List[str]:
    """The images the cluster's spec names now (a pod still on an earlier spec's image is being
    replaced: its failure is no longer the spec's)."""
    images = cluster.spec.images
    return [getattr(images, f.name) for f in fields(images) if f.name != "pull_policy"]


def unpullable(pods: Sequence[Mapping[str, Any]], wanted: Sequence[str]) -> List[str]:
    """'image I (pod P): reason: message' for each pod that cannot pull an image of WANTED."""
    return ["image %s (pod %s): %s" % (image, pod["metadata"]["name"], why)
            for pod in pods for image, why in image_pull_failures(pod) if image in wanted]


def images_message(failures: Sequence[str]) -> str:
    if not failures:
        return "no pod is refused its image"
    more = len(failures) - NAMED_PODS
    return "cannot pull " + "; ".join(failures[:NAMED_PODS]) + ("; and %d more" % more if more > 0 else "")


def images_condition(p: Pass, generation: int, previous: Sequence[Mapping[str, Any]],
                     now: datetime.datetime) -> Tuple[Dict[str, Any], List[Event]]:
    """The ImagesPulled condition from the cluster's pods, and the Event of a new failure (or a
    new message of one; the client logs each Event it posts)."""
    pods = pods_by_name(p.kube, p.cluster.namespace, {C.LABEL_CLUSTER: p.cluster.name})
    failures = unpullable(pods, spec_images(p.cluster))
    message = images_message(failures)
    found = condition(C.CONDITION_IMAGES_PULLED, not failures, EVENT_REASON if failures else "Pulled", message,
                      generation, previous, now)
    before = next((c for c in previous if c.get("type") == C.CONDITION_IMAGES_PULLED), {})
    if not failures or before.get("message") == message:
        return found, []
    return found, [Event("Warning", EVENT_REASON, message)]
