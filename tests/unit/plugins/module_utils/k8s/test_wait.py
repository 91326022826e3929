"""When a StatefulSet counts as ready: its latest spec seen, every pod Ready, a roll over; when a
Deployment has settled: available, and no pod of its template before left; and the one wait
loop: how it sleeps, and which API errors it waits through."""

from __future__ import annotations

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import (
    Poll,
    Timer,
    deployment_settled,
    statefulset_ready,
    wait_until,
)


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


ROLLED_OUT = {"metadata": {"generation": 3},
              "status": {"observedGeneration": 3, "updatedReplicas": 1, "availableReplicas": 1, "replicas": 1}}


def pod(name: str, terminating: bool = False) -> dict:
    return {"metadata": dict({"name": name}, **({"deletionTimestamp": "2026-12-04T03:31:50Z"} if terminating else {}))}


def test_a_deployment_settles_once_the_pod_of_its_template_before_is_gone():
    # Its counts already leave out the old pod shutting down (an operator still handling events).
    assert not deployment_settled(ROLLED_OUT, [pod("new"), pod("old", terminating=True)], 1)
    assert deployment_settled(ROLLED_OUT, [pod("new")], 1)
    assert not deployment_settled(dict(ROLLED_OUT, status=dict(ROLLED_OUT["status"], observedGeneration=2)),
                                  [pod("new")], 1)


def test_no_pod_ready_is_not_ready():
    assert not statefulset_ready(sts(ready=0))


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


DONE = Poll(True, "done")


def failing(*causes: BaseException):
    """A probe that raises KubeError from each cause in turn, then answers DONE."""
    left = list(causes)

    def probe() -> Poll:
        if left:
            try:
                raise left.pop(0)
            except BaseException as exc:
                raise KubeError("cannot read x: %s" % exc) from exc
        return DONE
    return probe


def test_the_loop_sleeps_wait_sleep_between_looks():
    time = FakeTime()
    looks = iter([Poll(False), Poll(False), Poll(True, "ok")])
    assert wait_until(lambda: next(looks), 60, Timer(time.sleep, time.clock, 7.0)) == Poll(True, "ok")
    assert time.slept == [7.0, 7.0]


def test_api_errors_that_pass_do_not_end_a_wait():
    time = FakeTime()
    causes = (ApiException(status=503, reason="Service Unavailable"), ApiException(status=429, reason="Too Many"),
              urllib3.exceptions.MaxRetryError(None, "/api", "Connection refused"), ConnectionResetError())
    assert wait_until(failing(*causes), 60, Timer(time.sleep, time.clock, 1.0)) == DONE
    assert time.slept == [1.0] * 4


def test_an_error_that_will_not_pass_ends_the_wait_at_once():
    time = FakeTime()
    for cause in (ApiException(status=403, reason="Forbidden"), ApiException(status=404, reason="Not Found")):
        with pytest.raises(KubeError, match=r"Forbidden|Not Found"):
            wait_until(failing(cause), 60, Timer(time.sleep, time.clock, 1.0))
    assert time.slept == []


def test_an_error_still_there_at_the_deadline_is_raised():
    time = FakeTime()
    causes = [ApiException(status=500, reason="Internal Server Error")] * 100
    with pytest.raises(KubeError, match="Internal Server Error"):
        wait_until(failing(*causes), 10, Timer(time.sleep, time.clock, 3.0))
    assert time.now == 12.0
