"""Installing and removing the operator, against an in-memory API."""

from __future__ import annotations

import pytest
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_operator import (
    InstallError,
    OperatorSettings,
    ensure_operator,
    remove_operator,
)
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


def operator_pod(kube, namespace):
    return kube.get("apps/v1", "Deployment", OPERATOR_NAME, namespace)["spec"]["template"]["spec"]


def test_pull_secrets_reach_the_operator_pod_and_none_given_adds_nothing():
    kube = MemoryKube()
    ensure_operator(kube, OperatorSettings("ops", "registry.example/slurmkube/operator:1"), check_mode=False)
    assert "imagePullSecrets" not in operator_pod(kube, "ops")
    settings = OperatorSettings("ops", "registry.example/slurmkube/operator:1", image_pull_secrets=("site-registry",))
    assert ensure_operator(kube, settings, check_mode=False).changed
    assert operator_pod(kube, "ops")["imagePullSecrets"] == [{"name": "site-registry"}]
    assert not ensure_operator(kube, settings, check_mode=False).changed


def test_a_pull_secret_that_is_no_secret_name_is_refused_naming_it_before_anything_is_written():
    kube = MemoryKube()
    settings = OperatorSettings("ops", "img", image_pull_secrets=("Site_Registry",))
    with pytest.raises(InstallError, match="image_pull_secrets: must be Secret names, got 'Site_Registry'"):
        ensure_operator(kube, settings, check_mode=False)
    assert kube.objects == {}
