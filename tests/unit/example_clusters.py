"""The example clusters under fixtures/clusters, loaded as validated models."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Tuple

import yaml

from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import NodeSet, SlurmCluster

FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXAMPLES = sorted(p.stem for p in (FIXTURES / "clusters").glob("*.yml"))


def example_resources(name: str) -> Dict[str, Any]:
    """The raw resources of one example: {'cluster': {...}, 'nodesets': [...]}."""
    return yaml.safe_load((FIXTURES / "clusters" / ("%s.yml" % name)).read_text())


def example(name: str) -> Tuple[SlurmCluster, List[NodeSet]]:
    """One example cluster and its node sets as models."""
    raw = example_resources(name)
    return parse_cluster(raw["cluster"]), [parse_nodeset(n) for n in raw["nodesets"]]
