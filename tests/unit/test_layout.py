"""The house rules: module_utils is layered by concern and imports point down only.

    ground    constants, digest, errors, keys, names,     (nothing of ours)
              quantity
    model     fields, types, parse, rules, derived, CRD    (ground)
              schema
    render    pure: model -> objects and config text      (ground, model)
    k8s       client, apply + compare, wait, pods          (ground)
    slurm     runner, control, facts, drain reasons       (ground, k8s)
    operator  reconciler, planners, leader, key roll      (all of the above)
    ops       one back end per module                      (all of the above but operator)

Modules (plugins/modules) never reach the operator either; the operator's entry point does not
reach the modules' back ends, the exporter's reads Slurm only; the node programs under images/node
run alone on the nodes and import nothing of ours.

Inside a layer nothing points sideways: a module imports only its layer's floor (the shared pieces,
which import no other kind), and only the layer's top (the one that puts the layer's work
together) imports the rest. A new file of the ground floor, like a new layer, is a decision: the
tests name each one.
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
GROUND_FILES = {"constants", "digest", "errors", "jwt", "keys", "names", "quantity"}
LAYERS = ("model", "render", "k8s", "slurm", "operator", "ops")
# What every module of a layer may import from its own layer.
FLOORS: Dict[str, Set[str]] = {
    "model": {"backup", "bridge", "directory", "fields", "health", "network", "pods", "problems", "types"},
    "render": {"bridge", "common", "directory", "jwt_auth", "pods", "power_saving", "profile", "seccomp",
               "slurm_config"},
    "k8s": {"client"},
    "slurm": {"control", "drain", "facts", "sacctmgr"},
    "operator": {"backups", "images", "leader", "pass_state", "plan_bridge", "plan_munge_key", "plan_nodes",
                 "plan_power", "plan_upgrade", "serving", "status", "telemetry", "topology", "volume_refresh"},
    "ops": {"common"},
}
# The one module of a layer that puts the others together.
TOPS = {"model": "parse", "render": "cluster", "operator": "reconcile"}
OPERATOR_ENTRY = "operator entry point"
EXPORTER_ENTRY = "exporter entry point"
ENTRY_POINTS = {
    REPO / "images" / "operator" / "slurmkube_operator.py": OPERATOR_ENTRY,
    REPO / "images" / "exporter" / "slurmkube_exporter.py": EXPORTER_ENTRY,
}
ALLOWED: Dict[str, Set[str]] = {
    GROUND: {GROUND},
    "model": {GROUND, "model"},
    "render": {GROUND, "model", "render"},
    "k8s": {GROUND, "k8s"},
    "slurm": {GROUND, "k8s", "slurm"},
    "operator": {GROUND, "model", "render", "k8s", "slurm", "operator"},
    "ops": {GROUND, "model", "render", "k8s", "slurm", "ops"},
    "modules": {GROUND, "model", "k8s", "ops"},
    OPERATOR_ENTRY: {GROUND, "model", "k8s", "slurm", "operator"},
    EXPORTER_ENTRY: {GROUND, "slurm"},
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
            if rest in LAYERS:  # from ...module_utils.render import common, worker
                yield from ("%s.%s" % (rest, alias.name) for alias in node.names)
            elif rest:
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


def sideways(dotted_self: str, source: str) -> List[str]:
    """What a module imports from its own layer that is neither the layer's floor nor allowed to
    its top."""
    layer, name = dotted_self.split(".")[0], dotted_self.split(".")[-1]
    if layer not in LAYERS or TOPS.get(layer) == name:
        return []
    return sorted(dotted for dotted in imported_modules(source)
                  if dotted.startswith(layer + ".") and dotted.split(".")[1] not in FLOORS[layer] | {name})


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


def layer_files() -> Iterator[Tuple[str, Path]]:
    """Every Python file of a layer, as its dotted path below module_utils."""
    for path in sorted(MODULE_UTILS.rglob("*.py")):
        dotted = ".".join(path.relative_to(MODULE_UTILS).with_suffix("").parts)
        if layer_of(dotted) != GROUND and not dotted.endswith("__init__"):
            yield dotted, path


@pytest.mark.parametrize("dotted,path", list(layer_files()), ids=lambda v: v if isinstance(v, str) else "")
def test_nothing_points_sideways_inside_a_layer(dotted, path):
    assert sideways(dotted, path.read_text()) == []


@pytest.mark.parametrize("path,kind", sorted(ENTRY_POINTS.items()), ids=lambda v: v.name if isinstance(v, Path) else v)
def test_entry_points_reach_only_the_layers_they_run(path, kind):
    assert violations(kind, path.read_text()) == []


def test_every_layer_is_a_package_and_nothing_else_sits_in_module_utils():
    folders = {p.name for p in MODULE_UTILS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(LAYERS)
    assert all((MODULE_UTILS / layer / "__init__.py").is_file() for layer in LAYERS)
    assert {p.stem for p in MODULE_UTILS.glob("*.py")} - {"__init__"} == GROUND_FILES


def test_every_floor_and_top_names_a_file_of_its_layer():
    for layer, floor in FLOORS.items():
        assert {name for name in floor if not (MODULE_UTILS / layer / (name + ".py")).is_file()} == set(), layer
    assert all((MODULE_UTILS / layer / (name + ".py")).is_file() for layer, name in TOPS.items())


def test_each_module_has_its_back_end_named_after_it():
    """ops/<name>.py; or, for the documentation of an action (it runs on the controller), the
    action plugins/action/<name>.py, and every action is documented so."""
    modules = {p.stem for p in (REPO / "plugins" / "modules").glob("*.py")}
    actions = {p.stem for p in (REPO / "plugins" / "action").glob("*.py")}
    back_ends = {p.stem for p in (MODULE_UTILS / "ops").glob("*.py")} - {"__init__", "common"}
    assert back_ends == modules - actions
    assert actions and actions <= modules


def test_node_programs_import_nothing_of_the_collection():
    programs = sorted((REPO / "images" / "node").glob("*.py"))
    assert programs
    for path in programs:
        assert "ansible_collections" not in path.read_text(), path


@pytest.mark.parametrize("layer,line", [
    ("ops", "from %s.operator.reconcile import Reconciler" % PREFIX),
    ("model", "from %s.k8s.client import Kube" % PREFIX),
    ("render", "from %s.slurm import control" % PREFIX),
    ("k8s", "from %s.model.types import SlurmCluster" % PREFIX),
    ("modules", "import %s.operator.leader" % PREFIX),
    (OPERATOR_ENTRY, "from %s.ops.slurm_cluster import plan_present" % PREFIX),
    (EXPORTER_ENTRY, "from %s.k8s.client import Kube" % PREFIX),
])
def test_the_rule_catches_an_import_upward(layer, line):
    assert violations(layer, line + "\n")


@pytest.mark.parametrize("dotted,line", [
    ("ops.gpu_healthcheck", "from %s.ops.slurm_cluster import ClusterError" % PREFIX),
    ("render.controller", "from %s.render import accounting" % PREFIX),
    ("operator.report", "from %s.operator.nodes import JobNotRequeued" % PREFIX),
    ("model.rules", "from %s.model.parse import parse_cluster" % PREFIX),
])
def test_the_rule_catches_an_import_sideways(dotted, line):
    assert sideways(dotted, line + "\n")


def test_the_top_of_a_layer_puts_its_peers_together():
    assert sideways("render.cluster", "from %s.render import accounting, worker\n" % PREFIX) == []


def test_no_file_of_the_collection_is_longer_than_a_reader_takes_in():
    """600 lines at most: past that, a file holds more than one concern (model/spec.py had grown
    to 1,226 lines of types, parser, rules, names and CRD text)."""
    lengths = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in (REPO / "plugins").rglob("*.py")}
    assert {path: n for path, n in lengths.items() if n > 600} == {}
