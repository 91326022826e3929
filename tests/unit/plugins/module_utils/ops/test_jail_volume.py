"""jail_volume's decisions: the objects it renders, the checks before writing, what absent and purge remove."""

from __future__ import annotations

import pytest
from example_clusters import EXAMPLES, example
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import Timer
from ansible_collections.slurmkube.core.plugins.module_utils.ops.jail_volume import (
    JailVolumeError,
    ensure_absent,
    ensure_present,
    populate_job_name,
    render_populate_job,
    render_volume,
    wait_populated,
    wanted_from_params,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.jail import render_jail_populate_job

IMAGE = "slurmkube/jail:4fe1148c8f22"
DEFAULT_CLASS = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                 "metadata": {"name": "rwx", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}}


def want(**params):
    return wanted_from_params(dict({"name": "jail", "namespace": "hpc", "image": IMAGE}, **params))


def kube_with_class() -> MemoryKube:
    kube = MemoryKube()
    kube.apply(DEFAULT_CLASS)
    return kube


def test_a_storage_class_gives_one_rwx_claim_and_a_populate_job():
    objects = render_volume(want(storage_class="rwx", size="20Gi"))
    assert [o["kind"] for o in objects] == ["PersistentVolumeClaim"]
    assert objects[0]["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "20Gi"}},
                                  "storageClassName": "rwx"}
    assert "slurmkube.io/cluster" not in objects[0]["metadata"]["labels"]


def test_nfs_gives_a_retained_volume_reserved_for_the_claim():
    pv, claim = render_volume(want(nfs={"server": "nfs.example.org", "path": "/exports/jail"}))
    assert pv["metadata"]["name"] == "hpc-jail" and "namespace" not in pv["metadata"]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pv["spec"]["claimRef"] == {"namespace": "hpc", "name": "jail"}
    assert claim["spec"]["volumeName"] == "hpc-jail" and claim["spec"]["storageClassName"] == ""


def test_an_existing_claim_is_populated_not_made():
    wanted = want(existing_claim="theirs")
    assert render_volume(wanted) == []
    job = render_populate_job(wanted, populate_job_name(wanted))
    assert job["spec"]["template"]["spec"]["volumes"] == [{"name": "jail",
                                                           "persistentVolumeClaim": {"claimName": "theirs"}}]


def test_pull_secrets_reach_the_populate_pod_and_none_given_adds_nothing():
    plain = render_populate_job(want(), "populate")["spec"]["template"]["spec"]
    assert "imagePullSecrets" not in plain
    wanted = want(image="registry.example/slurmkube/jail:1", image_pull_secrets=["site-registry"])
    pod = render_populate_job(wanted, "populate")["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "site-registry"}]
    assert pod["automountServiceAccountToken"] is False


def test_a_pull_secret_that_is_no_secret_name_is_refused_naming_the_option():
    with pytest.raises(JailVolumeError, match="image_pull_secrets: must be Secret names, got 'Site Registry'"):
        want(image_pull_secrets=["Site Registry"])


def test_the_module_job_is_the_operators_job_on_another_claim():
    cluster = example(EXAMPLES[0])[0]
    operator_job = render_jail_populate_job(cluster)
    wanted = want(image=cluster.spec.images.jail)
    job = render_populate_job(wanted, populate_job_name(wanted))
    container, theirs = job["spec"]["template"]["spec"]["containers"][0], \
        operator_job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == theirs["command"] and container["volumeMounts"] == theirs["volumeMounts"]
    marker = {e["name"]: e["value"] for e in container["env"]}["SLURMKUBE_JAIL_VERSION"]
    assert marker == {e["name"]: e["value"] for e in theirs["env"]}["SLURMKUBE_JAIL_VERSION"]


def test_repopulate_never_takes_the_full_copy_path():
    wanted = want(repopulate=True)
    command = render_populate_job(wanted, populate_job_name(wanted))["spec"]["template"]["spec"]["containers"][0][
        "command"]
    assert command[:2] == ["/bin/sh", "-c"]
    assert 'if [ -e "$marker" ]; then echo slurmkube-repopulate >"$marker"; fi' in command[2]
    assert populate_job_name(wanted, now=lambda: 1.0) != populate_job_name(wanted, now=lambda: 2.0)
    assert populate_job_name(want()) == populate_job_name(want())


@pytest.mark.parametrize(("params", "message"), [
    ({"size": "lots"}, "size: 'lots' is not a Kubernetes quantity"),
    ({"size": "0"}, "size: '0' is not a Kubernetes quantity"),
    ({"name": "Jail"}, "name: 'Jail' must be a DNS label"),
    ({"storage_class": "rwx", "existing_claim": "x"}, "existing_claim: only one of"),
    ({"nfs": {"server": "nfs", "path": "exports"}}, "nfs: needs a server and an absolute path"),
    ({"image": None}, "image: the jail image is required"),
])
def test_bad_options_fail_naming_the_option(params, message):
    with pytest.raises(JailVolumeError, match=message):
        want(**params)


def test_unknown_storage_class_fails_before_writing():
    kube = kube_with_class()
    with pytest.raises(JailVolumeError, match="storage_class: no StorageClass named fast"):
        ensure_present(kube, want(storage_class="fast"), check_mode=False)
    assert kube.writes == 1


def test_no_default_class_fails_when_none_is_named():
    with pytest.raises(JailVolumeError, match="storage_class: not set and the cluster has no default"):
        ensure_present(MemoryKube(), want(), check_mode=False)


def test_a_claim_never_shrinks_and_keeps_its_class():
    kube = kube_with_class()
    ensure_present(kube, want(size="20Gi"), check_mode=False)
    with pytest.raises(JailVolumeError, match="size: claim jail has 20Gi; a claim cannot shrink to 10Gi"):
        ensure_present(kube, want(size="10Gi"), check_mode=False)


def test_present_is_idempotent_and_check_mode_writes_nothing():
    kube = kube_with_class()
    first = ensure_present(kube, want(), check_mode=True)
    assert first.changed and kube.writes == 1 and len(first.diffs) == 2
    assert ensure_present(kube, want(), check_mode=False).changed
    writes = kube.writes
    again = ensure_present(kube, want(), check_mode=False)
    assert not again.changed and kube.writes == writes and again.claim == "jail"


def test_absent_keeps_the_claim_unless_purged_and_never_a_claim_in_use():
    kube = kube_with_class()
    ensure_present(kube, want(), check_mode=False)
    result = ensure_absent(kube, want(state="absent"), check_mode=False)
    assert result.changed and kube.get("v1", "PersistentVolumeClaim", "jail", "hpc") is not None
    kube.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "demo-login-0", "namespace": "hpc"},
                "spec": {"volumes": [{"name": "jail", "persistentVolumeClaim": {"claimName": "jail"}}]}})
    with pytest.raises(JailVolumeError, match="purge: claim jail is still mounted by pod demo-login-0"):
        ensure_absent(kube, want(state="absent", purge=True), check_mode=False)
    kube.delete("v1", "Pod", "demo-login-0", "hpc")
    assert ensure_absent(kube, want(state="absent", purge=True), check_mode=False).changed
    assert kube.get("v1", "PersistentVolumeClaim", "jail", "hpc") is None


def test_a_failed_populate_job_fails_the_wait_with_its_reason():
    kube = MemoryKube()
    kube.apply({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "hpc"},
                "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                                           "message": "Job has reached the specified backoff limit"}]}})
    with pytest.raises(JailVolumeError, match="populate Job hpc/j failed: BackoffLimitExceeded"):
        wait_populated(kube, "hpc", "j", 10, Timer(lambda s: None, lambda: 0.0))
