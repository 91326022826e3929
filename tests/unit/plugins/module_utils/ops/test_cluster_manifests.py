"""The cluster_manifests module, run by a real ansible-playbook: idempotence, check and diff mode."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from example_clusters import example_resources
from playbook_runner import run_module as run_ansible_module


def run_module(tmp_path, args, *flags):
    return run_ansible_module(tmp_path, "cluster_manifests", args, *flags)


@pytest.fixture
def args(tmp_path):
    raw = example_resources("cpu-only")
    return {"cluster": raw["cluster"], "node_sets": raw["nodesets"], "dest": str(tmp_path / "out")}


def test_writes_then_is_idempotent(tmp_path, args):
    proc, first = run_module(tmp_path, args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert first["changed"] is True
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert "statefulset-cpu-compute.yaml" in written
    assert "ClusterName=cpu" in first["config_files"]["slurm.conf"]
    second = run_module(tmp_path, args)[1]
    assert second["changed"] is False


def test_check_mode_writes_nothing_and_diff_shows_the_change(tmp_path, args):
    proc, result = run_module(tmp_path, args, "--check", "--diff")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert result["changed"] is True
    assert not (tmp_path / "out").exists()
    assert "+kind: StatefulSet" in proc.stdout


def test_a_changed_replica_count_rewrites_one_file(tmp_path, args):
    run_module(tmp_path, args)
    args["node_sets"][0]["spec"]["replicas"] = 9
    proc, result = run_module(tmp_path, args, "--diff")
    assert result["changed"] is True
    diff_lines = [line.replace(" ", "") for line in proc.stdout.splitlines()]
    assert "-replicas:4" in diff_lines and "+replicas:9" in diff_lines
    data = yaml.safe_load(Path(tmp_path / "out" / "statefulset-cpu-compute.yaml").read_text())
    assert data["spec"]["replicas"] == 9


def test_bad_spec_fails_naming_the_field_before_writing(tmp_path, args):
    args["node_sets"][0]["spec"]["replicas"] = -3
    proc = run_module(tmp_path, args)[0]
    assert proc.returncode != 0
    assert "spec.replicas: must be at least 0, got -3" in proc.stdout
    assert not (tmp_path / "out").exists()
