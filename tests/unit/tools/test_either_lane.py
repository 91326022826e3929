"""A module marked either_lane runs in the first of tests/run's two pytest processes to reach it:
the other skips it before its fixtures are set up (its cluster set-up would cost minutes).

Here two pytest runs with the project's conftest share one claims directory, as tests/run's two
do; a module fixture writes a file when it is set up.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from collection_path import REPO

TESTS = REPO / "tests"

MODULE = """import pytest

pytestmark = pytest.mark.either_lane


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with open({setups!r}, "a") as setups:
        setups.write("set up\\n")


def test_one(cluster):
    pass


def test_two(cluster):
    pass
"""


def pytest_run(where: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "conftest", "-rs",
                           "test_either.py"], cwd=where, env=env, capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip


def test_the_first_process_runs_an_either_lane_module_and_the_second_skips_it_unset_up(tmp_path: Path):
    setups = tmp_path / "setups"
    (tmp_path / "test_either.py").write_text(MODULE.format(setups=str(setups)))
    claims = tmp_path / "claims"
    claims.mkdir()
    env = dict(os.environ, PYTHONPATH=f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               SLURMKUBE_TEST_CLAIMS=str(claims))
    first = pytest_run(tmp_path, env)
    assert first.returncode == 0 and "2 passed" in first.stdout, first.stdout
    second = pytest_run(tmp_path, env)
    assert second.returncode == 0 and "2 skipped" in second.stdout, second.stdout
    assert "run by tests/run's other pytest" in second.stdout
    assert setups.read_text() == "set up\n"
    # Run by hand (no claims): every module runs, claimed or not.
    del env["SLURMKUBE_TEST_CLAIMS"]
    alone = pytest_run(tmp_path, env)
    assert alone.returncode == 0 and "2 passed" in alone.stdout, alone.stdout
    assert setups.read_text() == "set up\nset up\n"
