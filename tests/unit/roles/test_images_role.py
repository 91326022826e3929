"""Role images, run by a real ansible-playbook in check mode (references worked out, nothing built):
its Slurm series reaches images/build.sh, and one the build does not know is refused."""

from __future__ import annotations

from pathlib import Path

from playbook_runner import run_role


def refs(tmp_path: Path, series: str):
    return run_role(tmp_path, "images", {"images_names": ["controller"], "images_slurm_version": series},
                    "images_refs", "--check")  # fmt: skip


def test_the_slurm_series_reaches_the_build_and_changes_the_images(tmp_path: Path):
    (tmp_path / "default").mkdir()
    (tmp_path / "old").mkdir()
    default_proc, default = refs(tmp_path / "default", "")
    old_proc, old = refs(tmp_path / "old", "24.11")
    assert default is not None, default_proc.stdout[-3000:]
    assert old is not None, old_proc.stdout[-3000:]
    assert default["rootfs"] == old["rootfs"]  # the same trixie root...
    assert default["base"] != old["base"] and default["controller"] != old["controller"]  # ...another Slurm


def test_a_series_the_build_does_not_know_is_refused_naming_it(tmp_path: Path):
    proc, result = refs(tmp_path, "25.11")
    assert result is None
    output = proc.stdout + proc.stderr
    assert "unsupported Slurm series '25.11' (supported: 26.05, 24.11)" in output, output[-3000:]
