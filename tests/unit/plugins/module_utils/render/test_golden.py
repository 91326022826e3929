"""What the renderers make for each example cluster equals the reviewed golden files: the Slurm
config files (golden/<example>/<file>) and every Kubernetes object (golden/<example>/objects/
<kind>-<name>.yaml), so a change to any rendered field shows in review.

Regenerate after an intended change with SLURMKUBE_UPDATE_GOLDEN=1, then review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict

import pytest
import yaml
from example_clusters import EXAMPLES, FIXTURES, example

from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import runs_slurmdbd
from ansible_collections.slurmkube.core.plugins.module_utils.ops.cluster_manifests import manifest_file_name
from ansible_collections.slurmkube.core.plugins.module_utils.render.accounting import render_slurmdbd_conf
from ansible_collections.slurmkube.core.plugins.module_utils.render.cluster import render_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.render.login import render_sshd_config
from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import render_config_files

GOLDEN = FIXTURES / "golden"
OBJECTS = "objects"


def rendered_files(name: str) -> Dict[str, str]:
    cl, sets = example(name)
    files = render_config_files(cl, sets)
    files["sshd_config"] = render_sshd_config(cl)
    if runs_slurmdbd(cl):
        files["slurmdbd.conf"] = render_slurmdbd_conf(cl)
    return files


def rendered_objects(name: str) -> Dict[str, str]:
    return {manifest_file_name(obj): yaml.safe_dump(obj, sort_keys=True, width=100)
            for obj in render_cluster(*example(name)).objects}


def matches_golden(text: str, path: Path) -> bool:
    if os.environ.get("SLURMKUBE_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), "no golden file %s; set SLURMKUBE_UPDATE_GOLDEN=1 and review it" % path
    return text == path.read_text()


@pytest.mark.parametrize(("name", "fname"), [(n, f) for n in EXAMPLES for f in sorted(rendered_files(n))])
def test_rendered_file_matches_golden(name, fname):
    assert matches_golden(rendered_files(name)[fname], GOLDEN / name / fname)


@pytest.mark.parametrize(("name", "fname"), [(n, f) for n in EXAMPLES for f in sorted(rendered_objects(n))])
def test_rendered_object_matches_golden(name, fname):
    assert matches_golden(rendered_objects(name)[fname], GOLDEN / name / OBJECTS / fname)


@pytest.mark.parametrize("name", EXAMPLES)
def test_no_golden_file_is_orphaned(name):
    assert {p.name for p in (GOLDEN / name).iterdir() if p.is_file()} == set(rendered_files(name))
    assert {p.name for p in (GOLDEN / name / OBJECTS).iterdir()} == set(rendered_objects(name))
