# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The labels on every object of a cluster, and the selectors that find a component's pods.

Renderers put them on objects; the operator and the modules select pods with them, knowing
only the cluster's name.
"""

from __future__ import annotations

from typing import Dict, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C


def selector_labels(cluster: str, component: str, nodeset: Optional[str] = None) -> Dict[str, str]:
    """Labels that select a component's pods; they never change over an object's life."""
    labels = {C.LABEL_CLUSTER: cluster, C.LABEL_COMPONENT: component}
    if nodeset is not None:
        labels[C.LABEL_NODESET] = nodeset
    return labels


def object_labels(cluster: str, component: str, nodeset: Optional[str] = None) -> Dict[str, str]:
    """Every label we put on objects of a component."""
    out = {
        C.LABEL_NAME: "slurm",
        C.LABEL_INSTANCE: cluster,
        C.LABEL_PART_OF: C.MANAGED_BY,
        C.LABEL_MANAGED_BY: C.MANAGED_BY,
    }
    out.update(selector_labels(cluster, component, nodeset))
    return out
