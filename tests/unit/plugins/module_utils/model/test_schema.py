"""The committed CRDs are the model's; examples pass them, bad specs do not."""

from __future__ import annotations

import copy
import subprocess
import sys

import jsonschema
import pytest
import yaml
from collection_path import REPO
from example_clusters import EXAMPLES, example_resources

from ansible_collections.slurmkube.core.plugins.module_utils.model.schema import render_crds, spec_rule_validations


def test_committed_crds_equal_generated():
    result = subprocess.run([sys.executable, str(REPO / "tools" / "gen_crds.py"), "--check"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_committed_crd_files_parse_as_the_generated_objects():
    for crd in render_crds():
        path = REPO / "crds" / ("%s.yaml" % crd["metadata"]["name"])
        assert yaml.safe_load(path.read_text()) == crd


def to_json_schema(node):
    """OpenAPI v3 → JSON Schema: nullable becomes a type union; x-kubernetes-* are dropped."""
    if isinstance(node, list):
        return [to_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: to_json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes") and k != "nullable"}
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        elif "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    return out


def validator(kind):
    crd = next(c for c in render_crds() if c["spec"]["names"]["kind"] == kind)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return jsonschema.Draft7Validator(to_json_schema(schema))


@pytest.mark.parametrize("name", EXAMPLES)
def test_examples_pass_the_crd_schemas(name):
    raw = example_resources(name)
    validator("SlurmCluster").validate(raw["cluster"])
    for nodeset in raw["nodesets"]:
        validator("NodeSet").validate(nodeset)


@pytest.mark.parametrize(
    ("path", "value"),
    [(("replicas",), -1), (("resources", "cpu"), "two"), (("resources", "gpus"), -1),
     (("clusterName",), "Not_A_Name"), (("replicas",), "3")],
)
def test_bad_nodeset_values_fail_the_schema(path, value):
    resource = copy.deepcopy(example_resources("cpu-only")["nodesets"][0])
    target = resource["spec"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert list(validator("NodeSet").iter_errors(resource))


def test_bad_cluster_values_fail_the_schema():
    resource = copy.deepcopy(example_resources("cpu-only")["cluster"])
    resource["spec"] = {"login": {"serviceType": "Ingress", "nodePort": 22}}
    messages = [e.message for e in validator("SlurmCluster").iter_errors(resource)]
    assert len(messages) == 2


def test_nodeset_crd_has_scale_and_status_subresources_and_columns():
    nodeset = next(c for c in render_crds() if c["spec"]["names"]["kind"] == "NodeSet")
    version = nodeset["spec"]["versions"][0]
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Cluster", "Phase", "Ready", "Desired", "Age"]


def test_schema_defaults_are_the_model_defaults():
    cluster = next(c for c in render_crds() if c["spec"]["names"]["kind"] == "SlurmCluster")
    spec = cluster["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["login"]["properties"]["replicas"]["default"] == 1
    assert spec["slurm"]["properties"]["maxNodeCount"]["default"] == 1024
    assert spec["login"]["properties"]["serviceType"]["enum"] == ["NodePort", "LoadBalancer", "ClusterIP"]


def defaulted_properties(schema: dict, path: str = ""):
    """(path, property schema) of every property with a default, however deep."""
    for name, prop in (schema.get("properties") or {}).items():
        if "default" in prop:
            yield path + name, prop
        yield from defaulted_properties(prop, path + name + ".")
    if isinstance(schema.get("items"), dict):
        yield from defaulted_properties(schema["items"], path + "[]")


@pytest.mark.parametrize("crd", render_crds(), ids=lambda crd: crd["spec"]["names"]["kind"])
def test_every_default_obeys_its_own_property_schema_as_the_api_server_requires(crd):
    """The API server refuses a CRD whose default fails its own pattern, enum or bounds (an empty
    string default under a DN pattern did so on kind, 2026-12-02)."""
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, prop in defaulted_properties(schema):
        nested = ("properties", "items", "x-kubernetes-validations")
        own = {key: value for key, value in prop.items() if key not in nested}
        errors = [error.message for error in jsonschema.Draft7Validator(own).iter_errors(prop["default"])]
        assert not errors, (path, errors)


def test_the_spec_rules_cover_every_slurm_settings_map_of_the_model():
    """Made from the model: each Dict[str, SlurmValue] field gets a key rule and a value rule; a new
    map of Slurm settings is covered without a line written for it."""
    messages = [v["message"] for v in spec_rule_validations()]
    maps = {m.split(":")[0] for m in messages if "keys must be" in m}
    assert maps == {"spec.slurm.config", "spec.slurm.privilegedConfig", "spec.slurm.cgroupConfig",
                    "spec.partitions[*].config", "spec.accounting.config"}
    assert maps == {m.split(":")[0] for m in messages if "values must be one word" in m}


def checked_lists(node, path="spec"):
    """(path, list schema) of every list the API server checks with a CEL rule, anywhere below."""
    if not isinstance(node, dict):
        return
    if node.get("type") == "array" and node.get("x-kubernetes-validations"):
        yield path, node
    for key, child in (node.get("properties") or {}).items():
        yield from checked_lists(child, path + "." + key)
    if isinstance(node.get("items"), dict):
        yield from checked_lists(node["items"], path + "[*]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from checked_lists(node["additionalProperties"], path + "[*]")


def test_every_list_a_cel_rule_checks_is_bounded_so_the_api_server_can_cost_it():
    """The API server refuses a CRD whose rules it cannot bound (a login.service list of CIDRs
    without a length made it 13 times over its budget, seen only on kind): each such list has
    maxItems, and its string items a maxLength."""
    unbounded = []
    for crd in render_crds():
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        for path, node in checked_lists(schema):
            items = node.get("items") or {}
            if "maxItems" not in node or (items.get("type") == "string" and "maxLength" not in items):
                unbounded.append("%s %s" % (crd["spec"]["names"]["kind"], path))
    assert unbounded == []
