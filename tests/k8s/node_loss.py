"""For the tests that stop a kind worker (`docker stop` of its node container) on the session's
multi-node cluster: the workers, a node's Ready condition, waits that ride out the loss, and an
operator kept off the node about to be lost."""

from __future__ import annotations

import json
import subprocess
from typing import Callable, List, Optional, TypeVar

from kube_helpers import Cluster, wait_for
from slurm_helpers import OPERATOR_LABEL


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], text=True, capture_output=True, check=True, timeout=120).stdout


def workers(kube: Cluster) -> List[str]:
    """The Kubernetes nodes that are not the control plane's, sorted."""
    nodes = json.loads(kube.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    return sorted(n["metadata"]["name"] for n in nodes
                  if "node-role.kubernetes.io/control-plane" not in n["metadata"].get("labels", {}))


def kubernetes_node_ready(kube: Cluster, name: str) -> bool:
    conditions = kube.get_json("node", name)["status"]["conditions"]
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def kubernetes_node_of(kube: Cluster, pod: str) -> str:
    return kube.get_json("pod", pod)["spec"]["nodeName"]


Answer = TypeVar("Answer")
# What kubectl prints when the exec itself failed, not the command run in the container.
EXEC_FAILED = "error executing command in container"


def through_a_node_loss(query: Callable[[], Answer]) -> Callable[[], Optional[Answer]]:
    """QUERY for a wait while a kind node stops: None when kubectl could not exec into the
    controller this time (runc on another node refused one exec as `docker stop` took a node:
    "read init-p: connection reset by peer"), so the wait asks again; any other failure stands."""
    def asked() -> Optional[Answer]:
        try:
            return query()
        except AssertionError as failed:
            if EXEC_FAILED in str(failed):
                return None
            raise
    return asked


def keep_an_operator_off(kube: Cluster, host: str) -> None:
    """At least one operator replica runs elsewhere: the one left leads once the lease expires."""
    def placed() -> list:
        pods = kube.get_json("pods", "-l", OPERATOR_LABEL)["items"]
        return [p["spec"].get("nodeName") for p in pods if not p["metadata"].get("deletionTimestamp")]
    if any(node != host for node in placed()):
        return
    kube.kubectl("cordon", host)
    try:
        kube.kubectl("-n", kube.namespace, "delete", "pod", "-l", OPERATOR_LABEL, "--wait=false")
        wait_for(lambda: sum(node not in (host, None) for node in placed()) >= 1, 120, 2)
    finally:
        kube.kubectl("uncordon", host)
