"""examples/: every cluster there is one the model accepts and the renderers turn into objects
(the checks slurm_cluster and the operator make before they write), and the images file names
every image site.yml deploys. A changed field name or rule breaks the example here first."""

from __future__ import annotations

import re

import pytest
import yaml
from collection_path import REPO

from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.model.rules import check_references
from ansible_collections.slurmkube.core.plugins.module_utils.render.cluster import render_cluster

EXAMPLES = REPO / "examples"
CLUSTERS = sorted(p.name for p in EXAMPLES.glob("*.yml") if "slurmkube_cluster" in yaml.safe_load(p.read_text()))


def settings(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / name).read_text())


def test_there_are_a_gpu_and_a_production_cluster_and_an_images_file():
    assert set(CLUSTERS) == {"gpu-cluster.yml", "production-nfs.yml"}
    assert (EXAMPLES / "images-private-registry.yml").is_file()


@pytest.mark.parametrize("name", CLUSTERS)
def test_an_example_cluster_is_valid_and_renders(name: str):
    example = settings(name)
    cluster = parse_cluster(example["slurmkube_cluster"])
    node_sets = [parse_nodeset(n) for n in example["slurmkube_node_sets"]]
    check_references(cluster, node_sets)
    kinds = {obj["kind"] for obj in render_cluster(cluster, node_sets).objects}
    assert {"StatefulSet", "Service", "ConfigMap"} <= kinds, kinds
    namespace = example["slurmkube_cluster"]["metadata"]["namespace"]
    assert {n["metadata"]["namespace"] for n in example["slurmkube_node_sets"]} == {namespace}


def test_the_images_file_names_every_image_site_yml_deploys():
    site = (REPO / "playbooks" / "site.yml").read_text()
    deployed = re.search(r"kubernetes_images: \"\{\{ \(?(\[[^\]]+\])((?:\s*\+ \(\['\w+'\] if \w+ else \[\]\))*)", site)
    assert deployed, "site.yml's list of images moved"
    # The images every cluster runs, and those a setting adds (the Prometheus of slurmkube_prometheus).
    wanted = set(yaml.safe_load(deployed.group(1))) | set(re.findall(r"\['(\w+)'\]", deployed.group(2)))
    assert "prometheus" in wanted, deployed.group(0)
    images = settings("images-private-registry.yml")
    assert set(images["slurmkube_images"]) == wanted
    assert all(ref.startswith("registry.example.internal/slurmkube/") for ref in images["slurmkube_images"].values())
    assert images["slurmkube_pull_policy"] == "IfNotPresent"
