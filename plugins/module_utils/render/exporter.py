# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Prometheus exporter: a one-pod Deployment of its own, a Service whose port is named
'metrics', and the NetworkPolicy that lets Prometheus in.

Its own pod rather than a container beside slurmctld: while slurmctld's pod is replaced the
exporter still answers, with slurm_up 0, and its scrapes never take from slurmctld's CPU
limit. It runs munged with the cluster's key and asks Slurm's clients, as a user would, and
reads the jail (read-only) for its usage and the health checks' results.
"""

from __future__ import annotations

from typing import Any, Dict, List

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.quantity import parse_quantity
from ansible_collections.slurmkube.core.plugins.module_utils.render import common, pods

USAGE_VOLUME = "jail-usage"


def _claim_size_env(cluster: SlurmCluster) -> List[Dict[str, Any]]:
    """The size the jail's claim asks for, where the cluster makes the claim (a site's own claim,
    spec.jail.existingClaim, and an NFS export may be any size: their usage is still counted)."""
    jail = cluster.spec.jail
    if jail.existing_claim or jail.nfs is not None:
        return []
    return [{"name": C.ENV_JAIL_CLAIM_BYTES, "value": str(int(parse_quantity(str(jail.size))))}]


def _exporter_container(cluster: SlurmCluster) -> Dict[str, Any]:
    exporter = cluster.spec.exporter
    images = cluster.spec.images
    return {
        "name": C.CONTAINER_EXPORTER,
        "image": images.exporter,
        "imagePullPolicy": images.pull_policy,
        "env": common.env(cluster, C.ROLE_EXPORTER) + [
            {"name": C.ENV_EXPORTER_PORT, "value": str(exporter.port)},
            {"name": C.ENV_EXPORTER_MIN_INTERVAL, "value": str(exporter.min_interval_seconds)},
        ] + _claim_size_env(cluster),
        "ports": [{"name": "metrics", "containerPort": exporter.port, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": common.METRICS_PATH, "port": exporter.port}, "periodSeconds": 30,
                           "timeoutSeconds": 25},
        "resources": common.resources(exporter.resources),
        "securityContext": common.confined_security_context(),
        # The jail, read-only: its usage and the health checks' results; the usage counted beside it.
        "volumeMounts": common.common_mounts() + [
            {"name": common.JAIL_VOLUME, "mountPath": C.JAIL_MOUNT_PATH, "readOnly": True},
            {"name": USAGE_VOLUME, "mountPath": C.JAIL_USAGE_DIR, "readOnly": True}],
    }


def _jail_usage_container(cluster: SlurmCluster) -> Dict[str, Any]:
    """The jail's usage counted as du does, every jailUsageIntervalSeconds: root with
    CAP_DAC_READ_SEARCH alone (it reads every home and can change nothing), the jail read-only, a
    read-only root, no token; a little CPU, at the lowest priority (nice: the program's own)."""
    exporter = cluster.spec.exporter
    images = cluster.spec.images
    return {
        "name": C.CONTAINER_JAIL_USAGE,
        "image": images.exporter,
        "imagePullPolicy": images.pull_policy,
        "command": ["/usr/bin/tini", "--", "nice", "-n", "19", "python3", C.JAIL_USAGE_PROGRAM],
        "env": [{"name": C.ENV_JAIL_USAGE_INTERVAL, "value": str(exporter.jail_usage_interval_seconds)}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "200m", "memory": "256Mi"}},
        "securityContext": common.root_only_with(["DAC_READ_SEARCH"]),
        "volumeMounts": [{"name": common.JAIL_VOLUME, "mountPath": C.JAIL_MOUNT_PATH, "readOnly": True},
                         {"name": USAGE_VOLUME, "mountPath": C.JAIL_USAGE_DIR}],
    }


def render_exporter_deployment(cluster: SlurmCluster) -> common.Manifest:
    exporter = cluster.spec.exporter
    pod_labels = names.object_labels(cluster.name, C.COMPONENT_EXPORTER)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": common.metadata(cluster, names.exporter(cluster.name), C.COMPONENT_EXPORTER),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": names.selector_labels(cluster.name, C.COMPONENT_EXPORTER)},
            "template": pods.customised({
                "metadata": {"labels": pod_labels, "annotations": common.scrape_annotations(exporter.port)},
                "spec": {
                    **common.pod_identity(cluster),
                    "containers": [_exporter_container(cluster), _jail_usage_container(cluster)],
                    "volumes": [common.config_volume(cluster), common.munge_volume(cluster),
                                common.jail_volume(cluster),
                                {"name": USAGE_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}],
                    **common.login_hosts_dns(cluster),
                },
            }, pods.component_options(cluster, exporter.pod)),
        },
    }


def render_exporter_service(cluster: SlurmCluster) -> common.Manifest:
    port = cluster.spec.exporter.port
    metadata = common.metadata(cluster, names.exporter(cluster.name), C.COMPONENT_EXPORTER)
    metadata["annotations"] = common.scrape_annotations(port)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        # Headless: Prometheus discovers the pod behind it, whatever discovery it has (DNS included).
        "spec": {
            "clusterIP": "None",
            "selector": names.selector_labels(cluster.name, C.COMPONENT_EXPORTER),
            "ports": [{"name": "metrics", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def render_scrape_policy(cluster: SlurmCluster) -> common.Manifest:
    """Prometheus lives outside the cluster's pods: it may reach the metrics port, nothing else."""
    exporter = cluster.spec.exporter
    rule: Dict[str, Any] = {"ports": [{"protocol": "TCP", "port": exporter.port}]}
    if exporter.scrape_from:
        rule["from"] = [dict(peer) for peer in exporter.scrape_from]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": common.metadata(cluster, names.network_policy(cluster.name, "metrics"), C.COMPONENT_CONFIG),
        "spec": {"podSelector": {"matchLabels": names.selector_labels(cluster.name, C.COMPONENT_EXPORTER)},
                 "policyTypes": ["Ingress"], "ingress": [rule]},
    }


def render_exporter(cluster: SlurmCluster) -> List[common.Manifest]:
    """The exporter's objects when spec.exporter.enabled, in apply order."""
    if not cluster.spec.exporter.enabled:
        return []
    objects = [render_exporter_service(cluster), render_exporter_deployment(cluster)]
    if cluster.spec.network_policy:
        objects.append(render_scrape_policy(cluster))
    return objects
