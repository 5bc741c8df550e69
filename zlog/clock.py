"""The clock seam: pure code takes a Clock, so tests can drive time by hand (tests/clock.py).

I/O loops that no test drives by hand (the supervisor, the Raft runner, the RPC client) read
`monotonic_ms()` directly; it is the same clock SystemClock gives.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def monotonic_ms(self) -> int: ...

    def wall_ms(self) -> int: ...


def monotonic_ms() -> int:
    """Milliseconds on the monotonic clock: for durations and deadlines, never timestamps."""
    return time.monotonic_ns() // 1_000_000


class SystemClock:
    """The real clock: monotonic for durations, wall time for record timestamps."""

    def monotonic_ms(self) -> int:
        return monotonic_ms()

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000
