"""The clock seam: pure code takes a Clock, so tests can drive time by hand.

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


class ManualClock:
    """A clock that moves only when told to; for tests and simulations."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = start_ms

    def monotonic_ms(self) -> int:
        return self.now_ms

    def wall_ms(self) -> int:
        return self.now_ms

    def advance(self, delta_ms: int) -> None:
        assert delta_ms >= 0, "time does not run backwards"
        self.now_ms += delta_ms
