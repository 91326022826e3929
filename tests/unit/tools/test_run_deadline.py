"""A run interrupted at tests/run's deadline says which test was running and where it waited.

tests/run interrupts what still runs at its deadline as ^C would (`timeout --signal=INT`), so that
a hang ends in a report rather than in CI's silent time-out. pytest's own report names only the
innermost frame; the project's conftest names the test and its frames in tests/. Here a pytest
with that conftest runs a test whose fixture hangs, under the same `timeout` call.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from collection_path import REPO

TESTS = REPO / "tests"

HANGING = """import subprocess
import pytest


@pytest.fixture
def stuck():
    subprocess.run(["sleep", "60"], check=False)


def test_first():
    pass


def test_waits(stuck):
    pass
"""


def test_an_interrupted_run_names_the_test_and_the_fixture_it_waited_in(tmp_path: Path):
    (tmp_path / "test_hangs.py").write_text(HANGING)
    env = dict(os.environ, PYTHONPATH=f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    pytest_cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "conftest", "test_hangs.py"]
    run = subprocess.run(["timeout", "--signal=INT", "--kill-after=30", "5", *pytest_cmd], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert run.returncode == 124, run.stdout + run.stderr
    assert "interrupted in test_hangs.py::test_waits" in run.stderr, run.stderr
    assert f"at {tmp_path / 'test_hangs.py'}:7, stuck" in run.stderr, run.stderr
    assert "1 passed" in run.stdout, run.stdout
