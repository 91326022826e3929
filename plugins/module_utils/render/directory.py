# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Directory users (spec.directory): sssd.conf's template, and SSSD beside the containers that
look users up.

SSSD runs as a native sidecar (an init container that keeps running) in the login, controller,
worker and slurmdbd pods (every daemon that looks users up); its sockets live in an emptyDir
every container of the pod mounts at SSSD_PIPES_DIR, where glibc's sss module finds them. Login
sessions (the login role binds the directory into the jail) and jobs (plugstack.conf's binds,
read-only: root in a job must not replace the sockets other users' jobs resolve through) see the
same sockets in the jail. The bind password never passes through the operator: the sidecar reads
it from the site's Secret and writes sssd.conf (0600) itself.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.model.directory import Ldap
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.render import common

PIPES_VOLUME = "sssd-pipes"
TEMPLATE_VOLUME = "sssd-template"
CA_VOLUME = "directory-ca"
# What SSSD writes besides its sockets: its cache, its memory-mapped tables, sssd.conf itself.
STATE_VOLUME = "sssd-state"
STATE_DIRS = ("/var/lib/sss/db", "/var/lib/sss/mc", "/var/lib/sss/pubconf", "/etc/sssd", "/run")
DOMAIN = "directory"
# What sssd's monitor and its providers use: dropping to the sssd user, owning its caches, and
# reading the 0600 files it writes as root.
SSSD_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "SETGID", "SETUID"]


def directory_ldap(cluster: SlurmCluster) -> Optional[Ldap]:
    return cluster.spec.directory.ldap


def render_sssd_config(cluster: SlurmCluster, ldap: Ldap) -> str:
    """sssd.conf for the cluster's directory LDAP, without the bind password (the sidecar adds
    ldap_default_authtok). Root and the jail's system accounts are never looked up in the directory
    (filter_users, min_id)."""
    domain = [
        "id_provider = ldap",
        "auth_provider = ldap",
        "ldap_uri = %s" % ", ".join(ldap.uris),
        "ldap_search_base = %s" % ldap.search_base,
        "ldap_schema = %s" % ldap.schema,
        "min_id = %d" % ldap.min_id,
        "cache_credentials = false",
        "enumerate = false",
    ]
    domain += ["%s = %s" % (key, value) for key, value in (
        ("ldap_user_search_base", ldap.user_search_base), ("ldap_group_search_base", ldap.group_search_base),
        ("ldap_default_bind_dn", ldap.bind_dn)) if value]
    if ldap.ca_secret:
        domain += ["ldap_tls_reqcert = demand",
                   "ldap_tls_cacert = %s/%s" % (C.DIRECTORY_CA_MOUNT_DIR, C.DIRECTORY_CA_SECRET_KEY)]
        if any(uri.startswith("ldap://") for uri in ldap.uris):
            domain.append("ldap_id_use_start_tls = true")
    else:
        domain.append("ldap_tls_reqcert = never")
    lines = ["# sssd.conf for Slurm cluster %s/%s (spec.directory)." % (cluster.namespace, cluster.name),
             "# Managed by slurmkube: changes made here are overwritten.",
             "[sssd]", "services = nss, pam", "domains = %s" % DOMAIN, "",
             "[nss]", "filter_users = root", "filter_groups = root", "",
             "[pam]", "",
             "[domain/%s]" % DOMAIN, *domain]
    return "\n".join(lines) + "\n"


def render_sssd_config_map(cluster: SlurmCluster) -> Optional[common.Manifest]:
    """The ConfigMap of sssd.conf's template; None without a directory."""
    ldap = directory_ldap(cluster)
    if ldap is None:
        return None
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": common.metadata(cluster, names.sssd_config(cluster.name), C.COMPONENT_DIRECTORY),
            "data": {C.SSSD_CONFIG_FILE: render_sssd_config(cluster, ldap)}}


def sssd_sidecar(cluster: SlurmCluster, ldap: Ldap) -> Dict[str, Any]:
    """SSSD for the cluster's directory LDAP, a native sidecar: started before the pod's
    containers, Ready once its NSS socket is there, and running as long as the pod. Root (sssd of
    Debian is built to run as root) with the capabilities it uses and a read-only root filesystem."""
    images = cluster.spec.images
    env: List[Dict[str, Any]] = [{"name": C.ENV_ROLE, "value": C.ROLE_SSSD}]
    if ldap.bind_password_secret:
        env.append({"name": C.ENV_DIRECTORY_BIND_PASSWORD, "valueFrom": {"secretKeyRef": {
            "name": ldap.bind_password_secret, "key": C.DIRECTORY_PASSWORD_SECRET_KEY}}})
    mounts = [{"name": PIPES_VOLUME, "mountPath": C.SSSD_PIPES_DIR},
              {"name": TEMPLATE_VOLUME, "mountPath": C.SSSD_TEMPLATE_MOUNT_DIR, "readOnly": True}]
    mounts += [{"name": STATE_VOLUME, "mountPath": path, "subPath": path.strip("/").replace("/", "-")}
               for path in STATE_DIRS]
    if ldap.ca_secret:
        mounts.append({"name": CA_VOLUME, "mountPath": C.DIRECTORY_CA_MOUNT_DIR, "readOnly": True})
    return {
        "name": C.CONTAINER_SSSD,
        "image": images.sssd,
        "imagePullPolicy": images.pull_policy,
        "restartPolicy": "Always",
        "env": env,
        "startupProbe": {"exec": {"command": ["test", "-S", "%s/nss" % C.SSSD_PIPES_DIR]},
                         "periodSeconds": 1, "failureThreshold": 120},
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        "securityContext": common.root_only_with(SSSD_CAPABILITIES),
        "volumeMounts": mounts,
    }


def with_directory(cluster: SlurmCluster, pod_spec: Dict[str, Any]) -> Dict[str, Any]:
    """POD_SPEC with SSSD beside its containers (first of the init containers: the others may look
    users up) and its sockets mounted in each container; unchanged without a directory."""
    ldap = directory_ldap(cluster)
    if ldap is None:
        return pod_spec
    pipes = {"name": PIPES_VOLUME, "mountPath": C.SSSD_PIPES_DIR, "readOnly": True}
    containers = [dict(c, volumeMounts=list(c.get("volumeMounts") or []) + [pipes]) for c in pod_spec["containers"]]
    volumes = [{"name": PIPES_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
               {"name": STATE_VOLUME, "emptyDir": {"sizeLimit": "256Mi"}},
               {"name": TEMPLATE_VOLUME, "configMap": {"name": names.sssd_config(cluster.name)}}]
    if ldap.ca_secret:
        volumes.append({"name": CA_VOLUME, "secret": {"secretName": ldap.ca_secret, "defaultMode": 0o444}})
    return dict(pod_spec, initContainers=[sssd_sidecar(cluster, ldap)] + list(pod_spec.get("initContainers") or []),
                containers=containers, volumes=list(pod_spec.get("volumes") or []) + volumes)


def config_digest(cluster: SlurmCluster) -> str:
    """What a pod with SSSD reads at start, to roll it by: "" without a directory, so a cluster
    without one keeps the digests it had."""
    ldap = directory_ldap(cluster)
    return content_hash([render_sssd_config(cluster, ldap)]) if ldap is not None else ""


def jail_binds(cluster: SlurmCluster) -> List[str]:
    """What plugstack.conf's binds= adds for the jobs: SSSD's sockets, read-only."""
    return ["%s:ro" % C.SSSD_PIPES_DIR] if directory_ldap(cluster) is not None else []
