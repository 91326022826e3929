"""A run interrupted at tests/run's deadline says which test was running, where it waited and when
each module ran.

tests/run interrupts what still runs at its deadline as ^C would (`timeout --signal=INT`), so that
a hang ends in a report rather than in CI's silent time-out. pytest's own report names only the
innermost frame; the project's conftest names the test and its frames in tests/. Here a pytest
with that conftest runs a test whose fixture hangs, under the same `timeout` call.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
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


def test_an_interrupted_run_names_the_test_and_the_fixture_it_waited_in_and_when_each_module_ran(tmp_path: Path):
    (tmp_path / "test_hangs.py").write_text(HANGING)
    # tests/run's start, 100 s ago: the summary says when each module ran, counted from it.
    env = dict(os.environ, PYTHONPATH=f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               SLURMKUBE_TEST_EPOCH=str(time.time() - 100))
    pytest_cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "conftest", "test_hangs.py"]
    run = subprocess.run(["timeout", "--signal=INT", "--kill-after=30", "5", *pytest_cmd], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert run.returncode == 124, run.stdout + run.stderr
    assert "interrupted in test_hangs.py::test_waits" in run.stderr, run.stderr
    assert f"at {tmp_path / 'test_hangs.py'}:7, stuck" in run.stderr, run.stderr
    assert "1 passed" in run.stdout, run.stdout
    # The interrupted module too, up to its last test that ended.
    spans = re.search(r"when each module ran \(seconds since tests/run began\) =+\n\s*(\d+) to\s+(\d+) test_hangs.py\n",
                      run.stdout)
    assert spans and 100 <= int(spans.group(1)) <= int(spans.group(2)) < 130, run.stdout


def test_the_timeline_lists_long_modules_and_counts_each_stretch_of_short_ones_in_one_row():
    spec = importlib.util.spec_from_file_location("tests_conftest", TESTS / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    spans = {"a.py": [0.0, 1.0], "b.py": [1.0, 3.0], "long.py": [3.0, 300.0], "c.py": [300.0, 302.0],
             "last.py": [302.0, 303.0], "alone_long.py": [303.0, 400.0], "tail.py": [400.0, 401.0]}
    assert conftest.timeline_rows(spans) == [
        (0.0, 3.0, "2 modules of under 10 s each, a.py to b.py"),
        (3.0, 300.0, "long.py"),
        (300.0, 303.0, "2 modules of under 10 s each, c.py to last.py"),
        (303.0, 400.0, "alone_long.py"),
        (400.0, 401.0, "tail.py"),
    ]
