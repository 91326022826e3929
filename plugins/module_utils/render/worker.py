# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Workers: one StatefulSet and one headless Service per NodeSet; each pod is a Slurm node."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    node_conf,
    nodes_at_most,
    nodeset_object_name,
    on_demand,
    slurm_cpus,
    slurm_real_memory_mib,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import NodeSet, SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.render import common, directory, pods
from ansible_collections.slurmkube.core.plugins.module_utils.render.power_saving import cloud_node_words
from ansible_collections.slurmkube.core.plugins.module_utils.render.seccomp import (
    PROFILE_DIR,
    worker_seccomp_profile_file,
    worker_seccomp_profile_name,
    worker_seccomp_profile_text,
)

SPOOL_VOLUME = "spool"
SHM_VOLUME = "shm"
NODE_TMP_VOLUME = "node-tmp"
SECCOMP_VOLUME = "seccomp-profiles"
SECCOMP_MOUNT_DIR = "/host-seccomp"
# The worker's root file system is read-only; what its daemons write lives here instead:
# volume -> (path, emptyDir medium). The munge key's copy and munged's seed never touch the
# node's disk.
WRITABLE_PATHS = {
    "run": ("/run", "Memory"),
    "tmp": ("/tmp", ""),
    "munge-etc": ("/etc/munge", "Memory"),
    "munge-lib": ("/var/lib/munge", "Memory"),
    "logs": ("/var/log", ""),
}


def render_worker_service(cluster: SlurmCluster, nodeset: NodeSet) -> common.Manifest:
    """Headless Service: <pod>.<service>.<ns>.svc resolves to each node's pod IP."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": common.metadata(cluster, nodeset_object_name(nodeset), C.COMPONENT_WORKER, nodeset.name),
        "spec": {
            "clusterIP": "None",
            # slurmctld must reach a node before it is Ready (registration makes it Ready).
            "publishNotReadyAddresses": True,
            "selector": names.selector_labels(cluster.name, C.COMPONENT_WORKER, nodeset.name),
            "ports": [{"name": "slurmd", "port": C.SLURMD_PORT, "targetPort": C.SLURMD_PORT, "protocol": "TCP"}],
        },
    }


def _worker_env(cluster: SlurmCluster, nodeset: NodeSet) -> List[Dict[str, Any]]:
    return common.env(cluster, C.ROLE_WORKER) + [
        {"name": C.ENV_NODESET, "value": nodeset.name},
        {"name": C.ENV_CPUS, "value": str(slurm_cpus(nodeset))},
        {"name": C.ENV_MEMORY_MB, "value": str(slurm_real_memory_mib(nodeset))},
        {"name": C.ENV_NODE_CONF, "value": node_conf(nodeset)},
    ]


def _worker_mounts(cluster: SlurmCluster) -> List[Dict[str, Any]]:
    mounts = common.common_mounts() + [
        {"name": common.JAIL_VOLUME, "mountPath": C.JAIL_MOUNT_PATH},
        {"name": SPOOL_VOLUME, "mountPath": C.SLURMD_SPOOL_DIR},
        {"name": SHM_VOLUME, "mountPath": "/dev/shm"},
    ]
    mounts.append({"name": NODE_TMP_VOLUME, "mountPath": C.NODE_TMP_DIR})
    mounts.extend({"name": name, "mountPath": where[0]} for name, where in WRITABLE_PATHS.items())
    for sub in cluster.spec.jail.sub_mounts:
        mounts.append({"name": names.sub_mount_volume(sub.name),
                       "mountPath": "%s/%s" % (common.SUBMOUNT_HOST_DIR, sub.name)})
    return mounts


def _worker_volumes(cluster: SlurmCluster) -> List[Dict[str, Any]]:
    volumes = [
        common.config_volume(cluster),
        common.munge_volume(cluster),
        common.jail_volume(cluster),
        {"name": SPOOL_VOLUME, "emptyDir": {}},
        {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}},
        {"name": NODE_TMP_VOLUME, "emptyDir": {}},
    ]
    volumes.extend({"name": name, "emptyDir": {"medium": where[1]} if where[1] else {}}
                   for name, where in WRITABLE_PATHS.items())
    for sub in cluster.spec.jail.sub_mounts:
        if sub.host_path:
            host = {"path": sub.host_path, "type": "DirectoryOrCreate"}
            volumes.append({"name": names.sub_mount_volume(sub.name), "hostPath": host})
            continue
        empty: Dict[str, Any] = {}
        if sub.medium:
            empty["medium"] = sub.medium
        if sub.size_limit:
            empty["sizeLimit"] = str(sub.size_limit)
        volumes.append({"name": names.sub_mount_volume(sub.name), "emptyDir": empty})
    if cluster.spec.worker_seccomp.profile == "Localhost":
        # Only our own directory of the kubelet's: other profiles of the node stay out of reach.
        where = "%s/seccomp/%s" % (cluster.spec.worker_seccomp.kubelet_root_dir, PROFILE_DIR)
        volumes.append({"name": SECCOMP_VOLUME, "hostPath": {"path": where, "type": "DirectoryOrCreate"}})
    return volumes


def seccomp_profile_writer(cluster: SlurmCluster) -> Dict[str, Any]:
    """Init container: puts the workers' seccomp profile where the kubelet of this node reads
    Localhost profiles, before slurmd's container (which runs under it) is made. It writes a
    temporary name and renames it: a pod starting beside it never reads half a profile."""
    images = cluster.spec.images
    script = ('set -eu; umask 022; target="$DIR/$NAME"; '
              'printf %s "$PROFILE" >"$target.$$"; mv -f "$target.$$" "$target"')
    return {
        "name": "seccomp-profile",
        "image": images.worker,
        "imagePullPolicy": images.pull_policy,
        "command": ["sh", "-c", script],
        "env": [{"name": "DIR", "value": SECCOMP_MOUNT_DIR},
                {"name": "NAME", "value": worker_seccomp_profile_file()},
                {"name": "PROFILE", "value": worker_seccomp_profile_text()}],
        # Root only as the owner of the kubelet's directory: no capability at all.
        "securityContext": {**common.confined_security_context(), "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": SECCOMP_VOLUME, "mountPath": SECCOMP_MOUNT_DIR}],
    }


def worker_seccomp_profile_ref(cluster: SlurmCluster) -> Dict[str, Any]:
    if cluster.spec.worker_seccomp.profile == "Unconfined":
        return {"type": "Unconfined"}
    return {"type": "Localhost", "localhostProfile": worker_seccomp_profile_name()}


def worker_security_context(cluster: SlurmCluster) -> Dict[str, Any]:
    """What the jail plugin needs: mounts (SYS_ADMIN, which AppArmor's default profile refuses)
    and pivot_root (which the runtime's default seccomp profile refuses: ours allows it); what
    slurmstepd needs to bind a job's tasks to their CPUs (SYS_NICE) and to read the /proc files
    of a plain user's tasks that job accounting samples (SYS_PTRACE: without it sstat and sacct
    show no MaxRSS, AveRSS or AveCPU for users' jobs). Jobs hold neither: the jail plugin drops
    them from root jobs' tasks and from the slurmstepd of a root job. The root file system is
    read-only: the image's programs (slurmd's health check, the stop hook) stay what the image
    says, whatever runs in the pod."""
    return {
        "readOnlyRootFilesystem": True,
        "capabilities": {"add": ["SYS_ADMIN", "SYS_NICE", "SYS_PTRACE"], "drop": list(common.UNUSED_CAPABILITIES)},
        "seccompProfile": worker_seccomp_profile_ref(cluster),
        "appArmorProfile": {"type": "Unconfined"},
    }


def _slurmd_container(cluster: SlurmCluster, nodeset: NodeSet) -> Dict[str, Any]:
    images = cluster.spec.images
    return {
        "name": "slurmd",
        "image": images.worker,
        "imagePullPolicy": images.pull_policy,
        "env": _worker_env(cluster, nodeset),
        "ports": [{"name": "slurmd", "containerPort": C.SLURMD_PORT, "protocol": "TCP"}],
        "readinessProbe": common.slurm_ready_probe(C.SLURMD_PORT),
        # Jobs still on the node when the pod stops are handed back to Slurm to requeue.
        "lifecycle": {"preStop": {"exec": {"command": [C.WORKER_STOP_PROGRAM]}}},
        "resources": common.resources(nodeset.spec.resources, gpus=True),
        "securityContext": worker_security_context(cluster),
        "volumeMounts": _worker_mounts(cluster),
    }


def _worker_init_containers(cluster: SlurmCluster, nodeset: NodeSet) -> List[Dict[str, Any]]:
    images = cluster.spec.images
    init = [common.wait_for_controller(cluster, images.worker, images.pull_policy)]
    if cluster.spec.worker_seccomp.profile == "Localhost":
        init.insert(0, seccomp_profile_writer(cluster))
    return [dict(container, resources=common.init_resources(nodeset.spec.resources)) for container in init]


def topology_spread(cluster: SlurmCluster, nodeset: NodeSet) -> List[Dict[str, Any]]:
    """The node set's pods over the values of a node label; nodes whose taints they do not
    tolerate (a control plane) are no place to spread to."""
    spread = nodeset.spec.spread
    if not spread.topology_key:
        return []
    return [{
        "maxSkew": spread.max_skew,
        "topologyKey": spread.topology_key,
        "whenUnsatisfiable": spread.when_unsatisfiable,
        "labelSelector": {"matchLabels": names.selector_labels(cluster.name, C.COMPONENT_WORKER, nodeset.name)},
        "nodeTaintsPolicy": "Honor",
    }]


def render_worker_pod_template(cluster: SlurmCluster, nodeset: NodeSet, config_hash: str) -> Dict[str, Any]:
    """The pod template of a node set's pods, `config_hash` (slurm_config.worker_config_hash) on it.
    An on-demand set's node is declared in slurm.conf, and its slurmd reports its start as the
    node's boot (images/common/roles/worker): slurmctld ignores a resumed node's registration until
    its boot time passes the resume request, and a pod shares the machine's boot time."""
    container = _slurmd_container(cluster, nodeset)
    if on_demand(nodeset):
        container["env"].append({"name": C.ENV_CLOUD_NODE, "value": "1"})
    pod_spec: Dict[str, Any] = {
        **common.pod_identity(cluster),
        "terminationGracePeriodSeconds": 60,
        "initContainers": _worker_init_containers(cluster, nodeset),
        "containers": [container],
        "volumes": _worker_volumes(cluster),
    }
    pod_spec.update(common.login_hosts_dns(cluster))
    spread = topology_spread(cluster, nodeset)
    if spread:
        pod_spec["topologySpreadConstraints"] = spread
    pod_spec = directory.with_directory(cluster, pod_spec)
    return pods.customised({
        "metadata": {
            "labels": names.object_labels(cluster.name, C.COMPONENT_WORKER, nodeset.name),
            "annotations": {C.ANNOTATION_CONFIG_HASH: config_hash},
        },
        "spec": pod_spec,
    }, pods.component_options(cluster, nodeset.spec.pod, nodeset.spec.placement))


def render_worker_statefulset(cluster: SlurmCluster, nodeset: NodeSet, config_hash: str,
                              replicas: Optional[int] = None) -> common.Manifest:
    """A fixed node set's StatefulSet: `replicas` pods (the operator's scale plan; the spec's count
    when none is given).

    updateStrategy OnDelete: Kubernetes never restarts a node under a running job; the
    operator drains a node, waits until it is idle, then deletes its pod.
    """
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": common.metadata(cluster, nodeset_object_name(nodeset), C.COMPONENT_WORKER, nodeset.name),
        "spec": {
            "replicas": nodeset.spec.replicas if replicas is None else replicas,
            "serviceName": nodeset_object_name(nodeset),
            "selector": {"matchLabels": names.selector_labels(cluster.name, C.COMPONENT_WORKER, nodeset.name)},
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "template": render_worker_pod_template(cluster, nodeset, config_hash),
        },
    }


def render_worker_on_demand_template(cluster: SlurmCluster, nodeset: NodeSet, config_hash: str,
                                     nodes: Optional[int] = None) -> common.Manifest:
    """An on-demand node set's PodTemplate: the operator makes a pod from it for each node Slurm
    resumes (named as the node, in the headless Service's subdomain), and deletes it when Slurm
    powers the node down; no StatefulSet, which cannot leave a hole where a node sleeps. `nodes`:
    how many CLOUD nodes slurm.conf declares (the operator's plan; maxReplicas when none is given)."""
    meta = common.metadata(cluster, nodeset_object_name(nodeset), C.COMPONENT_WORKER, nodeset.name)
    template = render_worker_pod_template(cluster, nodeset, config_hash)
    template["spec"]["subdomain"] = nodeset_object_name(nodeset)
    # The revision the operator labels its pods with: the API server fills in defaults of the live
    # template, so a digest of that would not match what was rendered.
    meta["annotations"] = {C.ANNOTATION_NODES: str(nodes_at_most(nodeset) if nodes is None else nodes),
                           C.ANNOTATION_NODE_WORDS: cloud_node_words(nodeset),
                           C.ANNOTATION_REVISION: content_hash([json.dumps(template, sort_keys=True)])}
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": meta, "template": template}
