"""names.py is the one place an object name, a label set or a derived address is built.

The scan reads every file that renders, reconciles or reaches the API (module_utils but names.py,
the modules, the operator's and the exporter's entry points) and fails on a name put together by
hand: a format that is a dash-joined name ("%s-%s", "%s-login"), a string joined to a dash-edged
piece (name + "-munge-key", f"{name}-login", "-".join(...)), or a Service's DNS domain.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest
from collection_path import REPO

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names

NAMES = REPO / "plugins" / "module_utils" / "names.py"
# A whole format that is a name: dash-joined words and placeholders, one of them a %s.
NAME_FORMAT = re.compile(r"^(?=.*%s)(%[sd]|[a-z0-9]+)(-(%[sd]|[a-z0-9]+))+$")
DASH_EDGED = re.compile(r"^-[a-z0-9]|[a-z0-9]-$")
SERVICE_DOMAIN = re.compile(r"\.svc(\.|$)")


def _text(node: ast.AST) -> str:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def hand_built_names(source: str) -> List[Tuple[int, str]]:
    """(line, the piece) of every name a file puts together itself."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and NAME_FORMAT.match(_text(node.left)):
            found.append((node.lineno, _text(node.left)))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            found.extend((node.lineno, _text(side)) for side in (node.left, node.right)
                         if DASH_EDGED.search(_text(side)))
        elif isinstance(node, ast.JoinedStr):
            found.extend((node.lineno, _text(part)) for part in node.values
                         if _text(part).startswith("-") or _text(part).endswith("-"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join" \
                and _text(node.func.value) == "-":
            found.append((node.lineno, '"-".join'))
        if SERVICE_DOMAIN.search(_text(node)):
            found.append((getattr(node, "lineno", 0), _text(node)))
    return sorted(set(found))


def scanned_files() -> Iterator[Path]:
    yield from (p for p in sorted((REPO / "plugins").rglob("*.py")) if p != NAMES and "doc_fragments" not in p.parts)
    yield from sorted((REPO / "images" / "operator").glob("*.py"))
    yield from sorted((REPO / "images" / "exporter").glob("*.py"))


@pytest.mark.parametrize("path", list(scanned_files()), ids=lambda p: str(p.relative_to(REPO)))
def test_no_name_is_built_outside_names(path):
    assert hand_built_names(path.read_text()) == []


@pytest.mark.parametrize("line", [
    'name = cluster.name + "-munge-key"',
    'name = "%s-%s" % (cluster.name, component)',
    'name = "%s-login" % cluster',
    'name = f"{cluster}-login"',
    'name = "-".join((cluster, "login"))',
    'host = "%s.%s.svc.cluster.local" % (service, namespace)',
])
def test_the_scan_catches_a_hand_built_name(line):
    assert hand_built_names(line + "\n")


@pytest.mark.parametrize("line", [
    'ports = "%d-%d" % C.SRUN_PORT_RANGE',
    'path = "%s-%s.yaml" % (kind, name)',
    'message = "%s: %s" % (path, problem)',
])
def test_the_scan_leaves_other_text_alone(line):
    assert hand_built_names(line + "\n") == []


def test_a_clusters_objects_are_named_after_it():
    assert names.controller("demo") == "demo-controller"
    assert names.controller_pod("demo") == "demo-controller-0"
    assert names.controller_address("demo", "hpc") == "demo-controller.hpc.svc.cluster.local"
    assert names.nodeset("demo", "cpu") == "demo-cpu"
    assert names.pod(names.nodeset("demo", "cpu"), 3) == "demo-cpu-3"
    assert names.node_range("demo-cpu", 4) == "demo-cpu-[0-3]"
    assert names.login_hosts("demo") == "demo-login-hosts"


def test_an_override_from_the_spec_wins():
    assert names.munge_key_secret("demo") == "demo-munge-key"
    assert names.munge_key_secret("demo", "site-key") == "site-key"
    assert names.jail_claim("demo", "shared-home") == "shared-home"
    assert names.slurmdbd_host("demo", "dbd.example.org") == "dbd.example.org"
    assert names.accounting_db_secret("demo") == "demo-accounting-db"


def test_a_populate_job_is_told_apart_from_other_jobs():
    job = names.jail_populate_job("demo", "0123abcd")
    assert names.is_jail_populate_job("demo", job)
    assert not names.is_jail_populate_job("demo", names.healthcheck("demo") + "x")
    assert not names.is_jail_populate_job("demo-2", job)


def test_labels_select_a_component_and_mark_what_we_made():
    selector = names.selector_labels("demo", C.COMPONENT_WORKER, "cpu")
    assert selector == {C.LABEL_CLUSTER: "demo", C.LABEL_COMPONENT: C.COMPONENT_WORKER, C.LABEL_NODESET: "cpu"}
    assert names.object_labels("demo", C.COMPONENT_WORKER, "cpu").items() >= selector.items()
    assert C.LABEL_CLUSTER not in names.standalone_labels("home", C.COMPONENT_JAIL)
