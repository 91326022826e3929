# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Login nodes: sshd pods whose sessions are chrooted into the jail, and their Service."""

from __future__ import annotations

from typing import Any, Dict, List

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.render import common, directory, pods

SSHD_VOLUME = "sshd-config"
HOST_KEYS_VOLUME = "ssh-host-keys"
HOST_KEY_TYPES = ("ed25519", "ecdsa", "rsa")


def render_sshd_config(cluster: SlurmCluster) -> str:
    """sshd_config of the login pods.

    sshd reads authorized_keys before the chroot, so the path points into the jail as the
    pod sees it; the session itself then lands in the jail.
    """
    directory = cluster.spec.directory
    settings: List[str] = [
        "Port %d" % C.SSH_PORT,
        "PidFile /run/sshd.pid",
    ]
    settings += ["HostKey /etc/ssh/ssh_host_%s_key" % kind for kind in HOST_KEY_TYPES]
    settings += [
        "ChrootDirectory %s" % C.JAIL_MOUNT_PATH,
        "AuthorizedKeysFile %s/home/%%u/.ssh/authorized_keys" % C.JAIL_MOUNT_PATH,
        "PubkeyAuthentication yes",
        "PasswordAuthentication %s" % ("yes" if directory.password_login else "no"),
        "KbdInteractiveAuthentication no",
        "PermitRootLogin no",
        # With a directory, PAM: SSSD's account check and password, and the home made at first login.
        "UsePAM %s" % ("yes" if directory.ldap is not None else "no"),
        "X11Forwarding no",
        "AllowTcpForwarding yes",
        "PrintMotd no",
        "ClientAliveInterval 60",
        "LogLevel INFO",
        "Subsystem sftp internal-sftp",
    ]
    header = "# sshd_config for Slurm cluster %s/%s.\n# Managed by slurmkube: changes made here are overwritten.\n" % (
        cluster.namespace, cluster.name)
    return header + "\n".join(settings) + "\n"


def render_sshd_config_map(cluster: SlurmCluster) -> common.Manifest:
    """The sshd_config ConfigMap."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": common.metadata(cluster, names.sshd_config(cluster.name), C.COMPONENT_LOGIN),
        "data": {C.SSHD_CONFIG_FILE: render_sshd_config(cluster)},
    }


def render_login_service(cluster: SlurmCluster) -> common.Manifest:
    """Where users ssh to: NodePort, LoadBalancer or ClusterIP."""
    login = cluster.spec.login
    port: Dict[str, Any] = {"name": "ssh", "port": C.SSH_PORT, "targetPort": C.SSH_PORT, "protocol": "TCP"}
    if login.node_port is not None:
        port["nodePort"] = login.node_port
    metadata = common.metadata(cluster, names.login(cluster.name), C.COMPONENT_LOGIN)
    if login.service.annotations:
        metadata["annotations"] = dict(login.service.annotations)
    spec: Dict[str, Any] = {
        "type": login.service_type,
        "selector": names.selector_labels(cluster.name, C.COMPONENT_LOGIN),
        "ports": [port],
    }
    if login.service.load_balancer_source_ranges:
        spec["loadBalancerSourceRanges"] = list(login.service.load_balancer_source_ranges)
    if login.service.external_traffic_policy is not None:
        spec["externalTrafficPolicy"] = login.service.external_traffic_policy
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}


def render_login_hosts_service(cluster: SlurmCluster) -> common.Manifest:
    """Headless Service that gives each login pod a DNS name (the StatefulSet's serviceName).

    srun reports its host's name to slurmctld, which sends replies there; the controller and
    workers search this domain (common.login_hosts_dns), so the bare pod name resolves.
    """
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": common.metadata(cluster, names.login_hosts(cluster.name), C.COMPONENT_LOGIN),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": names.selector_labels(cluster.name, C.COMPONENT_LOGIN),
            "ports": [{"name": "ssh", "port": C.SSH_PORT, "targetPort": C.SSH_PORT, "protocol": "TCP"}],
        },
    }


def _login_container(cluster: SlurmCluster) -> Dict[str, Any]:
    images = cluster.spec.images
    return {
        "name": "sshd",
        "image": images.login,
        "imagePullPolicy": images.pull_policy,
        "env": common.env(cluster, C.ROLE_LOGIN) + (
            [{"name": C.ENV_DIRECTORY_MAKE_HOMES, "value": "1"}]
            if cluster.spec.directory.ldap is not None and cluster.spec.directory.make_homes else []),
        "ports": [{"name": "ssh", "containerPort": C.SSH_PORT, "protocol": "TCP"}],
        "readinessProbe": common.tcp_probe(C.SSH_PORT),
        "resources": common.resources(cluster.spec.login.resources),
        # Bind /proc, /dev and Slurm's sockets into the jail for the sessions (mount: SYS_ADMIN,
        # which the runtime's default seccomp profile then allows; AppArmor's default denies it),
        # chroot sessions into it. sshd drops SYS_ADMIN once the mounts are made (entrypoint).
        "securityContext": {"capabilities": {"add": ["SYS_ADMIN", "SYS_CHROOT"],
                                             "drop": list(common.UNUSED_CAPABILITIES)},
                            "seccompProfile": {"type": "RuntimeDefault"},
                            "appArmorProfile": {"type": "Unconfined"}},
        "volumeMounts": common.common_mounts() + [
            {"name": common.JAIL_VOLUME, "mountPath": C.JAIL_MOUNT_PATH},
            {"name": SSHD_VOLUME, "mountPath": C.SSHD_CONFIG_MOUNT_DIR, "readOnly": True},
            {"name": HOST_KEYS_VOLUME, "mountPath": C.SSH_HOST_KEYS_MOUNT_DIR, "readOnly": True},
        ],
    }


def render_login_statefulset(cluster: SlurmCluster) -> common.Manifest:
    """The login StatefulSet; it rolls when sshd_config changes (sshd reads it at start) or
    when its pods' DNS domain does (a pod takes it from serviceName when it is made)."""
    login = cluster.spec.login
    pod_spec: Dict[str, Any] = {
        **common.pod_identity(cluster),
        "containers": [_login_container(cluster)],
        "volumes": [
            common.config_volume(cluster),
            common.munge_volume(cluster),
            common.jail_volume(cluster),
            {"name": SSHD_VOLUME, "configMap": {"name": names.sshd_config(cluster.name)}},
            {"name": HOST_KEYS_VOLUME,
             "secret": {"secretName": names.ssh_host_keys_secret(cluster.name), "defaultMode": 0o400}},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": common.metadata(cluster, names.login(cluster.name), C.COMPONENT_LOGIN),
        "spec": {
            "replicas": login.replicas,
            "serviceName": names.login_hosts(cluster.name),
            "selector": {"matchLabels": names.selector_labels(cluster.name, C.COMPONENT_LOGIN)},
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate"},
            "template": pods.customised({
                "metadata": {
                    "labels": names.object_labels(cluster.name, C.COMPONENT_LOGIN),
                    "annotations": {C.ANNOTATION_CONFIG_HASH: content_hash(
                        [render_sshd_config(cluster), names.login_hosts(cluster.name)]
                        + [digest for digest in [directory.config_digest(cluster)] if digest])},
                },
                "spec": directory.with_directory(cluster, pod_spec),
            }, pods.component_options(cluster, login.pod, login.placement)),
        },
    }
