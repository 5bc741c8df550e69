"""How long a waiter on a shared-memory queue spins before it parks.

A parked reader needs a doorbell and a scheduler wake-up (tens of microseconds on a virtual
machine, more on a busy one); a spinning one sees a message within a few loads. Spinning costs a
core while it lasts, so it is bounded twice:

* adaptively: a waiter spins for a few of its recent waits (an exponential average of how long
  it waited until something came), capped at SPIN_CAP_S, and not at all once its waits are
  longer than the cap (a quiet queue: spinning would only burn the core);
* by the machine: never while the other side needs the only other core. Both sides of a queue
  run at once, so a spin is allowed only with a third core free (usable cores, and the load
  average below them less the two sides).
"""

from __future__ import annotations

import os
import time
from typing import Final

SPIN_CAP_S: Final = 200e-6
SPIN_WAITS: Final = 3  # a window is this many recent waits long
PARK_BACKSTOP_MS: Final = 5
"""The longest a parked side sleeps while it expects a message: what a lost doorbell costs."""
_AVERAGE_WEIGHT: Final = 0.2  # of the newest wait in the average
_MACHINE_CHECK_INTERVAL_S: Final = 1.0


def spin_allowed(usable_cores: int, load_average: float) -> bool:
    """Whether a third core is free beside the two sides of a queue (pure)."""
    return usable_cores >= 3 and load_average <= usable_cores - 2


class SpinWindow:
    """The adaptive window of one waiter (pure: it is told the waits and whether spinning
    is allowed)."""

    def __init__(self, cap_s: float = SPIN_CAP_S, waits: int = SPIN_WAITS) -> None:
        self.cap_s = cap_s
        self.waits = waits
        self.average_wait_s: float | None = None
        self.allowed = False

    def note_wait(self, waited_s: float) -> None:
        """A wait ended after `waited_s` with something to read."""
        if self.average_wait_s is None:
            self.average_wait_s = waited_s
        else:
            self.average_wait_s += _AVERAGE_WEIGHT * (waited_s - self.average_wait_s)

    def window_s(self) -> float:
        """How long to spin now: 0 when not allowed, unknown, or waits are long."""
        average = self.average_wait_s
        if not self.allowed or average is None or average > self.cap_s:
            return 0.0
        return min(self.cap_s, self.waits * average)


class MachineSpinCheck:
    """`spin_allowed` for this machine, looked at once a second (a load average moves slowly)."""

    def __init__(self) -> None:
        self._next_check_s = 0.0
        self._allowed = False

    def allowed(self) -> bool:
        now_s = time.monotonic()
        if now_s >= self._next_check_s:
            self._next_check_s = now_s + _MACHINE_CHECK_INTERVAL_S
            self._allowed = spin_allowed(len(os.sched_getaffinity(0)), os.getloadavg()[0])
        return self._allowed
