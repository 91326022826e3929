"""localkube's `down` reads the task IDs from containerd's state dir, where a task being made
or deleted right then is a ".<id>" dir that may vanish while it is read (CI, issue 18: `find`
failed on one, and with it `down`). Those are not tasks: lk_task_ids lists only the others."""

from __future__ import annotations

import subprocess
from pathlib import Path

from collection_path import REPO

TEARDOWN = REPO / "tools/localkube/teardown.sh"


def task_ids(run_dir: Path) -> subprocess.CompletedProcess:
    """lk_task_ids, sourced from teardown.sh, for a localkube whose state dir is run_dir."""
    return subprocess.run(["bash", "-euo", "pipefail", "-c", f'. "{TEARDOWN}"; lk_task_ids'],
                          env={"LK_RUN": str(run_dir), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                          timeout=30, check=False)  # fmt: skip


def test_task_ids_are_the_task_dirs_without_the_hidden_ones_in_the_making(tmp_path: Path):
    tasks = tmp_path / "containerd/state/io.containerd.runtime.v2.task/k8s.io"
    for name in ("a7dbe45b", "c0ffee01", ".a7dbe45b"):
        (tasks / name).mkdir(parents=True)
    (tasks / "not-a-dir").write_text("")
    out = task_ids(tmp_path)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == ["a7dbe45b", "c0ffee01"]


def test_no_task_dir_is_no_task(tmp_path: Path):
    out = task_ids(tmp_path)
    assert out.returncode == 0 and out.stdout == "", out.stderr
