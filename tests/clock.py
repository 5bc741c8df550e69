"""The fake side of zlog.clock's seam: time that moves only when a test moves it."""

from __future__ import annotations


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
