"""Role accounts, run by a real ansible-playbook: a name listed twice is refused before any
module runs (the modules themselves are tested against real slurmdbd: tests/k8s/test_accounting.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playbook_runner import run_role


@pytest.mark.parametrize(("field", "items", "repeated"), [
    ("accounts_qos", [{"name": "normal"}, {"name": "high"}, {"name": "normal"}], "normal"),
    ("accounts_accounts", [{"name": "physics"}, {"name": "chem"}, {"name": "chem", "state": "absent"},
                           {"name": "physics"}], "chem, physics"),
    ("accounts_users", [{"name": "alice", "accounts": ["physics"]}, {"name": "alice", "accounts": ["chem"]}],
     "alice"),
])
def test_a_name_listed_twice_is_refused_naming_the_list_before_any_change(tmp_path: Path, field, items, repeated):
    # No cluster is reachable: had a module run, the play would fail on the connection instead.
    role_vars = {field: items, "accounts_kubeconfig": str(tmp_path / "absent-kubeconfig")}
    proc = run_role(tmp_path, "accounts", role_vars, "accounts_cluster")[0]
    output = " ".join(proc.stdout.split())
    assert proc.returncode != 0
    assert "%s: each name once, listed more than once: %s" % (field, repeated) in output, output[-3000:]
    assert "Ensure the" not in output


def test_names_listed_once_pass_the_check(tmp_path: Path):
    """The control: the same lists without repeats get past the check (to the first module, which
    finds no cluster)."""
    role_vars = {"accounts_qos": [{"name": "normal"}, {"name": "high"}],
                 "accounts_kubeconfig": str(tmp_path / "absent-kubeconfig")}
    proc = run_role(tmp_path, "accounts", role_vars, "accounts_cluster")[0]
    output = " ".join(proc.stdout.split())
    assert "listed more than once" not in output
    assert "Ensure the QoS" in output
