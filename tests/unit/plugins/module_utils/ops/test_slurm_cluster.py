"""slurm_cluster's plan: an option left out leaves its part alone, pruning is asked for, and a
node set without replicas keeps the live count; its wait fails at once on an image the pods
cannot pull."""

from __future__ import annotations

import pytest
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import ClusterError, cluster_resource
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_cluster import (
    Request,
    cluster_after,
    ensure_present,
    nodeset_resource,
    plan_present,
    wait_ready,
)

SPEC = {"partitions": [{"name": "main", "default": True, "nodeSets": ["cpu"]}]}


def live_cluster(nodesets=(("cpu", 2), ("big", 1))):
    kube = MemoryKube()
    kube.apply(cluster_resource("demo", "hpc", SPEC))
    for name, replicas in nodesets:
        kube.apply(nodeset_resource("demo", "hpc", {"name": name, "spec": {"replicas": replicas}}))
    return kube


def names(objects):
    return [(o["kind"], o["metadata"]["name"]) for o in objects]


def test_without_spec_and_node_sets_nothing_is_applied_or_deleted():
    plan = plan_present(live_cluster(), Request("demo", "hpc", None, None))
    assert plan.objects == [] and plan.doomed == []
    assert plan.spec == SPEC


def test_a_node_set_not_listed_is_kept_unless_pruning_is_asked_for():
    kube = live_cluster()
    listed = [{"name": "cpu", "spec": {"replicas": 2}}]
    kept = plan_present(kube, Request("demo", "hpc", None, listed))
    assert names(kept.objects) == [("NodeSet", "cpu")] and kept.doomed == []
    pruned = plan_present(kube, Request("demo", "hpc", None, listed, prune_node_sets=True))
    assert names(pruned.doomed) == [("NodeSet", "big")]


def test_a_node_set_without_replicas_keeps_the_live_count_and_a_number_wins():
    kube = live_cluster()
    kube.objects[("NodeSet", "hpc", "cpu")]["spec"]["replicas"] = 4  # kubectl scale
    kept = plan_present(kube, Request("demo", "hpc", None, [{"name": "cpu", "spec": {}}]))
    assert kept.objects[0]["spec"]["replicas"] == 4
    named = plan_present(kube, Request("demo", "hpc", None, [{"name": "cpu", "spec": {"replicas": 2}}]))
    assert named.objects[0]["spec"]["replicas"] == 2
    new = plan_present(kube, Request("demo", "hpc", None, [{"name": "gpu", "spec": {}}]))
    assert "replicas" not in new.objects[0]["spec"]


def test_a_new_cluster_without_spec_is_made_with_the_defaults():
    plan = plan_present(MemoryKube(), Request("demo", "hpc", None, [{"name": "cpu", "spec": {}}]))
    assert names(plan.objects) == [("NodeSet", "cpu"), ("SlurmCluster", "demo")]
    assert plan.objects[1]["spec"] == {}


def test_a_spec_given_is_applied_and_checked_against_the_node_sets_that_stay():
    kube = live_cluster()
    spec = {"partitions": [{"name": "main", "nodeSets": ["big"]}]}
    plan = plan_present(kube, Request("demo", "hpc", spec, None))
    assert names(plan.objects) == [("SlurmCluster", "demo")] and plan.spec == spec
    with pytest.raises(SpecError, match="unknown node set"):
        plan_present(kube, Request("demo", "hpc", spec, [{"name": "cpu", "spec": {}}], prune_node_sets=True))


def test_a_spec_that_would_inject_a_setting_fails_before_any_write():
    kube = live_cluster()
    writes = kube.writes
    spec = {"slurm": {"config": {"MinJobAge": "300\nPlugStackConfig=/dev/null"}}}
    with pytest.raises(SpecError, match=r"spec\.slurm\.config\.MinJobAge: must be one word"):
        plan_present(kube, Request("demo", "hpc", spec, None))
    assert kube.writes == writes


def test_a_node_set_named_twice_is_refused_naming_the_item_before_any_write():
    kube = live_cluster()
    writes = kube.writes
    twice = [{"name": "cpu", "spec": {"replicas": 1}}, {"name": "big", "spec": {}}, {"name": "cpu", "spec": {}}]
    with pytest.raises(SpecError) as raised:
        plan_present(kube, Request("demo", "hpc", None, twice))
    assert str(raised.value) == "invalid cluster: node_sets[2].name: is used twice: 'cpu'"
    assert kube.writes == writes


def test_the_result_is_the_live_cluster_or_in_check_mode_what_would_be_written():
    kube = live_cluster()
    kube.objects[("SlurmCluster", "hpc", "demo")]["status"] = {"phase": "Ready"}
    kept = plan_present(kube, Request("demo", "hpc", None, None))
    assert cluster_after(kube, "demo", "hpc", kept, check_mode=True)["status"] == {"phase": "Ready"}
    changed_spec = dict(SPEC, login={"replicas": 0})
    plan = plan_present(kube, Request("demo", "hpc", changed_spec, None))
    would = cluster_after(kube, "demo", "hpc", plan, check_mode=True)
    assert would["spec"] == changed_spec and "status" not in would
    ensure_present(kube, plan.objects, plan.doomed, check_mode=False)
    after = cluster_after(kube, "demo", "hpc", plan, check_mode=False)
    assert after["spec"] == changed_spec and after["status"] == {"phase": "Ready"}
    assert after["metadata"]["name"] == "demo" and after["kind"] == "SlurmCluster"


def with_images_condition(kube, observed_generation):
    obj = kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, "demo", "hpc")
    generation = obj["metadata"].setdefault("generation", 2)
    obj["status"] = {"phase": "Provisioning", "observedGeneration": observed_generation or generation,
                     "message": "0/2 nodes in service", "conditions": [{
                         "type": C.CONDITION_IMAGES_PULLED, "status": "False",
                         "message": "cannot pull image site/worker:1 (pod demo-cpu-0): ImagePullBackOff"}]}
    kube.objects[kube.key(C.KIND_CLUSTER, "demo", "hpc")] = obj


def test_the_wait_fails_at_once_naming_an_image_the_pods_cannot_pull():
    kube = live_cluster()
    with_images_condition(kube, None)
    with pytest.raises(ClusterError) as failed:
        wait_ready(kube, "demo", "hpc", timeout=600)
    assert "cannot pull image site/worker:1 (pod demo-cpu-0): ImagePullBackOff" in str(failed.value)


def test_an_image_failure_of_an_earlier_spec_does_not_fail_the_wait():
    kube = live_cluster()
    with_images_condition(kube, 1)
    with pytest.raises(ClusterError) as failed:
        wait_ready(kube, "demo", "hpc", timeout=0)
    assert "not Ready after 0s" in str(failed.value) and "cannot pull" not in str(failed.value)
