# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a site adds to the product's pods (model/pods.py: spec.pods, then a component's placement
and pod), put into a rendered pod template without taking anything of the product's away."""

from __future__ import annotations

import copy
from typing import Any, Dict, Optional

from ansible_collections.slurmkube.core.plugins.module_utils.model.pods import PodOptions, combined, merged_affinity
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import Placement, SlurmCluster

Template = Dict[str, Any]


def component_options(cluster: SlurmCluster, own: Optional[PodOptions] = None,
                      placement: Optional[Placement] = None) -> PodOptions:
    """A component's pod options: the cluster's spec.pods, then its placement, then its own pod."""
    layers = [cluster.spec.pods]
    if placement is not None:
        layers.append(PodOptions(node_selector=dict(placement.node_selector), tolerations=list(placement.tolerations)))
    if own is not None:
        layers.append(own)
    return combined(*layers)


def customised(template: Template, options: PodOptions) -> Template:
    """A copy of TEMPLATE (a pod template: metadata and spec) with OPTIONS in it: the product's
    labels and annotations win over the site's of one key; the site's affinity terms, tolerations,
    volumes, each container's env and mounts come after the product's."""
    out = copy.deepcopy(template)
    meta, spec = out.setdefault("metadata", {}), out["spec"]
    for key, extra in (("labels", options.labels), ("annotations", options.annotations)):
        if extra:
            meta[key] = {**extra, **meta.get(key, {})}
    if options.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in options.image_pull_secrets]
    if options.priority_class_name:
        spec["priorityClassName"] = options.priority_class_name
    if options.node_selector:
        spec["nodeSelector"] = {**options.node_selector, **spec.get("nodeSelector", {})}
    affinity = merged_affinity(spec.get("affinity"), options.affinity)
    if affinity:
        spec["affinity"] = affinity
    _extend(spec, "tolerations", options.tolerations)
    _extend(spec, "volumes", options.volumes)
    for container in spec["containers"]:
        _extend(container, "env", options.env)
        _extend(container, "volumeMounts", options.volume_mounts)
    return out


def _extend(holder: Dict[str, Any], key: str, items: Any) -> None:
    if items:
        holder[key] = list(holder.get(key, [])) + [dict(item) for item in items]
