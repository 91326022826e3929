"""Shared test setup: the collection is importable by its FQCN path, the node programs by their names."""

from __future__ import annotations

import os
import sys
import time
from itertools import groupby
from pathlib import Path
from typing import Dict, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The programs that run on the nodes (images/node) are plain scripts, not collection code.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "images" / "node"))

from collection_path import ensure_importable

ensure_importable()


# Seconds spent per test module (setup, call and teardown), printed at the end: where the CI
# budget goes, by module, in every CI log (what to split or trim by).
_MODULE_SECONDS: Dict[str, float] = {}
# When each module's first test began and its last ended (wall clock): with SLURMKUBE_TEST_EPOCH
# (tests/run's start, set by it) the summary says when each ran, so a CI log shows each lane's
# timeline (what waited for a build, which lane ended last), not only sums.
_MODULE_SPANS: Dict[str, List[float]] = {}
# Consecutive modules shorter than this share a row of the timeline: the unit tier's hundred-odd
# modules pushed the first lane's timeline out of the CI log's tail.
TIMELINE_MIN_SECONDS = 10


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = report.nodeid.split("::", 1)[0]
    _MODULE_SECONDS[module] = _MODULE_SECONDS.get(module, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    slow = sorted(_MODULE_SECONDS.items(), key=lambda item: -item[1])[:15]
    if slow:
        terminalreporter.section("seconds per test module")
        for module, seconds in slow:
            terminalreporter.write_line("%8.1fs %s" % (seconds, module))
    epoch = os.environ.get("SLURMKUBE_TEST_EPOCH")
    if epoch and _MODULE_SPANS:
        terminalreporter.section("when each module ran (seconds since tests/run began)")
        for began, ended, what in timeline_rows(_MODULE_SPANS):
            terminalreporter.write_line("%6.0f to %6.0f %s" % (began - float(epoch), ended - float(epoch), what))


def timeline_rows(spans: Dict[str, List[float]]) -> List[tuple]:
    """(began, ended, what) per module, in the order they ran; consecutive modules of under
    TIMELINE_MIN_SECONDS each share one row that counts them."""
    rows: List[tuple] = []
    for short, group in groupby(spans.items(), key=lambda span: span[1][1] - span[1][0] < TIMELINE_MIN_SECONDS):
        modules = [(began, ended, module) for module, (began, ended) in group]
        if short and len(modules) > 1:
            rows.append((modules[0][0], modules[-1][1], "%d modules of under %d s each, %s to %s"
                         % (len(modules), TIMELINE_MIN_SECONDS, modules[0][2], modules[-1][2])))
        else:
            rows.extend(modules)
    return rows


# Module -> whether this process runs it (either_lane modules under tests/run).
_CLAIMED: Dict[str, bool] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """An either_lane module runs in the tests/run process that reaches it first: it claims the
    module with a file in SLURMKUBE_TEST_CLAIMS (made by tests/run for both), and the other skips
    it before any fixture is set up. Without that variable (pytest run by hand) every module runs."""
    claims = os.environ.get("SLURMKUBE_TEST_CLAIMS")
    if not claims or not item.get_closest_marker("either_lane"):
        return
    module = item.nodeid.split("::", 1)[0]
    if module not in _CLAIMED:
        try:
            os.close(os.open(os.path.join(claims, module.replace("/", "_")), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            _CLAIMED[module] = True
        except FileExistsError:
            _CLAIMED[module] = False
    if not _CLAIMED[module]:
        pytest.skip("run by tests/run's other pytest, which reached this module first")


# The test running now and the project's root, for the report of an interrupted run.
_RUNNING = {"nodeid": "", "root": ""}


def pytest_configure(config: pytest.Config) -> None:
    _RUNNING["root"] = str(config.rootpath)


def pytest_runtest_logstart(nodeid: str) -> None:
    _RUNNING["nodeid"] = nodeid
    now = time.time()
    _MODULE_SPANS.setdefault(nodeid.split("::", 1)[0], [now, now])


def pytest_runtest_logfinish(nodeid: str) -> None:
    _RUNNING["nodeid"] = ""
    _MODULE_SPANS[nodeid.split("::", 1)[0]][1] = time.time()


def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """At tests/run's deadline (a ^C) say where the tests were: pytest's own line names only the
    innermost frame (a selector in the standard library), not the test or fixture waiting in it.
    The frames named are the project's own (under pytest's root, not an installed package)."""
    sys.stderr.write("\ninterrupted in %s\n" % (_RUNNING["nodeid"] or "no test (collecting, or between tests)"))
    root = Path(_RUNNING["root"] or Path(__file__).resolve().parent.parent)
    for entry in excinfo.traceback:
        path = Path(entry.path).resolve()
        if root in path.parents and "site-packages" not in path.parts:
            sys.stderr.write("  at %s:%d, %s\n" % (path, entry.lineno + 1, entry.name))
