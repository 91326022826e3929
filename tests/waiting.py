"""Waiting for a state in the real-system tests (docker tier, k8s tier): one polling loop."""

from __future__ import annotations

import time
from typing import Callable, Optional


def wait_for(predicate: Callable[[], object], timeout: float = 60, interval: float = 1,
             explain: Optional[Callable[[], str]] = None, what: Optional[str] = None) -> object:
    """The predicate's first true value; on timeout, an error naming WHAT (else the predicate) with
    what `explain` says about the state."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            state = ("\n" + explain()) if explain else ""
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}{state}")
        time.sleep(interval)
