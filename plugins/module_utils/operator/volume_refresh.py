# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""New config files and munge keys in the pods within seconds, not at the kubelet's next periodic sync.

The kubelet refreshes a pod's ConfigMap and Secret volumes when it syncs the pod: on its
periodic sync (syncFrequency, a minute by default) or at once when the pod object changes. So
the operator annotates the pods that wait for new content with what they should see, once per
content: while the Slurm configuration in effect is not the rendered one, each running pod that
mounts the cluster's ConfigMap (its files' digest); while a munge key rotation waits for pods to
mount the new key, those pods (its fingerprint). Measured on kind (Kubernetes 1.35): a changed
ConfigMap key reached the pod 1.0-1.1 s after the change with the annotation, 1.6, 51 and 62 s
without it.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Mapping, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube, KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import pod_running, pods_by_name
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster


def refresh_pods(kube: Kube, namespace: str, pods: Iterable[Mapping[str, Any]], annotation: str,
                 value: str) -> None:
    """Annotate each pod with `value` unless it carries it already: its kubelet syncs it at once."""
    for pod in pods:
        meta = pod["metadata"]
        if (meta.get("annotations") or {}).get(annotation) == value:
            continue
        try:
            kube.merge_patch("v1", "Pod", meta["name"], namespace, {"metadata": {"annotations": {annotation: value}}})
        except KubeError:
            # A pod deleted since the list needs nothing (its successor mounts what is there now);
            # any other keeps the kubelet's periodic refresh, which this only hastens.
            continue


def files_digest(files: Mapping[str, str]) -> str:
    """The digest of the config files, by name and content."""
    return content_hash("%s\n%s" % kv for kv in sorted(files.items()))


def mounts_config_map(pod: Mapping[str, Any], name: str) -> bool:
    """The pod has a volume made from the ConfigMap of that name."""
    volumes = (pod.get("spec") or {}).get("volumes") or []
    return any((v.get("configMap") or {}).get("name") == name for v in volumes)


def config_readers(pods: Sequence[Mapping[str, Any]], config_map: str) -> List[Mapping[str, Any]]:
    """The running pods that mount the ConfigMap (a pod still starting mounts it as it is now)."""
    return [pod for pod in pods if pod_running(pod) and mounts_config_map(pod, config_map)]


def refresh_config_volumes(kube: Kube, cluster: SlurmCluster, files: Mapping[str, str]) -> None:
    """Make the kubelets of the cluster's pods sync them now, so their ConfigMap volume holds `files`."""
    pods = pods_by_name(kube, cluster.namespace, {C.LABEL_CLUSTER: cluster.name})
    refresh_pods(kube, cluster.namespace, config_readers(pods, names.slurm_config(cluster.name)),
                 C.ANNOTATION_CONFIG_FILES, files_digest(files))
