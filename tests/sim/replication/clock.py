"""The simulated clock: one integer the driver advances, read by everything else.

Nothing in the simulation reads real time, so a seed replays exactly. A tick stands for one
millisecond of the configured timeouts (profile.py keeps them small so runs stay short); a
paused broker does not run, but the clock goes on, which is what makes a SIGSTOP dangerous.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SimClock:
    now: int = 0

    def advance(self) -> int:
        self.now += 1
        return self.now
