"""Leader election: one leader at a time, a dead leader replaced after one lease, a clean handover."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils.operator.leader import (
    LeaderElector,
    LeaseRecord,
    claimed_spec,
    may_take,
)


class Clock:
    """Monotonic seconds, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(kube: MemoryKube, clock: Clock, identity: str) -> LeaderElector:
    return LeaderElector(kube, "ops", "slurmkube-operator", identity, duration=15, renew_deadline=10,
                         clock=clock, wall=lambda: datetime(2026, 11, 22, 4, 0, tzinfo=timezone.utc))


def holder(kube: MemoryKube) -> str:
    return kube.get("coordination.k8s.io/v1", "Lease", "slurmkube-operator", "ops")["spec"]["holderIdentity"]


def test_first_candidate_leads_and_the_second_waits():
    kube, clock = MemoryKube(), Clock()
    a, b = elector(kube, clock, "a"), elector(kube, clock, "b")
    assert a.attempt() is True and a.is_leader()
    assert b.attempt() is False and not b.is_leader()
    assert holder(kube) == "a"


def test_renewals_keep_the_leader_and_the_standby_out():
    kube, clock = MemoryKube(), Clock()
    a, b = elector(kube, clock, "a"), elector(kube, clock, "b")
    a.attempt()
    b.attempt()
    start = clock.now
    for renewal in range(1, 21):  # a minute of renewals every 3 s, far past one lease
        clock.now = start + 3 * renewal
        assert a.attempt() is True
        assert b.attempt() is False
    assert holder(kube) == "a"


def test_a_silent_leader_is_replaced_only_after_a_whole_lease_and_stops_leading_before():
    kube, clock = MemoryKube(), Clock()
    a, b = elector(kube, clock, "a"), elector(kube, clock, "b")
    a.attempt()
    b.attempt()  # b sees a's record now
    clock.now += 10
    assert not a.is_leader()  # renew deadline passed on a's own clock: it stops acting
    clock.now += 5
    assert b.attempt() is False  # exactly one lease since b saw the record: not yet
    clock.now += 0.1
    assert b.attempt() is True and holder(kube) == "b"
    record = kube.get("coordination.k8s.io/v1", "Lease", "slurmkube-operator", "ops")["spec"]
    assert record["leaseTransitions"] == 1


def test_release_hands_over_at_once():
    kube, clock = MemoryKube(), Clock()
    a, b = elector(kube, clock, "a"), elector(kube, clock, "b")
    a.attempt()
    b.attempt()
    a.release()
    assert not a.is_leader()
    assert b.attempt() is True and holder(kube) == "b"


def test_losing_a_race_is_not_an_error():
    kube, clock = MemoryKube(), Clock()
    a, b = elector(kube, clock, "a"), elector(kube, clock, "b")
    real_get = kube.get

    def get_then_a_wins(*args):
        # b reads "no Lease", then a creates it before b writes: b's create conflicts.
        kube.get = real_get
        a.attempt()

    kube.get = get_then_a_wins
    assert b.attempt() is False
    assert holder(kube) == "a"


def test_a_leader_whose_write_conflicts_keeps_leading_only_until_its_deadline():
    kube, clock = MemoryKube(), Clock()
    a = elector(kube, clock, "a")
    a.attempt()
    lease = kube.objects[("Lease", "ops", "slurmkube-operator")]
    lease["spec"]["holderIdentity"] = "intruder"  # an out-of-band edit
    clock.now += 3
    assert a.attempt() is True  # the intruder's record is fresh: a may not take it, but its term runs on
    clock.now += 7.1
    assert a.attempt() is False and not a.is_leader()


def test_takeover_counts_transitions_and_renewal_keeps_the_acquire_time():
    record = LeaseRecord(holder="a", renew_time="t1", duration_seconds=15, transitions=4, acquire_time="t0")
    assert claimed_spec(record, "a", 15, "t2")["acquireTime"] == "t0"
    assert claimed_spec(record, "a", 15, "t2")["leaseTransitions"] == 4
    taken = claimed_spec(record, "b", 15, "t2")
    assert taken["acquireTime"] == "t2" and taken["leaseTransitions"] == 5
    assert claimed_spec(None, "b", 15, "t2")["leaseTransitions"] == 0


@pytest.mark.parametrize(("holder_id", "unchanged_for", "expected"), [
    ("", 0, True), ("b", 0, True), ("a", 14.9, False), ("a", 15, False), ("a", 15.01, True),
])
def test_may_take(holder_id: str, unchanged_for: float, expected: bool):
    record = LeaseRecord(holder=holder_id, renew_time="t", duration_seconds=15, transitions=0, acquire_time="t")
    assert may_take(record, "b", unchanged_for) is expected


def test_renew_deadline_must_be_shorter_than_the_lease():
    with pytest.raises(ValueError, match="renew_deadline"):
        LeaderElector(MemoryKube(), "ops", "x", "a", duration=10, renew_deadline=10)
