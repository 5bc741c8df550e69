"""What a leader knows about each follower's copy of its path (etcd's Progress, per peer).

```
            success reply                       match >= snapshot height
   PROBE  ----------------->  REPLICATE        SNAPSHOT ------------------> REPLICATE
     ^   <-----------------      |                 ^
     |   rejection, or no        |                 | next_h fell to or below the base
     |   progress in E ticks     |                 |
     +---------------------------+-------- PROBE --+
```

In PROBE the leader sends one Append and waits for its answer (or for the next heartbeat),
because it does not yet know where the follower's chain meets its own. In REPLICATE it
streams Appends optimistically, bounded by the inflight window. In SNAPSHOT it waits for the
follower to acknowledge the snapshot it was sent, resending it after E ticks of silence.
Heights only: a peer's match is always a block on the leader's own path, and the leader
never leaves its path during its term, so a height names the block.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from zlog.raft.messages import NO_DIR_ID


class ProgressState(Enum):
    PROBE = "probe"
    REPLICATE = "replicate"
    SNAPSHOT = "snapshot"


@dataclass(slots=True)
class Progress:
    """One follower as seen by the leader; reset at every election."""

    next_h: int  # height of the next block to send
    match_h: int = 0  # highest height on the leader's path known stored (persisted) there
    state: ProgressState = ProgressState.PROBE
    probe_sent: bool = False  # PROBE: an Append is out; wait for its answer or a heartbeat
    inflight: deque[int] = field(default_factory=deque)  # REPLICATE: last heights of Appends
    snapshot_h: int = 0  # SNAPSHOT: height of the snapshot sent
    recent_active: bool = False  # heard from it since the last check-quorum round
    acked_seq: int = 0  # highest Append seq it echoed in this term (ReadIndex)
    progress_tick: int = 0  # node tick at which match last moved or the state last changed
    dir_id: bytes = NO_DIR_ID  # the data directory it last answered from (docs/raft.md §4.15)

    def become_probe(self, next_h: int, now: int) -> None:
        """Fall back to one-at-a-time Appends starting at `next_h`."""
        assert next_h > self.match_h, "never probe below what is known to match"
        self.state = ProgressState.PROBE
        self.next_h = next_h
        self.probe_sent = False
        self.inflight.clear()
        self.progress_tick = now
        assert not self.inflight

    def become_replicate(self, now: int) -> None:
        """Stream from just above the match: the follower's chain meets ours there."""
        self.state = ProgressState.REPLICATE
        self.next_h = self.match_h + 1
        self.probe_sent = False
        self.inflight.clear()
        self.progress_tick = now
        assert self.next_h == self.match_h + 1
        assert not self.inflight

    def become_snapshot(self, snapshot_h: int, now: int) -> None:
        """Wait for the follower to acknowledge the snapshot at `snapshot_h`."""
        assert snapshot_h >= self.match_h
        self.state = ProgressState.SNAPSHOT
        self.snapshot_h = snapshot_h
        self.next_h = snapshot_h + 1
        self.inflight.clear()
        self.progress_tick = now
        assert self.next_h > self.match_h

    def update_match(self, match_h: int, now: int) -> bool:
        """Record a success reply; True if the match moved forward."""
        assert match_h >= 0
        if match_h <= self.match_h:
            self.next_h = max(self.next_h, self.match_h + 1)
            assert self.next_h > self.match_h
            return False
        self.match_h = match_h
        self.next_h = max(self.next_h, match_h + 1)
        self.progress_tick = now
        while self.inflight and self.inflight[0] <= match_h:
            self.inflight.popleft()
        assert self.next_h > self.match_h
        return True

    def sent(self, last_h: int, window: int) -> None:
        """Record an Append whose last block is at `last_h` (REPLICATE: advance optimistically)."""
        if self.state == ProgressState.REPLICATE:
            assert len(self.inflight) < window, "sent past the inflight window"
            self.inflight.append(last_h)
            self.next_h = last_h + 1
        elif self.state == ProgressState.PROBE:
            self.probe_sent = True
        assert self.next_h > self.match_h

    def paused(self, window: int) -> bool:
        """Whether the leader must not send this peer another Append carrying blocks now."""
        assert window >= 1
        assert len(self.inflight) <= window, "the inflight window is never overrun"
        if self.state == ProgressState.PROBE:
            return self.probe_sent
        if self.state == ProgressState.REPLICATE:
            return len(self.inflight) >= window
        return True
