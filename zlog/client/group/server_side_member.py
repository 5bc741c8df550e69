"""One member of a server-side consumer group (GroupHeartbeat), as pure state.

The coordinator does all the assigning (docs/groups.md §7); what is left to a member is what
this class decides, with no sockets, threads or clocks (time is always `now_ms`, as in the
coordinator's core):

* what the next heartbeat carries: a join (epoch 0) and the first heartbeat after a failure
  are *full* (subscribed topics, rebalance timeout, owned partitions); otherwise a field is
  sent only when it changed since the coordinator last acknowledged it;
* when it is due: a heartbeat of a member with nothing to reconcile is a long poll (it asks
  the coordinator to hold it up to the heartbeat interval, and the coordinator answers it as
  soon as it has news), so the next one leaves as soon as the answer arrives, or the interval
  after the last one left if the coordinator did not hold it; while the application
  reconciles, the interval from the last reply; at once after the application finished a
  reconciliation (so the coordinator hands out the next partitions without waiting an
  interval); `retry_backoff_ms` after a failure;
* how a reply moves the member: a new assignment is a target the application reconciles
  toward, **revoking first** (commit, `on_revoke`) and only then assigning; FENCED_MEMBER_EPOCH
  and UNKNOWN_MEMBER_ID mean the partitions are *lost* (dropped without a commit, since
  another member may own them already) and the member rejoins with epoch 0 under the same id
  once the application has dropped them;
* self-fencing: a member that heard nothing good from its coordinator for a session timeout
  has been fenced there, so it drops its partitions and rejoins rather than consume
  partitions that may already belong to someone else;
* `max_poll_interval_ms` (KIP-62): a member whose application stopped polling leaves the
  group (epoch -1, or -2 for a static member, whose partitions then wait for it) and rejoins
  at its next poll.

The Consumer drives it from two threads under one lock: a background thread sends the
heartbeats, and the poll thread takes each `Reconciliation` and reports `reconciled()`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from zlog.client.group.member import (
    MemberState,
    Reconciliation,
    Reconciling,
    RequestSlot,
    SentRequest,
)
from zlog.client.retries import Next, after_coordinator_error
from zlog.errors import ErrorCode, ZlogError, for_code
from zlog.transport.messages.groups import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    GroupHeartbeatRequestV0,
    GroupHeartbeatResponseV0,
    GroupResponse,
)
from zlog.types import TopicPartition

HEARTBEAT_INTERVAL_MS_DEFAULT: Final = 1_000
"""Until the coordinator's first reply names its `group.consumer.heartbeat.interval.ms`."""

FENCING_CODES: Final = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
"""The coordinator no longer counts this member as holding its partitions: drop, rejoin."""

RETRY_SAME_CODES: Final = frozenset({ErrorCode.UNRELEASED_INSTANCE_ID})
"""Asked of the same coordinator again after a backoff although Kafka does not call it
retriable: the old holder of this static instance id has not left yet."""


class ServerSideMember(Reconciling):
    """The member's side of GroupHeartbeat; see the module docstring."""

    def __init__(self, group_id: str, member_id: str, *, rebalance_timeout_ms: int,
                 session_timeout_ms: int, group_instance_id: str | None = None,
                 client_id: str = "", retry_backoff_ms: int = 100) -> None:
        if not group_id:
            raise ZlogError(ErrorCode.INVALID_GROUP_ID, "group_id must not be empty")
        if rebalance_timeout_ms <= 0 or session_timeout_ms <= 0:
            raise ZlogError(ErrorCode.INVALID_CONFIG,
                            "max_poll_interval_ms and session_timeout_ms must be positive")
        self.group_id = group_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        """Replaced by the coordinator's in each reply: the silence after which it fences."""
        self.retry_backoff_ms = retry_backoff_ms
        self.heartbeat_interval_ms = HEARTBEAT_INTERVAL_MS_DEFAULT
        self.topics: frozenset[str] = frozenset()
        self.owned: frozenset[TopicPartition] = frozenset()
        """What the application holds (its positions, its fetches)."""
        self.failure: ZlogError | None = None
        self.needs_coordinator = True
        """Set until a coordinator is known and after it moved: find it before sending."""
        self._slot = RequestSlot()
        # What one stay in the group knows; _reset sets it.
        self.state: MemberState
        self.member_epoch: int
        self.target: frozenset[TopicPartition]
        """The coordinator's last assignment to this member."""
        self._due_ms: int | None
        self._full: bool
        self._acked_topics: frozenset[str] | None
        self._acked_owned: frozenset[TopicPartition] | None
        self._heard_ms: int | None  # the last good reply
        self._sent_ms = 0  # when the last heartbeat left
        self._reset(MemberState.UNSUBSCRIBED)
        self._lost: frozenset[TopicPartition] = frozenset()
        self._reconciling = False

    # -- the application's side ------------------------------------------------------------

    def subscribe(self, topics: Iterable[str], now_ms: int) -> None:
        """Join (or change the subscription): the next heartbeat is due at once."""
        wanted = frozenset(topics)
        if not wanted:
            raise ZlogError(ErrorCode.INVALID_REQUEST, "subscribe to at least one topic")
        self.topics = wanted
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.STALE):
            self._start_join(now_ms)
        elif self.state is not MemberState.DROPPING:
            self._due_ms = now_ms

    def _due_work(self) -> Reconciliation | None:
        if self._reconciling:
            return None
        if self.state is MemberState.DROPPING or self._lost:
            lost = self._lost | self.owned
            if not lost and self.state is not MemberState.DROPPING:
                return None
            return Reconciliation(lost=lost)
        if self.state is not MemberState.STABLE or self.owned == self.target:
            return None
        return Reconciliation(revoke=self.owned - self.target, assign=self.target - self.owned)

    def owned_after(self, work: Reconciliation) -> frozenset[TopicPartition]:
        return (self.owned - work.lost - work.revoke) | work.assign

    def reconciled(self, work: Reconciliation, now_ms: int) -> None:
        """The application did `work`: tell the coordinator at once (a revocation frees
        partitions other members wait for). A revocation reported after a fence (its commit
        is answered on another thread) leaves the kept partitions to drop before the rejoin;
        the revoked ones are gone already."""
        self._reconciling = False
        self.owned = self.owned_after(work)
        self._lost = frozenset() if work.lost else self._lost - work.revoke
        if self.state is MemberState.DROPPING and not self._lost:
            self._start_join(now_ms)
        elif self.state is MemberState.STABLE:
            self._due_ms = now_ms

    def polled(self, now_ms: int) -> None:
        """The application polled: a member that left for being slow rejoins."""
        if self.state is MemberState.STALE and self.topics and not self._lost:
            self._start_join(now_ms)

    def leave(self) -> GroupHeartbeatRequestV0 | None:
        """The request that leaves the group (epoch -1; -2 keeps a static member's partitions
        for its return), or None when not in it. The member is out from now on."""
        was_in = self.state in (MemberState.STABLE, MemberState.JOINING, MemberState.DROPPING)
        request = self._leave_request() if was_in else None
        self._reset(MemberState.UNSUBSCRIBED)
        self.topics = frozenset()
        return request

    # -- the heartbeat thread's side -------------------------------------------------------

    def due_ms(self) -> int | None:
        """When the next heartbeat should leave (None: nothing to send now)."""
        if self._slot.in_flight is not None:
            return None
        return self._due_ms

    def check_timers(self, now_ms: int, last_poll_ms: int, max_poll_interval_ms: int,
                     ) -> GroupHeartbeatRequestV0 | None:
        """Self-fence after a session without a good reply; leave when the application has
        not polled within max_poll_interval_ms (the leave request to send, if any)."""
        if self.state is MemberState.STABLE and self._heard_ms is not None \
                and now_ms - self._heard_ms >= self.session_timeout_ms:
            self._fence()
            return None
        if self.state in (MemberState.STABLE, MemberState.JOINING) \
                and now_ms - last_poll_ms > max_poll_interval_ms:
            request = self._leave_request() if self.state is MemberState.STABLE else None
            self._lost = self._lost | self.owned
            self._reset(MemberState.STALE)
            return request
        return None

    def next_heartbeat(self, now_ms: int) -> SentRequest | None:
        """The heartbeat to send now, if one is due; it is then in flight until its reply."""
        due_ms = self.due_ms()
        if due_ms is None or now_ms < due_ms or self.state not in (
                MemberState.JOINING, MemberState.STABLE) or self.needs_coordinator:
            return None
        joining = self.state is MemberState.JOINING
        full = joining or self._full
        topics = None if not full and self.topics == self._acked_topics else self.topics
        owned = frozenset() if joining else self.owned
        send_owned = None if not full and owned == self._acked_owned else owned
        # A join is never held (it always has news), but asking says this member long-polls:
        # the coordinator then tells it the configured interval, not a short one.
        idle = not self._reconciling and self.owned == self.target
        request = GroupHeartbeatRequestV0(
            group_id=self.group_id, member_id=self.member_id,
            member_epoch=JOIN_EPOCH if joining else self.member_epoch,
            group_instance_id=self.group_instance_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full else None,
            subscribed_topics=None if topics is None else tuple(sorted(topics)),
            owned=None if send_owned is None else tuple(sorted(send_owned)),
            client_id=self.client_id, max_wait_ms=self.heartbeat_interval_ms if idle else 0)
        self._sent_ms = now_ms
        return self._slot.send(request)

    def on_response(self, sent: SentRequest, response: GroupResponse, now_ms: int) -> None:
        """Apply a reply. Fatal errors are kept in `failure` (raised by the poll thread)."""
        if not self._slot.answered(sent):
            return  # sent before a fence or a leave
        request = sent.request
        if not isinstance(response, GroupHeartbeatResponseV0) \
                or not isinstance(request, GroupHeartbeatRequestV0):
            self._on_error(ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR, "the coordinator "
                                     f"answered a heartbeat with {type(response).__name__}"),
                           now_ms)
            return
        if response.error_code != ErrorCode.NONE:
            self._on_error(for_code(response.error_code, response.message), now_ms)
            return
        self._heard_ms = now_ms
        self._full = False
        if request.subscribed_topics is not None:
            self._acked_topics = frozenset(request.subscribed_topics)
        if request.owned is not None:
            self._acked_owned = frozenset(request.owned)
        if response.member_id:
            self.member_id = response.member_id
        self.member_epoch = response.member_epoch
        if response.heartbeat_interval_ms > 0:
            self.heartbeat_interval_ms = response.heartbeat_interval_ms
        if response.session_timeout_ms > 0:
            self.session_timeout_ms = response.session_timeout_ms
        if self.state is MemberState.JOINING:
            self.state = MemberState.STABLE
        news = response.assignment is not None or response.member_epoch != request.member_epoch
        if response.assignment is not None:
            self.target = frozenset(response.assignment)
        held = request.max_wait_ms > 0 and now_ms - self._sent_ms >= request.max_wait_ms
        self._due_ms = self._next_due_ms(news or held, now_ms)

    def _next_due_ms(self, poll_again: bool, now_ms: int) -> int:
        """After a good reply: at once with something unsent; the interval from now while the
        application has partitions to move (`reconciled` makes it due earlier); otherwise the
        next long poll leaves at once after news or a hold that ran out, and an interval from
        now after a quick answer with no news (a coordinator that does not hold heartbeats
        is not asked again and again)."""
        if self.topics != self._acked_topics or self.owned != self._acked_owned:
            return now_ms
        if self.owned != self.target or not poll_again:
            return now_ms + self.heartbeat_interval_ms
        return now_ms

    def on_failure(self, sent: SentRequest, error: ZlogError, now_ms: int) -> None:
        """The heartbeat got no reply (timeout, lost connection)."""
        if self._slot.answered(sent):
            self._on_error(error, now_ms)

    def coordinator_found(self) -> None:
        self.needs_coordinator = False

    def commit_identity(self) -> tuple[int, str, str | None]:
        return self.member_epoch, self.member_id, self.group_instance_id

    def assignment_topics(self) -> frozenset[str] | None:
        return None  # the coordinator assigns

    def assign(self, partition_counts: dict[str, int], now_ms: int) -> None:
        raise AssertionError("a server-side member never assigns")

    def watched_topics(self) -> frozenset[str] | None:
        return None  # the coordinator watches partition counts (update_metadata)

    def metadata_seen(self, partition_counts: dict[str, int], now_ms: int) -> None:
        return None

    # -- internals ---------------------------------------------------------------------------

    def _on_error(self, error: ZlogError, now_ms: int) -> None:
        """Fenced: lose and rejoin. A coordinator that moved is found again (RELEARN) and
        one that cannot answer yet asked again (RETRY), either way with a full heartbeat after
        a backoff, never failing the member for a retriable error; anything else is fatal."""
        step = Next.RETRY if error.code in RETRY_SAME_CODES else after_coordinator_error(
            error.code)
        if error.code in FENCING_CODES:
            self._fence()
        elif step is Next.FAIL:
            self.failure = error
            self._reset(MemberState.FAILED)
        else:
            self.needs_coordinator = self.needs_coordinator or step is Next.RELEARN
            self._full = True
            self._due_ms = now_ms + self.retry_backoff_ms

    def _fence(self) -> None:
        """Everything owned is lost; rejoin (same id, epoch 0) once the application dropped it."""
        self._lost = self._lost | self.owned
        self._reset(MemberState.DROPPING)

    def _start_join(self, now_ms: int) -> None:
        self._reset(MemberState.JOINING)
        self._due_ms = now_ms

    def _leave_request(self) -> GroupHeartbeatRequestV0:
        epoch = LEAVE_EPOCH if self.group_instance_id is None else STATIC_LEAVE_EPOCH
        return GroupHeartbeatRequestV0(group_id=self.group_id,
                                     member_id=self.member_id, member_epoch=epoch,
                                     group_instance_id=self.group_instance_id,
                                     client_id=self.client_id)

    def _reset(self, state: MemberState) -> None:
        self.state = state
        self.member_epoch = JOIN_EPOCH
        self.target = frozenset()
        self._slot.in_flight = None
        self._due_ms = None
        self._full = True
        self._acked_topics = None
        self._acked_owned = None
        self._heard_ms = None
