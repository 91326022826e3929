# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the slurm_restore module does: ask the operator for a restore from the cluster's backups
(spec.backup.restore, once per name) and wait until status.restore says how it ended. The
request is checked with the cluster's whole spec before anything is written."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Dict, Mapping, NamedTuple, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import REAL_TIME, Poll, Timer, wait_until
from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import camel
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import Restore

# The phases a restore ends in (operator/restores.py writes them).
SUCCEEDED, FAILED = "Succeeded", "Failed"
# The module's options that are spec.backup.restore's fields (the rest: connection and waiting).
REQUEST_OPTIONS = tuple(field.name for field in dataclasses.fields(Restore))


class RestoreError(SlurmkubeError):
    """The restore cannot be asked for, or it failed; the message names the option or says why."""


class Asked(NamedTuple):
    """Whether the request was written now (or, in check mode, would be), and the spec's
    spec.backup.restore before and after."""

    changed: bool
    before: Dict[str, Any]
    after: Dict[str, Any]


def request_spec(params: Mapping[str, Any]) -> Dict[str, Any]:
    """spec.backup.restore for the module's options: every field written, so nothing of an
    earlier request stays."""
    return {camel(option): params[option] for option in REQUEST_OPTIONS}


def ask(kube: Kube, cluster: str, namespace: str, request: Mapping[str, Any], check_mode: bool) -> Asked:
    """Write the request into the SlurmCluster's spec unless it is there (or this name was run)."""
    obj = kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, cluster, namespace)
    if obj is None:
        raise RestoreError("cluster: no SlurmCluster %s in namespace %s" % (cluster, namespace))
    before = dict(((obj.get("spec") or {}).get("backup") or {}).get("restore") or {})
    recorded = (obj.get("status") or {}).get("restore") or {}
    if before == dict(request) or recorded.get("name") == request["name"]:
        return Asked(False, before, before)
    check_spec(obj, request)
    if not check_mode:
        kube.merge_patch(C.GROUP_VERSION, C.KIND_CLUSTER, cluster, namespace,
                         {"spec": {"backup": {"restore": dict(request)}}})
    return Asked(True, before, dict(request))


def check_spec(obj: Mapping[str, Any], request: Mapping[str, Any]) -> None:
    """The cluster's spec with the request, as the operator will read it; RestoreError naming the
    option (spec.backup.restore.jailPaths[0] is the option jail_paths' first path)."""
    resource = {"metadata": obj["metadata"], "spec": copy.deepcopy(obj.get("spec") or {})}
    resource["spec"].setdefault("backup", {})["restore"] = dict(request)
    try:
        parse_cluster(resource)
    except SpecError as exc:
        raise RestoreError("the SlurmCluster refuses this restore: %s" % exc) from exc


def wait_ended(kube: Kube, cluster: str, namespace: str, name: str, timeout: int,
               timer: Timer = REAL_TIME) -> Dict[str, Any]:
    """status.restore once the restore NAME has ended; RestoreError when it failed or is still
    under way at the deadline (saying where it is)."""
    def probe() -> Poll:
        obj = kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, cluster, namespace) or {}
        record = (obj.get("status") or {}).get("restore") or {}
        if record.get("name") == name and record.get("phase") == FAILED:
            raise RestoreError("restore %s failed: %s; a restore of a new name runs again"
                               % (name, record.get("message", "")))
        return Poll(record.get("name") == name and record.get("phase") == SUCCEEDED, record)

    last = wait_until(probe, timeout, timer)
    if not last.done:
        seen: Optional[Mapping[str, Any]] = last.seen
        where = "%s (%s)" % (seen.get("phase"), seen.get("message", "")) if seen and seen.get("name") == name \
            else "the operator has not started it"
        raise RestoreError("restore %s has not ended after %ds: %s" % (name, timeout, where))
    return dict(last.seen)


def recorded(kube: Kube, cluster: str, namespace: str) -> Dict[str, Any]:
    """status.restore as the operator last wrote it."""
    obj = kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, cluster, namespace) or {}
    return dict((obj.get("status") or {}).get("restore") or {})
