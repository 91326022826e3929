"""Rendered Slurm config files equal the reviewed golden files.

Regenerate after an intended change with SLURMKUBE_UPDATE_GOLDEN=1, then review the diff.
"""

from __future__ import annotations

import os

import pytest
from examples import EXAMPLES, FIXTURES, example

from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import runs_slurmdbd
from ansible_collections.slurmkube.core.plugins.module_utils.render.accounting import render_slurmdbd_conf
from ansible_collections.slurmkube.core.plugins.module_utils.render.login import render_sshd_config
from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import render_config_files

GOLDEN = FIXTURES / "golden"


def rendered(name):
    cl, sets = example(name)
    files = render_config_files(cl, sets)
    files["sshd_config"] = render_sshd_config(cl)
    if runs_slurmdbd(cl):
        files["slurmdbd.conf"] = render_slurmdbd_conf(cl)
    return files


def golden_cases():
    return [(name, fname) for name in EXAMPLES for fname in sorted(rendered(name))]


@pytest.mark.parametrize(("name", "fname"), golden_cases())
def test_rendered_file_matches_golden(name, fname):
    text = rendered(name)[fname]
    path = GOLDEN / name / fname
    if os.environ.get("SLURMKUBE_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), "no golden file %s; set SLURMKUBE_UPDATE_GOLDEN=1 and review it" % path
    assert text == path.read_text()


@pytest.mark.parametrize("name", EXAMPLES)
def test_no_golden_file_is_orphaned(name):
    expected = set(rendered(name))
    on_disk = {p.name for p in (GOLDEN / name).iterdir()}
    assert on_disk == expected
