"""Shared test setup: the collection is importable by its FQCN path, the node programs by their names."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The programs that run on the nodes (images/node) are plain scripts, not collection code.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "images" / "node"))

from collection_path import ensure_importable

ensure_importable()


# Seconds spent per test module (setup, call and teardown), printed at the end: where the CI
# budget goes, by module, in every CI log (what to split or trim by).
_MODULE_SECONDS: Dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = report.nodeid.split("::", 1)[0]
    _MODULE_SECONDS[module] = _MODULE_SECONDS.get(module, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    slow = sorted(_MODULE_SECONDS.items(), key=lambda item: -item[1])[:15]
    if slow:
        terminalreporter.section("seconds per test module")
        for module, seconds in slow:
            terminalreporter.write_line("%8.1fs %s" % (seconds, module))


# The test running now and the project's root, for the report of an interrupted run.
_RUNNING = {"nodeid": "", "root": ""}


def pytest_configure(config: pytest.Config) -> None:
    _RUNNING["root"] = str(config.rootpath)


def pytest_runtest_logstart(nodeid: str) -> None:
    _RUNNING["nodeid"] = nodeid


def pytest_runtest_logfinish() -> None:
    _RUNNING["nodeid"] = ""


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
