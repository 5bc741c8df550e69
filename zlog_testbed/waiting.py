"""Waiting on a condition with a deadline: the only way the tests and the fault harness wait."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    predicate: Callable[[], bool], timeout_s: float = 10.0, interval_s: float = 0.005,
    what: str = "condition",
) -> None:
    """Poll `predicate` until it holds; fail the test with `what` when the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)
