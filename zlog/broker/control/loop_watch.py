"""Whether the supervisor's loop turns: the controller lives in it, the Raft node does not.

The metadata log's Raft node runs on its own thread, so it goes on heartbeating its followers
while the supervisor's loop, where the controller answers brokers and decides rounds, is
stuck (a disk in uninterruptible I/O under a call it makes). The other voters would then never
elect another controller, and the cluster would wait on one that does nothing. So the loop
notes the time at every turn, and the Raft thread asks, at every tick, whether the last one is
older than `stall_timeout_ms`: if so its node hands leadership off and does not campaign until
the loop turns again (RawNode.set_may_lead), as a Kafka controller runs its own event queue,
never behind a broker's work.

A turn costs one store of a time the loop reads anyway; a read is one subtraction. Both
threads see whole ints (one reference, swapped atomically).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class LoopWatch:
    stall_timeout_ms: int
    turned_ms: int  # monotonic ms of the loop's last turn (or of its start)

    def turned(self, now_ms: int) -> None:
        """The loop's thread, at every turn."""
        self.turned_ms = now_ms

    def stalled(self, now_ms: int) -> bool:
        """Any thread: the loop has not turned for longer than the timeout."""
        return now_ms - self.turned_ms > self.stall_timeout_ms
