# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pass's step that puts a new Slurm configuration in effect: `scontrol reconfigure` once
slurmctld's pod reads the rendered files (ConfigMaps reach pods with a delay, which
volume_refresh.py shortens); also when nodes joined a cluster with a topology, whose tree takes
dynamic nodes in only on reconfigure. The digest of what is in effect is the status's configHash."""

from __future__ import annotations

from typing import Dict, Mapping, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import jwks_text, key_set_digest
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import has_topology
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import Pass
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Event
from ansible_collections.slurmkube.core.plugins.module_utils.operator.volume_refresh import refresh_config_volumes
from ansible_collections.slurmkube.core.plugins.module_utils.render.jwt_auth import JWKS_PATH
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmControl, SlurmNode


def config_digest(cluster: SlurmCluster, files: Mapping[str, str], slurm_nodes: Mapping[str, SlurmNode]) -> str:
    """What the running Slurm configuration should be, as a digest."""
    parts = ["%s\n%s" % kv for kv in sorted(files.items())]
    if has_topology(cluster):
        parts.append(",".join(sorted(slurm_nodes)))
    return content_hash(parts)


def effective_files(p: Pass) -> Dict[str, str]:
    """What slurmctld reads on reconfigure: the rendered files (by name in /etc/slurm) and, with the
    REST API, the key set (by its path), which reaches the pod from its Secret as they do."""
    files = dict(p.rendered.config_files)
    if p.rest_keys is not None:
        files[JWKS_PATH] = jwks_text(p.rest_keys)
    return files


def controller_has_config(cluster: SlurmCluster, slurm: SlurmControl, files: Mapping[str, str]) -> bool:
    """The controller pod holds exactly these files (effective_files), and the REST API's key set
    its configuration names: a slurmctld told to load a key file it lacks stops (the pod that
    mounts it starts with the new configuration anyway)."""
    paths = [name if name.startswith("/") else "%s/%s" % (C.SLURM_CONFIG_DIR, name) for name in sorted(files)]
    code, out = slurm.run(["cat", *paths])[:2]
    if code != 0 or out != "".join(files[name] for name in sorted(files)):
        return False
    return not cluster.spec.rest.enabled or JWKS_PATH in files or slurm.run(["test", "-r", JWKS_PATH])[0] == 0


def reconfigure_if_needed(p: Pass) -> None:
    """`scontrol reconfigure` when the rendered configuration is not the one in effect and the
    controller's pod sees it (the configuration in effect is kept while Slurm cannot be asked);
    then whether slurmctld's topology holds every node."""
    put_config_in_effect(p)
    p.topology_ready = topology_in_effect(p)


def put_config_in_effect(p: Pass) -> None:
    """The reconfigure itself; p.config_hash: what is in effect after it."""
    p.config_hash = p.previous_status.get("configHash", "")
    slurm, slurm_nodes = p.slurm, p.slurm_nodes
    if slurm is None or slurm_nodes is None or "controller" in (p.slurm_state.earlier or {}):
        return  # (an earlier release's slurmctld keeps its files: apply.without_slurm_config)
    files = effective_files(p)
    wanted = config_digest(p.cluster, files, slurm_nodes)
    if p.config_hash != wanted:
        refresh_config_volumes(p.kube, p.cluster, files)
        if not controller_has_config(p.cluster, slurm, files):
            return
        slurm.reconfigure()
        p.events.append(Event("Normal", "Reconfigured", "scontrol reconfigure: new Slurm configuration in effect"))
        p.config_hash = wanted
    if JWKS_PATH in files:
        p.rest_keys_in_effect = key_set_digest(files[JWKS_PATH])
        before = (p.previous_status.get("restKeys") or {}).get("inEffect")
        if before and before != p.rest_keys_in_effect:
            replace_standbys(p)


def replace_standbys(p: Pass) -> None:
    """A standby slurmctld loads the REST API's keys only when it starts (a reconfigure reaches
    only the serving one, and taking over does not load them again): replace each, so the one
    that takes over checks tokens with the keys in effect."""
    for pod in p.controllers.standing_by if p.controllers else ():
        p.kube.delete("v1", "Pod", pod, p.cluster.namespace)
        p.events.append(Event("Normal", "ControllerReplaced", "replacing %s, a standby controller, to load the "
                              "REST API's new key set" % pod))


def topology_in_effect(p: Pass) -> Optional[bool]:
    """Whether slurmctld reconfigured with this pass's files and nodes (its tree takes dynamic
    nodes in only then); None for a cluster without a topology."""
    if not has_topology(p.cluster):
        return None
    if p.slurm_nodes is None:
        return False
    return p.config_hash == config_digest(p.cluster, effective_files(p), p.slurm_nodes)
