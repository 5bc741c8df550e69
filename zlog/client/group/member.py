"""What a group member is to the Consumer, whichever protocol it speaks: its states, the work
it hands the application, its requests in flight.

Both members (`server_side_member.py`, GroupHeartbeat; `classic_member.py`, JoinGroup and
SyncGroup) are pure state with time as an argument; `GroupMember` is what the heartbeat thread
and the poll thread (`membership.py`) ask of either, and `Reconciliation` what the poll thread
does to the application's partitions when a member hands it out.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from zlog.errors import ZlogError
from zlog.transport.messages.groups import GroupRequest, GroupResponse
from zlog.types import TopicPartition


class MemberState(enum.Enum):
    UNSUBSCRIBED = "unsubscribed"
    """Not in the group: nothing subscribed yet, or left."""
    JOINING = "joining"
    """Epoch 0 to send (first join, or rejoin after fencing)."""
    STABLE = "stable"
    """Joined; heartbeats on the interval."""
    DROPPING = "dropping"
    """Fenced, self-fenced or out of its poll interval: waits for the application to drop
    every partition before it rejoins."""
    STALE = "stale"
    """Left because the application stopped polling; rejoins at its next poll."""
    FAILED = "failed"
    """A fatal error (a bad request, the group of another protocol): raised to the caller."""


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """What the application must do to its partitions, in this order.

    `lost` first (no commit: they may belong to another member already), then `revoke`
    (commit their positions, then `on_revoke`), then `assign` (fetch their committed
    offsets, then `on_assign`). Then it calls the member's `reconciled`.
    """

    lost: frozenset[TopicPartition] = frozenset()
    revoke: frozenset[TopicPartition] = frozenset()
    assign: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True)
class SentRequest:
    """A request on its way: `seq` matches its reply to it (a reply to a request sent
    before a fence or a leave must not move the member)."""

    seq: int
    request: GroupRequest
    timeout_ms: int | None = None
    """How long its reply may take; None: the client's request_timeout_ms. A classic JoinGroup
    waits at the coordinator until the whole group has rejoined."""


class RequestSlot:
    """One request in flight at a time, its reply matched by `seq`: a reply to a request sent
    before the member moved on (a fence, a leave, a rejoin) must not move it."""

    def __init__(self) -> None:
        self._seq = 0
        self.in_flight: int | None = None

    def send(self, request: GroupRequest, timeout_ms: int | None = None) -> SentRequest:
        self._seq += 1
        self.in_flight = self._seq
        return SentRequest(self._seq, request, timeout_ms)

    def answered(self, sent: SentRequest) -> bool:
        """True if `sent` is the request in flight, which is then no longer."""
        if sent.seq != self.in_flight:
            return False
        self.in_flight = None
        return True


class GroupMember(Protocol):
    """What the heartbeat thread and the poll thread (`GroupMembership`) ask of a member,
    whichever protocol it speaks: `ServerSideMember`, or `ClassicMember` (classic_member.py)."""

    group_id: str
    group_instance_id: str | None
    retry_backoff_ms: int
    failure: ZlogError | None
    needs_coordinator: bool
    topics: frozenset[str]

    @property
    def state(self) -> MemberState: ...
    def subscribe(self, topics: Iterable[str], now_ms: int) -> None: ...
    def take_reconciliation(self) -> Reconciliation | None: ...
    def reconciliation_due(self) -> bool:
        """Whether `take_reconciliation` would hand out work now (it hands out nothing)."""
    def reconciled(self, work: Reconciliation, now_ms: int) -> None: ...
    def polled(self, now_ms: int) -> None: ...
    def leave(self) -> GroupRequest | None: ...
    def commit_identity(self) -> tuple[int, str, str | None]:
        """(generation or member epoch, member id, instance id) for an OffsetCommit."""
    def due_ms(self) -> int | None: ...
    def check_timers(self, now_ms: int, last_poll_ms: int, max_poll_interval_ms: int,
                     ) -> GroupRequest | None: ...
    def next_heartbeat(self, now_ms: int) -> SentRequest | None: ...
    def on_response(self, sent: SentRequest, response: GroupResponse, now_ms: int) -> None: ...
    def on_failure(self, sent: SentRequest, error: ZlogError, now_ms: int) -> None: ...
    def coordinator_found(self) -> None: ...
    def assignment_topics(self) -> frozenset[str] | None:
        """Topics whose partition counts the member needs before it can go on (a classic
        leader about to assign); None: nothing needed."""
    def assign(self, partition_counts: dict[str, int], now_ms: int) -> None: ...
    def watched_topics(self) -> frozenset[str] | None:
        """Topics whose partition counts the member watches (a classic leader: those of the
        group's subscription it assigned from); None: none."""
    def metadata_seen(self, partition_counts: dict[str, int], now_ms: int) -> None:
        """Fresh partition counts of every existing topic (metadata_watch.py)."""


class Reconciling:
    """Hands out the work `_due_work` names, one piece at a time: none while the application
    does the last one (until `reconciled`). A member's protocol says what is due."""

    _reconciling: bool

    def take_reconciliation(self) -> Reconciliation | None:
        """The work the application has to do now, once (None: nothing; its owned
        partitions match the target). Each one taken is answered by `reconciled`."""
        work = self._due_work()
        self._reconciling = self._reconciling or work is not None
        return work

    def reconciliation_due(self) -> bool:
        return self._due_work() is not None

    def _due_work(self) -> Reconciliation | None:
        raise NotImplementedError
