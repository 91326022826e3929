"""When a StatefulSet counts as ready: its latest spec seen, every pod Ready, a roll over."""

from __future__ import annotations

from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import statefulset_ready


def sts(generation: int = 2, observed: int = 2, ready: int = 1, current: str = "r2", update: str = "r2") -> dict:
    return {"metadata": {"generation": generation}, "spec": {"replicas": 1},
            "status": {"observedGeneration": observed, "readyReplicas": ready, "replicas": 1,
                       "currentRevision": current, "updateRevision": update}}


def test_every_pod_ready_on_the_latest_revision_is_ready():
    assert statefulset_ready(sts())


def test_a_spec_not_seen_yet_is_not_ready():
    assert not statefulset_ready(sts(observed=1))


def test_the_old_pod_still_ready_during_a_rolling_update_is_not_ready():
    assert not statefulset_ready(sts(current="r1", update="r2"))


def test_no_pod_ready_is_not_ready():
    assert not statefulset_ready(sts(ready=0))
