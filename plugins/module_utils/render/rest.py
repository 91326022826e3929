# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's REST API (spec.rest): slurmrestd pods behind a Service, the NetworkPolicy that
names who may reach them, and what slurmctld and slurmdbd need to check its tokens.

slurmrestd keeps no state and holds no key: with SLURM_JWT=daemon it passes each request's
token on, and slurmctld and slurmdbd check it (auth/jwt, an alternative auth type beside munge)
against the public keys of the cluster's JWT key Secret, mounted alone from that Secret.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.render import common, pods


def rest_selector(cluster: SlurmCluster) -> Dict[str, str]:
    return names.selector_labels(cluster.name, C.COMPONENT_REST)


def _rest_container(cluster: SlurmCluster) -> Dict[str, Any]:
    images = cluster.spec.images
    security = common.confined_security_context()
    security.update({"runAsUser": C.SLURMRESTD_UID, "runAsGroup": C.SLURMRESTD_UID, "runAsNonRoot": True,
                     "readOnlyRootFilesystem": True})
    security["capabilities"] = {"drop": ["ALL"]}
    return {
        "name": C.CONTAINER_REST,
        # The controller's image: slurmrestd of the very Slurm build slurmctld runs.
        "image": images.controller,
        "imagePullPolicy": images.pull_policy,
        "env": common.env(cluster, C.ROLE_REST) + [{"name": C.ENV_REST_PORT, "value": str(C.SLURMRESTD_PORT)}],
        "ports": [{"name": "rest", "containerPort": C.SLURMRESTD_PORT, "protocol": "TCP"}],
        # slurmrestd answers nothing without a token header; a port that accepts is what can be told.
        "readinessProbe": common.tcp_probe(C.SLURMRESTD_PORT, period=5),
        "resources": common.resources(cluster.spec.rest.resources),
        "securityContext": security,
        "volumeMounts": [{"name": common.CONFIG_VOLUME, "mountPath": C.SLURM_CONFIG_DIR, "readOnly": True}],
    }


def render_rest_deployment(cluster: SlurmCluster, config_hash: str) -> common.Manifest:
    """slurmrestd reads slurm.conf at start: it is replaced with slurmctld when settings only a
    restart applies change (`config_hash`: slurm_config.controller_config_hash), the controllers
    it must find among them."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": common.metadata(cluster, names.rest(cluster.name), C.COMPONENT_REST),
        "spec": {
            "replicas": cluster.spec.rest.replicas,
            "selector": {"matchLabels": rest_selector(cluster)},
            "template": pods.customised({
                "metadata": {"labels": names.object_labels(cluster.name, C.COMPONENT_REST),
                             "annotations": {C.ANNOTATION_CONFIG_HASH: config_hash}},
                "spec": {
                    **common.pod_identity(cluster),
                    "containers": [_rest_container(cluster)],
                    "volumes": [common.config_volume(cluster)],
                },
            }, pods.component_options(cluster, cluster.spec.rest.pod)),
        },
    }


def render_rest_service(cluster: SlurmCluster) -> common.Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": common.metadata(cluster, names.rest(cluster.name), C.COMPONENT_REST),
        "spec": {
            "type": "ClusterIP",
            "selector": rest_selector(cluster),
            "ports": [{"name": "rest", "port": C.SLURMRESTD_PORT, "targetPort": C.SLURMRESTD_PORT,
                       "protocol": "TCP"}],
        },
    }


def render_rest_pdb(cluster: SlurmCluster) -> Optional[common.Manifest]:
    """Keep one slurmrestd up during node drains."""
    return common.one_up_budget(cluster, names.rest(cluster.name), C.COMPONENT_REST, cluster.spec.rest.replicas)


def render_rest_policy(cluster: SlurmCluster) -> common.Manifest:
    """Only the peers spec.rest.allowFrom names reach slurmrestd, and only its port; with none,
    the policy selects the pods and admits nothing."""
    peers = [dict(peer) for peer in cluster.spec.rest.allow_from]
    ingress = [{"from": peers, "ports": [{"protocol": "TCP", "port": C.SLURMRESTD_PORT}]}] if peers else []
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": common.metadata(cluster, names.network_policy(cluster.name, C.COMPONENT_REST), C.COMPONENT_CONFIG),
        "spec": {"podSelector": {"matchLabels": rest_selector(cluster)}, "policyTypes": ["Ingress"],
                 "ingress": ingress},
    }


def render_rest(cluster: SlurmCluster, config_hash: str) -> List[common.Manifest]:
    """The REST API's objects when spec.rest.enabled, in apply order (its key Secret is made by
    the operator: it holds generated keys)."""
    if not cluster.spec.rest.enabled:
        return []
    objects = [render_rest_service(cluster), render_rest_deployment(cluster, config_hash)]
    budget = render_rest_pdb(cluster)
    if budget is not None:
        objects.append(budget)
    if cluster.spec.network_policy:
        objects.append(render_rest_policy(cluster))
    return objects
