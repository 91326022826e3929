"""The benchmarks (tier `bench`) are not run by CI: what they build from the project's models is
checked here, so a model change that breaks one is seen the day it lands (the throughput bench
once broke a day before anyone ran it: the example cluster had gained accounting)."""

from __future__ import annotations

import sys

from collection_path import REPO

sys.path.insert(0, str(REPO / "tests" / "k8s"))

from test_throughput_bench import CLUSTER, quickstart_objects

from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import (
    render_slurm_conf,
)


def test_the_throughput_bench_compares_the_quickstart_shape_without_a_slurmdbd():
    """Its bare Slurm side runs no slurmdbd, and slurmctld stops on a first start when told to
    use one that never answers: both sides must render accounting_storage/none."""
    cluster, nodesets = quickstart_objects("bench")
    model = parse_cluster(cluster)
    models = [parse_nodeset(ns) for ns in nodesets]
    assert model.name == CLUSTER and {ns.spec.cluster_name for ns in models} == {CLUSTER}
    assert sum(ns.spec.replicas for ns in models) > 0
    settings = dict(line.split("=", 1) for line in render_slurm_conf(model, models).splitlines()
                    if "=" in line and not line.startswith("#"))
    assert settings["AccountingStorageType"] == "accounting_storage/none"
