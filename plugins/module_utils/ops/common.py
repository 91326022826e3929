# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the module back ends share: the connection options and client setup of kubernetes.core,
our wait options (twin of plugins/doc_fragments/kube_auth.py), and the shape of a change."""

from __future__ import annotations

import copy
import os
from typing import Any, Callable, Dict, List, Mapping, NamedTuple

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import KeySet, key_set_from_text
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import (
    HAS_KUBERNETES,
    KUBERNETES_IMPORT_ERROR,
    Kube,
    KubeError,
    error_cause,
)
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import REAL_TIME, Timer
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import Rest
from ansible_collections.slurmkube.core.plugins.module_utils.render.secrets import secret_value
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.runner import controller_sacctmgr
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.sacctmgr import Outcome, Sacctmgr, SacctmgrError


class ClusterError(SlurmkubeError):
    """A request about a SlurmCluster cannot be carried out; the message names the option at fault."""


def cluster_resource(name: str, namespace: str, spec: Mapping[str, Any]) -> Dict[str, Any]:
    """The SlurmCluster object."""
    return {"apiVersion": C.GROUP_VERSION, "kind": C.KIND_CLUSTER,
            "metadata": {"name": name, "namespace": namespace}, "spec": dict(spec)}


def cluster_rest(kube: Kube, cluster: str, namespace: str) -> Rest:
    """spec.rest of the SlurmCluster, which must have the REST API on."""
    obj = kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, cluster, namespace)
    if obj is None:
        raise ClusterError("cluster: no SlurmCluster %s in namespace %s" % (cluster, namespace))
    rest = parse_cluster(obj).spec.rest
    if not rest.enabled:
        raise ClusterError("cluster: SlurmCluster %s/%s has no REST API (spec.rest.enabled is false)"
                           % (namespace, cluster))
    return rest


def cluster_key_set(kube: Kube, cluster: str, namespace: str) -> KeySet:
    """The REST API's key set, as the cluster's JWT key Secret holds it."""
    secret_name = names.jwt_keys_secret(cluster)
    secret = kube.get("v1", "Secret", secret_name, namespace)
    if not secret:
        raise ClusterError("cluster: Secret %s/%s does not exist yet (the operator makes it once spec.rest is "
                           "on)" % (namespace, secret_name))
    return key_set_from_text(secret_value(secret, C.JWT_SIGNING_SECRET_KEY).decode("ascii"))


# The accounting modules' target (twin of doc fragment slurmkube.core.slurm_accounting).
ACCOUNTING_ARGS: Dict[str, Dict[str, Any]] = {
    "cluster": {"type": "str", "required": True},
    "namespace": {"type": "str", "default": "default"},
}

# An association's settings (twin of doc fragment slurmkube.core.slurm_accounting.limits).
ASSOCIATION_ARGS: Dict[str, Dict[str, Any]] = {
    "limits": {"type": "dict", "options": {
        "grp_tres": {"type": "str"},
        "grp_jobs": {"type": "int"},
        "grp_submit_jobs": {"type": "int"},
        "max_jobs": {"type": "int"},
        "max_submit_jobs": {"type": "int"},
        "max_tres_per_job": {"type": "str"},
        "max_wall": {"type": "str"},
    }},
    "fairshare": {"type": "str"},
    "qos": {"type": "list", "elements": "str"},
    "default_qos": {"type": "str"},
}

# wait and wait_timeout default to true and 600 while the change to kubernetes.core's false and
# 120 is announced (wait_options): no default here, so an option left out can be told apart.
WAIT_ARGS: Dict[str, Dict[str, Any]] = {
    "wait": {"type": "bool"},
    "wait_timeout": {"type": "int"},
    "wait_sleep": {"type": "int", "default": 5},
}
WAIT_DEFAULT = True
WAIT_TIMEOUT_DEFAULT = 600
WAIT_DEFAULTS_CHANGE = (
    "wait and wait_timeout default to true and 600 s; from slurmkube.core 1.0.0 they default to false and "
    "120 s, as kubernetes.core's modules: set wait (and, to wait, wait_timeout) to keep waiting as now")


class WaitOptions(NamedTuple):
    """Whether a module waits, for how long, and how it looks while it does."""

    wait: bool
    timeout: int
    timer: Timer


def wait_options(module: Any) -> WaitOptions:
    """The wait options with their defaults; ClusterError naming wait_sleep or wait_timeout when
    it cannot be used (asked before anything is written)."""
    p = module.params
    if p["wait_sleep"] < 1:
        raise ClusterError("wait_sleep: %d; at least 1 second between looks" % p["wait_sleep"])
    if p["wait_timeout"] is not None and p["wait_timeout"] < 0:
        raise ClusterError("wait_timeout: %d; 0 or more seconds" % p["wait_timeout"])
    return WaitOptions(WAIT_DEFAULT if p["wait"] is None else p["wait"],
                       WAIT_TIMEOUT_DEFAULT if p["wait_timeout"] is None else p["wait_timeout"],
                       Timer(REAL_TIME.sleep, REAL_TIME.clock, float(p["wait_sleep"])))


def waits(module: Any, waiting: WaitOptions) -> bool:
    """Whether to wait now (never in check mode: nothing was written); a deprecation warning where
    a default about to change decides it."""
    if module.check_mode:
        return False
    p = module.params
    if p["wait"] is None or (p["wait"] and p["wait_timeout"] is None):
        module.deprecate(WAIT_DEFAULTS_CHANGE, version="1.0.0", collection_name="slurmkube.core")
    return waiting.wait


def with_common(spec: Dict[str, Dict[str, Any]], wait: bool = False) -> Dict[str, Dict[str, Any]]:
    """A module's own options plus kubernetes.core's connection options (and ours to wait)."""
    out = dict(spec)
    out.update(copy.deepcopy(AUTH_ARG_SPEC))
    if wait:
        out.update(WAIT_ARGS)
    return out


def kube_for(module: Any) -> Kube:
    """The client for the module's connection options (or their K8S_AUTH_* variables), as
    kubernetes.core makes it; KubeError naming the cause when it cannot reach the API."""
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=str(KUBERNETES_IMPORT_ERROR))
    auth = {name: module.params[name] for name in AUTH_ARG_SPEC if module.params.get(name) is not None}
    check_kubeconfig_files(auth.get("kubeconfig"))
    try:
        kube = Kube(get_api_client(**auth).client.client)
    except Exception as exc:  # a bad kubeconfig, context, host or credential: every cause is the user's to fix
        raise KubeError("cannot connect to the Kubernetes API: %s" % error_cause(exc)) from exc
    kube.ping()
    return kube


def check_kubeconfig_files(kubeconfig: Any) -> None:
    """A kubeconfig given as paths (os.pathsep-separated) names files that exist."""
    if not isinstance(kubeconfig, str):
        return
    for path in kubeconfig.split(os.pathsep):
        if path and not os.path.isfile(os.path.expanduser(path)):
            raise KubeError("kubeconfig: %s does not exist" % path)


def sacctmgr_for(kube: Kube, cluster: str, namespace: str) -> Sacctmgr:
    """sacctmgr in the cluster's controller pod; SacctmgrError naming the option when none is ready."""
    mgr = controller_sacctmgr(kube, cluster, namespace)
    if mgr is None:
        raise SacctmgrError("cluster: no ready controller pod of SlurmCluster %s/%s" % (namespace, cluster))
    return mgr


def outcome_result(outcome: Outcome, diff: bool) -> Dict[str, Any]:
    """What an accounting module returns: changed, the record after, sacctmgr's requests, the diff."""
    out: Dict[str, Any] = {"changed": outcome.changed, "record": outcome.after,
                           "requests": [" ".join(words) for words in outcome.requests]}
    if diff:
        out["diff"] = {"before": outcome.before, "after": outcome.after}
    return out


def run_accounting_module(module: Any, ensure: Callable[[Sacctmgr], Outcome], diff: bool) -> None:
    """What the accounting modules do after parsing their options: one ensure through sacctmgr
    in the cluster's controller pod, then the module's result, or its failure naming the cause."""
    p = module.params
    try:
        outcome = ensure(sacctmgr_for(kube_for(module), p["cluster"], p["namespace"]))
    except SlurmkubeError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**outcome_result(outcome, diff))


class Change(NamedTuple):
    """What ensuring the objects changed (or, in check mode, would change)."""

    changed: bool
    diffs: List[Dict[str, Any]]
