"""Role images, run by a real ansible-playbook in check mode (references worked out, nothing built):
its Slurm series reaches images/build.sh, and one the build does not know is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from playbook_runner import run_role


def refs(tmp_path: Path, series: str):
    return run_role(tmp_path, "images", {"images_names": ["controller"], "images_slurm_version": series},
                    "images_refs", "--check")  # fmt: skip


def test_the_slurm_series_named_reaches_the_build_as_the_default_does(tmp_path: Path):
    (tmp_path / "default").mkdir()
    (tmp_path / "named").mkdir()
    default_proc, default = refs(tmp_path / "default", "")
    named_proc, named = refs(tmp_path / "named", "26.05")
    assert default is not None, default_proc.stdout[-3000:]
    assert named == default, named_proc.stdout[-3000:]


@pytest.mark.parametrize("series", ["25.11", "24.11"])  # 24.11: built until 0.4.0's upgrade test from 0.3.0
def test_a_series_the_build_does_not_know_is_refused_naming_it(tmp_path: Path, series: str):
    proc, result = refs(tmp_path, series)
    assert result is None
    output = proc.stdout + proc.stderr
    assert "unsupported Slurm series '%s' (supported: 26.05)" % series in output, output[-3000:]
