"""The house rules: module_utils is layered by concern and imports point down only.

    ground    constants, digest, keys, labels, quantity   (nothing of ours)
    model     spec types, rules, CRD schema               (ground)
    render    pure: model -> objects and config text      (ground, model)
    k8s       client, apply + compare, wait, pods          (ground)
    slurm     runner, control, facts, drain reasons       (ground, k8s)
    operator  reconciler, planners, leader, key roll      (all of the above)
    ops       one back end per module                      (all of the above but operator)

Modules (plugins/modules) never reach the operator either; the node programs under
images/node run alone on the nodes and import nothing of ours.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

REPO = Path(__file__).resolve().parents[2]
MODULE_UTILS = REPO / "plugins" / "module_utils"
PREFIX = "ansible_collections.slurmkube.core.plugins.module_utils"
GROUND = "ground"
LAYERS = ("model", "render", "k8s", "slurm", "operator", "ops")
ALLOWED: Dict[str, Set[str]] = {
    GROUND: {GROUND},
    "model": {GROUND, "model"},
    "render": {GROUND, "model", "render"},
    "k8s": {GROUND, "k8s"},
    "slurm": {GROUND, "k8s", "slurm"},
    "operator": {GROUND, "model", "render", "k8s", "slurm", "operator"},
    "ops": {GROUND, "model", "render", "k8s", "slurm", "ops"},
    "modules": {GROUND, "model", "k8s", "ops"},
}


def layer_of(dotted: str) -> str:
    """The layer of a module_utils module given by its dotted path below module_utils."""
    head = dotted.split(".", 1)[0]
    return head if head in LAYERS else GROUND


def imported_modules(source: str) -> Iterator[str]:
    """The module_utils modules a file imports, as dotted paths below module_utils."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            rest = node.module[len(PREFIX):].lstrip(".")
            if rest:
                yield rest
            else:  # from ...module_utils import constants
                yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from (alias.name[len(PREFIX):].lstrip(".") for alias in node.names
                        if alias.name.startswith(PREFIX + "."))


def violations(layer: str, source: str) -> List[str]:
    """What a file of this layer imports that the rules forbid."""
    return sorted("%s (%s)" % (dotted, layer_of(dotted)) for dotted in imported_modules(source)
                  if layer_of(dotted) not in ALLOWED[layer])


def collection_files() -> Iterator[Tuple[str, Path]]:
    """Every Python file of module_utils and modules, with its layer."""
    for path in sorted(MODULE_UTILS.rglob("*.py")):
        yield layer_of(".".join(path.relative_to(MODULE_UTILS).with_suffix("").parts)), path
    for path in sorted((REPO / "plugins" / "modules").glob("*.py")):
        yield "modules", path


@pytest.mark.parametrize("layer,path", list(collection_files()),
                         ids=lambda v: str(v.relative_to(REPO)) if isinstance(v, Path) else v)
def test_imports_point_down_only(layer, path):
    assert violations(layer, path.read_text()) == []


def test_every_layer_is_a_package_and_nothing_else_sits_in_module_utils():
    folders = {p.name for p in MODULE_UTILS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(LAYERS)
    assert all((MODULE_UTILS / layer / "__init__.py").is_file() for layer in LAYERS)


def test_each_module_has_its_back_end_named_after_it():
    modules = {p.stem for p in (REPO / "plugins" / "modules").glob("*.py")}
    back_ends = {p.stem for p in (MODULE_UTILS / "ops").glob("*.py")} - {"__init__", "common"}
    assert back_ends == modules


def test_node_programs_import_nothing_of_the_collection():
    programs = sorted((REPO / "images" / "node").glob("*.py"))
    assert programs
    for path in programs:
        assert "ansible_collections" not in path.read_text(), path


@pytest.mark.parametrize("layer,line", [
    ("ops", "from %s.operator.reconcile import Reconciler" % PREFIX),
    ("model", "from %s.k8s.client import Kube" % PREFIX),
    ("render", "from %s.slurm import control" % PREFIX),
    ("k8s", "from %s.model.spec import SlurmCluster" % PREFIX),
    ("modules", "import %s.operator.leader" % PREFIX),
])
def test_the_rule_catches_an_import_upward(layer, line):
    assert violations(layer, line + "\n")
