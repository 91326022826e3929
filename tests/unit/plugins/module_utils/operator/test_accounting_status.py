"""AccountingReady: whether slurmdbd answers from its database, with slurmctld's queue of records
for it, asked from the serving controller each pass; an Event when that changes (report.py)."""

from __future__ import annotations

import json

from test_reconcile_health import T0, SlurmKube, make_world, reconcile_at

from ansible_collections.slurmkube.core.plugins.module_utils.slurm.facts import CLUSTERS_COMMAND


class AccountingKube(SlurmKube):
    """The health tests' controller, with a slurmdbd that answers or not."""

    def __init__(self):
        super().__init__()
        self.slurmdbd = (0, "cpu\n", "")
        self.queue = 0

    def exec(self, namespace, pod, container, command, timeout=60):
        if tuple(command) == CLUSTERS_COMMAND:
            self.execs.append((pod, container, tuple(command)))
            return self.slurmdbd
        if list(command) == ["sdiag", "--json"]:
            return 0, json.dumps({"statistics": {"dbd_agent_queue_size": self.queue}}), ""
        return super().exec(namespace, pod, container, command, timeout)


def accounting_world(monkeypatch):
    return make_world(monkeypatch, AccountingKube(), spec={"accounting": {"enabled": True}})


def accounting_ready(outcome):
    return next(c for c in outcome.status["conditions"] if c["type"] == "AccountingReady")


def test_accounting_is_ready_while_slurmdbd_answers_and_says_what_slurmctld_holds_for_it(monkeypatch):
    kube, cluster = accounting_world(monkeypatch)
    kube.queue = 3
    ready = accounting_ready(reconcile_at(kube, cluster, T0))
    assert (ready["status"], ready["message"]) == ("True", "slurmdbd answers; 3 records queued at slurmctld")


def test_accounting_going_away_is_named_in_the_status_and_a_warning_once_and_its_return_an_event(monkeypatch):
    kube, cluster = accounting_world(monkeypatch)
    first = reconcile_at(kube, cluster, T0)
    kube.slurmdbd = (1, "", "sacctmgr: error: Problem talking to the database: Connection refused\nmore")
    kube.queue = 12
    second = reconcile_at(kube, dict(cluster, status=first.status), T0)
    ready = accounting_ready(second)
    assert ready["status"] == "False"
    assert ready["message"] == ("accounting unavailable: sacctmgr: error: Problem talking to the database: "
                                "Connection refused; 12 records queued at slurmctld, sent once slurmdbd answers")
    assert ready["message"] in second.status["message"]
    assert [(e.kind, e.reason) for e in second.events if e.reason.startswith("Accounting")] == [
        ("Warning", "AccountingUnavailable")]
    third = reconcile_at(kube, dict(cluster, status=second.status), T0)
    assert not [e for e in third.events if e.reason.startswith("Accounting")]
    kube.slurmdbd, kube.queue = (0, "cpu\n", ""), 0
    fourth = reconcile_at(kube, dict(cluster, status=third.status), T0)
    assert accounting_ready(fourth)["status"] == "True"
    assert [(e.kind, e.reason) for e in fourth.events if e.reason.startswith("Accounting")] == [
        ("Normal", "AccountingAvailable")]


def test_a_slurmdbd_that_does_not_answer_in_time_is_unavailable(monkeypatch):
    kube, cluster = accounting_world(monkeypatch)
    kube.slurmdbd = (124, "", "")
    ready = accounting_ready(reconcile_at(kube, cluster, T0))
    assert ready["status"] == "False" and ready["message"].startswith("accounting unavailable: no answer in 10 s")


def test_no_accounting_condition_and_no_question_to_slurmdbd_without_accounting(monkeypatch):
    kube, cluster = make_world(monkeypatch, AccountingKube(), spec={})
    outcome = reconcile_at(kube, cluster, T0)
    assert "AccountingReady" not in [c["type"] for c in outcome.status["conditions"]]
    assert not [e for e in kube.execs if e[2] == CLUSTERS_COMMAND]
