"""status.controlPlane: each part of the control plane the spec asks for (controller, accounting,
REST, login), up or not, and an Event when one goes down or comes back (report.py)."""

from __future__ import annotations

from test_accounting_status import AccountingKube
from test_reconcile_health import T0, make_world, reconcile_at

from ansible_collections.slurmkube.core.plugins.module_utils.model.schema import CONTROL_PLANE_PARTS
from ansible_collections.slurmkube.core.plugins.module_utils.operator.report import PART_CONDITIONS


def set_ready(kube, kind, name, ready):
    obj = kube.objects[(kind, "research", name)]
    obj["status"] = dict(obj.get("status") or {}, readyReplicas=ready)


def parts_world(monkeypatch):
    kube, cluster = make_world(monkeypatch, AccountingKube(), spec={
        "accounting": {"enabled": True}, "rest": {"enabled": True}, "login": {"replicas": 2}})
    set_ready(kube, "StatefulSet", "cpu-login", 2)
    set_ready(kube, "Deployment", "cpu-rest", 2)
    return kube, cluster


def part_events(outcome):
    return [(e.kind, e.reason, e.message) for e in outcome.events if e.reason.endswith("vailable")]


def test_every_part_asked_for_is_named_up_and_a_first_pass_says_nothing_of_changes(monkeypatch):
    kube, cluster = parts_world(monkeypatch)
    outcome = reconcile_at(kube, cluster, T0)
    assert outcome.status["controlPlane"] == {"controller": True, "accounting": True, "rest": True, "login": True}
    assert part_events(outcome) == []


def test_a_part_going_down_is_a_warning_with_its_conditions_message_and_its_return_an_event(monkeypatch):
    kube, cluster = parts_world(monkeypatch)
    first = reconcile_at(kube, cluster, T0)
    set_ready(kube, "StatefulSet", "cpu-login", 0)
    set_ready(kube, "Deployment", "cpu-rest", 0)
    second = reconcile_at(kube, dict(cluster, status=first.status), T0)
    assert second.status["controlPlane"] == {"controller": True, "accounting": True, "rest": False, "login": False}
    assert part_events(second) == [("Warning", "RestUnavailable", "0/2 slurmrestd pods ready"),
                                   ("Warning", "LoginUnavailable", "0/2 login pods ready")]
    # Once said, not again; one login pod of two is enough for users to log in.
    third = reconcile_at(kube, dict(cluster, status=second.status), T0)
    assert part_events(third) == []
    set_ready(kube, "StatefulSet", "cpu-login", 1)
    fourth = reconcile_at(kube, dict(cluster, status=third.status), T0)
    assert part_events(fourth) == [("Normal", "LoginAvailable", "1/2 login pods ready")]
    login_ready = next(c for c in fourth.status["conditions"] if c["type"] == "LoginReady")
    assert login_ready["status"] == "False"


def test_no_serving_controller_is_a_warning_and_accounting_keeps_what_was_last_known(monkeypatch):
    kube, cluster = parts_world(monkeypatch)
    first = reconcile_at(kube, cluster, T0)
    del kube.objects[("Pod", "research", "cpu-controller-0")]
    second = reconcile_at(kube, dict(cluster, status=first.status), T0)
    assert second.status["controlPlane"] == {"controller": False, "accounting": True, "rest": True, "login": True}
    assert [e[:2] for e in part_events(second)] == [("Warning", "ControllerUnavailable")]
    assert "no slurmctld serves" in part_events(second)[0][2]


def test_parts_the_spec_does_not_ask_for_are_not_named(monkeypatch):
    kube, cluster = make_world(monkeypatch, spec={"login": {"replicas": 0}})
    assert reconcile_at(kube, cluster, T0).status["controlPlane"] == {"controller": True}


def test_the_crd_schema_declares_every_part_the_operator_names():
    assert set(PART_CONDITIONS) == set(CONTROL_PLANE_PARTS)
