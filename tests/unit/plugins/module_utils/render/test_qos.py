"""Kubernetes' QoS class of the Slurm pods the product makes: Guaranteed unless a node set's
cpuRequest overcommits (model/types.py, Resources.cpu_request). Kubernetes gives it only when every
container, init containers included, has CPU and memory limits equal to its requests; it is the
class the kubelet's static CPU manager gives whole cores to and evicts last."""

from __future__ import annotations

import copy
from typing import Any, Dict, Iterator, Tuple

import pytest
from example_clusters import EXAMPLES, example_resources

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.render.cluster import render_cluster

SLURM_PODS = (C.COMPONENT_CONTROLLER, C.COMPONENT_WORKER, C.COMPONENT_LOGIN)


def qos_class(pod_spec: Dict[str, Any]) -> str:
    """Kubernetes' rule for CPU and memory (a request left out defaults to the limit), per container."""
    guaranteed, anything = True, False
    for container in pod_spec.get("initContainers", []) + pod_spec["containers"]:
        resources = container.get("resources") or {}
        limits = {k: v for k, v in (resources.get("limits") or {}).items() if k in ("cpu", "memory")}
        requests = dict(limits, **{k: v for k, v in (resources.get("requests") or {}).items() if k in limits})
        anything = anything or bool(limits or resources.get("requests"))
        guaranteed = guaranteed and set(limits) == {"cpu", "memory"} and requests == limits
    return "Guaranteed" if guaranteed else ("Burstable" if anything else "BestEffort")


def slurm_pod_specs(raw: Dict[str, Any]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    cluster = parse_cluster(raw["cluster"])
    for obj in render_cluster(cluster, [parse_nodeset(n) for n in raw["nodesets"]]).objects:
        if obj["kind"] == "StatefulSet" and obj["metadata"]["labels"].get(C.LABEL_COMPONENT) in SLURM_PODS:
            yield obj["metadata"]["name"], obj["spec"]["template"]["spec"]


def with_accounting(name: str) -> Dict[str, Any]:
    """An example with accounting on: the controller then waits for slurmdbd in an init container."""
    raw = copy.deepcopy(example_resources(name))
    raw["cluster"]["spec"]["accounting"] = dict(raw["cluster"]["spec"].get("accounting") or {}, enabled=True)
    return raw


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_slurm_pod_is_guaranteed_init_containers_included(name):
    specs = dict(slurm_pod_specs(with_accounting(name)))
    assert any(spec.get("initContainers") for spec in specs.values())  # what the rule is about
    assert {pod: qos_class(spec) for pod, spec in specs.items()} == {pod: "Guaranteed" for pod in specs}


def test_a_node_set_with_a_cpu_request_below_its_cpus_is_burstable_and_only_it():
    raw = with_accounting("cpu-only")
    raw["nodesets"][0]["spec"]["resources"]["cpuRequest"] = "250m"
    overcommitted = raw["nodesets"][0]["metadata"]["name"]
    classes = {pod: qos_class(spec) for pod, spec in slurm_pod_specs(raw)}
    burstable = {pod for pod, qos in classes.items() if qos == "Burstable"}
    assert len(burstable) == 1 and overcommitted in burstable.pop(), classes
    assert set(classes.values()) == {"Guaranteed", "Burstable"}
