"""What one coordinator step produces: replies, records to append, timers to arm or cancel.

The driver's contract for one `Output`: append `records` to the offsets partition in one batch
(all or nothing), release `replies` once those records are committed (below the high
watermark), and arm or cancel `timers`. A fired timer goes back to the coordinator with the
time it fired; one that was cancelled or re-armed meanwhile is ignored, so the driver may keep
stale timers in its heap instead of deleting them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from zlog.groups.records import OffsetsRecord
from zlog.transport.messages.groups import GroupResponse as Response


class TimerKind(Enum):
    SESSION = "session"
    """A classic member's session, or a server-side member's."""
    PENDING_MEMBER = "pending-member"
    """A member id handed out with MEMBER_ID_REQUIRED and not used yet (KIP-394)."""
    NEW_MEMBER_JOIN = "new-member-join"
    """A new member parked in JoinGroup for too long."""
    JOIN = "join"
    """A classic group's rebalance: complete the join with whoever rejoined."""
    SYNC = "sync"
    """A classic group's pending SyncGroups: members that never synced are removed."""
    REBALANCE = "rebalance"
    """A server-side member that does not revoke in time is fenced."""
    HEARTBEAT_HOLD = "heartbeat-hold"
    """A server-side member's held heartbeat is answered, changed or not (a long poll)."""
    OFFSETS_EXPIRY = "offsets-expiry"
    """The periodic retention check of committed offsets."""


class TimerKey(NamedTuple):
    kind: TimerKind
    group_id: str = ""
    member_id: str = ""


@dataclass(frozen=True, slots=True)
class TimerChange:
    key: TimerKey
    deadline_ms: int | None
    """None cancels the timer."""


@dataclass(slots=True)
class Output:
    replies: list[tuple[int, Response]] = field(default_factory=list)
    records: list[OffsetsRecord] = field(default_factory=list)
    timers: list[TimerChange] = field(default_factory=list)


class Effects:
    """The output being built by the current step, and the deadlines the coordinator believes
    are armed (each change is echoed into the output for the driver).

    `answering` is the driver's handle for the request the current step handles: a request
    on the wire carries none, so the driver hands it in beside the request, and a coordinator
    that parks the request (JoinGroup, SyncGroup, a long-polling heartbeat) keeps it to answer
    in the output of a later step."""

    __slots__ = ("answering", "deadlines", "out")

    def __init__(self) -> None:
        self.deadlines: dict[TimerKey, int] = {}
        self.out = Output()
        self.answering = 0

    def reply(self, request_id: int, response: Response) -> None:
        self.out.replies.append((request_id, response))

    def answer(self, response: Response) -> None:
        """Reply to the request the current step handles."""
        self.reply(self.answering, response)

    def write(self, record: OffsetsRecord) -> None:
        self.out.records.append(record)

    def take(self) -> Output:
        """The output of the step that just ended; the next step starts a new one."""
        done, self.out = self.out, Output()
        return done

    def arm(self, key: TimerKey, deadline_ms: int) -> None:
        self.deadlines[key] = deadline_ms
        self.out.timers.append(TimerChange(key, deadline_ms))

    def cancel(self, key: TimerKey) -> None:
        if self.deadlines.pop(key, None) is not None:
            self.out.timers.append(TimerChange(key, None))

    def is_due(self, key: TimerKey, now_ms: int) -> bool:
        deadline = self.deadlines.get(key)
        return deadline is not None and deadline <= now_ms

    def due(self, now_ms: int) -> list[TimerKey]:
        """Every due timer, earliest first (ties in key order, never hash order)."""
        ready = [(d, k.kind.value, k.group_id, k.member_id, k)
                 for k, d in self.deadlines.items() if d <= now_ms]
        return [entry[-1] for entry in sorted(ready, key=lambda e: e[:4])]

    def next_deadline_ms(self) -> int | None:
        return min(self.deadlines.values(), default=None)
