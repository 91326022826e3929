"""Installing and removing the operator, against an in-memory API."""

from __future__ import annotations

from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_operator import remove_operator
from ansible_collections.slurmkube.core.plugins.module_utils.render.operator import OPERATOR_NAME, render_operator


def installed(kube, namespace):
    for obj in render_operator(namespace, "img"):
        kube.apply(obj)
    kube.apply({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": OPERATOR_NAME, "namespace": namespace}})


def test_removal_takes_the_leader_lease_with_the_deployment():
    kube = MemoryKube()
    installed(kube, "ops")
    change = remove_operator(kube, "ops", remove_crds=False, check_mode=False)
    assert change.changed
    assert kube.objects == {}


def test_removal_in_check_mode_deletes_nothing_and_names_the_lease():
    kube = MemoryKube()
    installed(kube, "ops")
    before = dict(kube.objects)
    change = remove_operator(kube, "ops", remove_crds=False, check_mode=True)
    assert kube.objects == before
    assert any("Lease" in d["before_header"] for d in change.diffs)
