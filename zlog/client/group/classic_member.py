"""One member of a classic consumer group (JoinGroup, SyncGroup, Heartbeat), as pure state.

In the classic protocol the coordinator only counts members and generations; the members do
the rest (docs/groups.md §4, §11). What one member decides, with no sockets, threads or clocks
(time is always `now_ms`):

* joining: a first JoinGroup with no member id is answered MEMBER_ID_REQUIRED with an id
  (KIP-394), and the member joins again with it at once. A static member (`group.instance.id`)
  joins with its instance id and no member id, and a restart within its session takes its old
  place and partitions without a rebalance (KIP-345);
* syncing: the leader decodes every member's subscription and runs the chosen assignor
  (zlog.groups.assignors) over the partition counts its caller looked up; followers send no
  assignments. A leader told `skip_assignment` (a static leader that came back, KIP-814) acts
  as a follower: the coordinator still holds the assignments;
* heartbeats every `heartbeat_interval_ms` while in the group. REBALANCE_IN_PROGRESS means
  rejoin; ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID mean another generation goes on without
  this member, so its partitions are *lost* (dropped without a commit: someone else may own
  them already) before it rejoins (under no member id after UNKNOWN_MEMBER_ID);
  FENCED_INSTANCE_ID means another process took this instance id: fatal;
* eager or cooperative: with an eager assignor (range, roundrobin, sticky) in the list, the
  member revokes every partition before it rejoins, so no two members of two generations read
  one partition. With only cooperative assignors (KIP-429) it rejoins holding its partitions,
  reports them in its subscription, keeps reading them, and after the sync revokes only those
  that moved, then rejoins at once so a second rebalance hands them to their new owner;
* self-fencing: no good reply for a session timeout means the coordinator has expired this
  member: lose everything and rejoin;
* `max_poll_interval_ms` (KIP-62): a member whose application stopped polling loses its
  partitions and rejoins at its next poll; a dynamic one leaves the group at once so the others
  need not wait for its session, a static one just goes quiet (its session decides).

The Consumer drives it exactly as the server-side member: `GroupMembership` runs its requests
from the background thread, the poll thread does each `Reconciliation`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
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
from zlog.groups.assignors import ASSIGNORS, assign_classic_group
from zlog.groups.classic.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_subscription,
)
from zlog.transport.messages.groups import (
    GroupRequest,
    GroupResponse,
    HeartbeatRequestV0,
    HeartbeatResponseV0,
    JoinGroupMember,
    JoinGroupProtocol,
    JoinGroupRequestV0,
    JoinGroupResponseV0,
    LeaveGroupRequestV0,
    LeavingMember,
    MemberAssignment,
    SyncGroupRequestV0,
    SyncGroupResponseV0,
)
from zlog.types import NO_GENERATION, TopicPartition

COOPERATIVE_ASSIGNORS: Final = frozenset({"cooperative-sticky"})
"""Assignors that never hand out a partition another member still claims (KIP-429)."""

PARKED_REPLY_EXTRA_MS: Final = 5_000
"""A JoinGroup or SyncGroup waits at the coordinator up to the rebalance timeout; its reply may
take that long plus this (Kafka's margin)."""

RETRY_SAME_CODES: Final = frozenset({ErrorCode.REBALANCE_IN_PROGRESS})
"""Asked of the same coordinator again after a backoff although Kafka does not call it
retriable: the join or sync of a rebalance that started meanwhile goes again."""
LOST_CODES: Final = frozenset({ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID})
"""A generation goes on without this member: its partitions are lost, it rejoins."""


class Phase(enum.Enum):
    IDLE = "idle"
    """Not in the group: nothing subscribed yet, or left."""
    REVOKING = "revoking"
    """Eager: the application revokes every partition before the JoinGroup goes."""
    JOIN = "join"
    """A JoinGroup to send, or in flight."""
    ASSIGN = "assign"
    """The leader waits for the partition counts of the subscribed topics."""
    SYNC = "sync"
    """A SyncGroup to send, or in flight."""
    STABLE = "stable"
    """In the current generation; heartbeats on the interval."""
    DROPPING = "dropping"
    """Lost its partitions (fenced, self-fenced): rejoins once the application dropped them."""
    STALE = "stale"
    """Out for not polling in time: rejoins at the next poll."""
    FAILED = "failed"
    """A fatal error, raised to the caller."""


_STATES: Final = {
    Phase.IDLE: MemberState.UNSUBSCRIBED, Phase.REVOKING: MemberState.JOINING,
    Phase.JOIN: MemberState.JOINING, Phase.ASSIGN: MemberState.JOINING,
    Phase.SYNC: MemberState.JOINING, Phase.STABLE: MemberState.STABLE,
    Phase.DROPPING: MemberState.DROPPING, Phase.STALE: MemberState.STALE,
    Phase.FAILED: MemberState.FAILED,
}


def check_assignors(names: Sequence[str]) -> tuple[str, ...]:
    """The assignor names in order of preference, or INVALID_CONFIG naming the bad one."""
    if not names:
        raise ZlogError(ErrorCode.INVALID_CONFIG,
                        "partition_assignment_strategy must name at least one assignor")
    for name in names:
        if name not in ASSIGNORS:
            raise ZlogError(ErrorCode.INVALID_CONFIG, f"partition_assignment_strategy: no "
                            f"assignor named {name!r}; known: {sorted(ASSIGNORS)}")
    if len(set(names)) != len(names):
        raise ZlogError(ErrorCode.INVALID_CONFIG,
                        f"partition_assignment_strategy names an assignor twice: {list(names)}")
    return tuple(names)


class ClassicMember(Reconciling):
    """The member's side of the classic protocol; see the module docstring."""

    def __init__(self, group_id: str, *, assignors: Sequence[str], session_timeout_ms: int,
                 rebalance_timeout_ms: int, heartbeat_interval_ms: int,
                 group_instance_id: str | None = None, client_id: str = "",
                 retry_backoff_ms: int = 100) -> None:
        if not group_id:
            raise ZlogError(ErrorCode.INVALID_GROUP_ID, "group_id must not be empty")
        if not 0 < heartbeat_interval_ms < session_timeout_ms or rebalance_timeout_ms <= 0:
            raise ZlogError(ErrorCode.INVALID_CONFIG, "heartbeat_interval_ms must be positive "
                            "and below session_timeout_ms, max_poll_interval_ms positive")
        self.group_id = group_id
        self.assignors = check_assignors(assignors)
        self.cooperative = all(name in COOPERATIVE_ASSIGNORS for name in self.assignors)
        """Kafka's rule: the rebalance is cooperative only if every assignor listed is."""
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.retry_backoff_ms = retry_backoff_ms
        self.member_id = ""
        self.generation = NO_GENERATION
        self.protocol_name: str | None = None
        self.topics: frozenset[str] = frozenset()
        self.owned: frozenset[TopicPartition] = frozenset()
        """What the application holds (its positions, its fetches)."""
        self.target: frozenset[TopicPartition] = frozenset()
        """The assignment of the last sync."""
        self.failure: ZlogError | None = None
        self.needs_coordinator = True
        self.phase = Phase.IDLE
        self._slot = RequestSlot()
        self._due_ms: int | None = None
        self._heard_ms: int | None = None  # the last good reply while in the group
        self._members: tuple[JoinGroupMember, ...] = ()  # the leader's, from the join reply
        self._assignments: tuple[MemberAssignment, ...] = ()
        self._assigned_counts: dict[str, int] | None = None
        """The leader's: the partition count (0: no such topic) of each topic of the group's
        subscription, as it assigned them; a change to them calls for a rebalance."""
        self._lost: frozenset[TopicPartition] = frozenset()
        self._reconciling = False

    @property
    def state(self) -> MemberState:
        return _STATES[self.phase]

    @property
    def is_leader(self) -> bool:
        return bool(self._members)

    # -- the application's side ------------------------------------------------------------

    def subscribe(self, topics: Iterable[str], now_ms: int) -> None:
        """Join, or rejoin with the new subscription (the coordinator rebalances)."""
        wanted = frozenset(topics)
        if not wanted:
            raise ZlogError(ErrorCode.INVALID_REQUEST, "subscribe to at least one topic")
        changed = wanted != self.topics
        self.topics = wanted
        in_group = self.phase in (Phase.STABLE, Phase.ASSIGN, Phase.SYNC)
        if self.phase in (Phase.IDLE, Phase.STALE) or (changed and in_group):
            self._rejoin(now_ms)

    def _due_work(self) -> Reconciliation | None:
        if self._reconciling:
            return None
        work: Reconciliation | None = None
        if self.phase is Phase.DROPPING or self._lost:
            lost = self._lost | self.owned
            if lost or self.phase is Phase.DROPPING:
                work = Reconciliation(lost=lost)
        elif self.phase is Phase.REVOKING:
            work = Reconciliation(revoke=self.owned)
        elif self.phase is Phase.STABLE and self.owned != self.target:
            work = Reconciliation(revoke=self.owned - self.target,
                                  assign=self.target - self.owned)
        return work

    def reconciled(self, work: Reconciliation, now_ms: int) -> None:
        """The application did `work`. A member that revoked before joining joins now; a
        cooperative member that gave partitions away rejoins, so they get placed."""
        self._reconciling = False
        self.owned = (self.owned - work.lost - work.revoke) | work.assign
        if work.lost:
            self._lost = frozenset()
        dropped_all = self.phase in (Phase.DROPPING, Phase.REVOKING) and not self.owned
        gave_away = self.phase is Phase.STABLE and bool(work.revoke) and self.cooperative
        if dropped_all or gave_away:
            self._start_join(now_ms)

    def polled(self, now_ms: int) -> None:
        """The application polled: a member out for being slow rejoins."""
        if self.phase is Phase.STALE and self.topics and not self._lost:
            self._start_join(now_ms)

    def leave(self) -> GroupRequest | None:
        """The request that leaves the group, or None: not in it, or static (its place waits
        for its return until its session runs out). The member is out from now on."""
        request = self._leave_request()
        self._set_phase(Phase.IDLE)
        self.topics = frozenset()
        self.member_id, self.generation = "", NO_GENERATION
        return request

    def commit_identity(self) -> tuple[int, str, str | None]:
        return self.generation, self.member_id, self.group_instance_id

    # -- the heartbeat thread's side -------------------------------------------------------

    def due_ms(self) -> int | None:
        return None if self._slot.in_flight is not None else self._due_ms

    def check_timers(self, now_ms: int, last_poll_ms: int, max_poll_interval_ms: int,
                     ) -> GroupRequest | None:
        """Self-fence after a session without a good reply; go out when the application has
        not polled within max_poll_interval_ms (the LeaveGroup to send, if any)."""
        if self.phase in (Phase.STABLE, Phase.REVOKING) and self._heard_ms is not None \
                and now_ms - self._heard_ms >= self.session_timeout_ms:
            self._lose(reset_member_id=False)
            return None
        if self.phase in (Phase.STABLE, Phase.REVOKING, Phase.JOIN, Phase.ASSIGN, Phase.SYNC) \
                and now_ms - last_poll_ms > max_poll_interval_ms:
            request = self._leave_request()
            self._lost = self._lost | self.owned
            self.member_id, self.generation = "", NO_GENERATION
            self._set_phase(Phase.STALE)
            return request
        return None

    def next_heartbeat(self, now_ms: int) -> SentRequest | None:
        """The request to send now (JoinGroup, SyncGroup or Heartbeat), if one is due."""
        due_ms = self.due_ms()
        if due_ms is None or now_ms < due_ms or self.needs_coordinator:
            return None
        parked_ms = self.rebalance_timeout_ms + PARKED_REPLY_EXTRA_MS
        request: GroupRequest
        timeout_ms: int | None = None
        if self.phase is Phase.JOIN:
            request, timeout_ms = self._join_request(), parked_ms
        elif self.phase is Phase.SYNC:
            request = SyncGroupRequestV0(
                group_id=self.group_id, generation=self.generation,
                member_id=self.member_id, group_instance_id=self.group_instance_id,
                assignments=self._assignments, protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocol_name=self.protocol_name)
            timeout_ms = parked_ms
        elif self.phase in (Phase.STABLE, Phase.REVOKING):
            request = HeartbeatRequestV0(group_id=self.group_id,
                                       generation=self.generation, member_id=self.member_id,
                                       group_instance_id=self.group_instance_id)
        else:
            return None
        return self._slot.send(request, timeout_ms)

    def on_response(self, sent: SentRequest, response: GroupResponse, now_ms: int) -> None:
        """Apply a reply. Fatal errors are kept in `failure` (raised by the poll thread)."""
        if not self._slot.answered(sent):
            return  # sent before a fence, a leave or a rejoin
        if isinstance(response, JoinGroupResponseV0) and self.phase is Phase.JOIN:
            self._on_join(response, now_ms)
        elif isinstance(response, SyncGroupResponseV0) and self.phase is Phase.SYNC:
            self._on_sync(response, now_ms)
        elif isinstance(response, HeartbeatResponseV0):
            self._on_heartbeat(response, now_ms)
        else:
            self._fail(ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR, f"the coordinator answered "
                                 f"{type(sent.request).__name__} with "
                                 f"{type(response).__name__}"))

    def on_failure(self, sent: SentRequest, error: ZlogError, now_ms: int) -> None:
        """No reply (timeout, lost connection): find the coordinator again and retry; a sync
        that failed restarts the rebalance, since its generation may be gone."""
        if self._slot.answered(sent):
            self._retry(error, now_ms)

    def coordinator_found(self) -> None:
        self.needs_coordinator = False

    def assignment_topics(self) -> frozenset[str] | None:
        """The leader's: every topic some member subscribed to."""
        if self.phase is not Phase.ASSIGN:
            return None
        topics: set[str] = set()
        for member in self._members:
            topics.update(decode_subscription(member.metadata).topics)
        return frozenset(topics)

    def assign(self, partition_counts: dict[str, int], now_ms: int) -> None:
        """Run the chosen assignor over the members' subscriptions; the SyncGroup carries the
        result."""
        if self.phase is not Phase.ASSIGN or self.protocol_name is None:
            return
        topics = self.assignment_topics() or frozenset()
        try:
            assignments = assign_classic_group(
                self.protocol_name, [(m.member_id, m.group_instance_id, m.metadata)
                                     for m in self._members], partition_counts)
        except ZlogError as error:  # a member's subscription this leader cannot read
            self._fail(error)
            return
        self._assigned_counts = _counts_of(topics, partition_counts)
        self._assignments = tuple(MemberAssignment(member, assignment)
                                  for member, assignment in sorted(assignments.items()))
        self._set_phase(Phase.SYNC, now_ms)

    def watched_topics(self) -> frozenset[str] | None:
        """The leader's, once in the generation it assigned: the group's topics."""
        if self.phase is not Phase.STABLE or self._assigned_counts is None:
            return None
        return frozenset(self._assigned_counts)

    def metadata_seen(self, partition_counts: dict[str, int], now_ms: int) -> None:
        """A leader whose group's topics gained partitions, or came or went, since it
        assigned rejoins: the coordinator rebalances the group (a leader's rejoin in Stable)."""
        watched = self.watched_topics()
        if watched is None or self._assigned_counts == _counts_of(watched, partition_counts):
            return
        self._assigned_counts = None
        self._rejoin(now_ms)

    # -- replies ---------------------------------------------------------------------------

    def _on_join(self, response: JoinGroupResponseV0, now_ms: int) -> None:
        code = ErrorCode(response.error_code)
        if code == ErrorCode.NONE:
            self.member_id = response.member_id
            self.generation = response.generation
            self.protocol_name = response.protocol_name
            leads = response.leader_id == self.member_id and not response.skip_assignment
            self._members = response.members if leads else ()
            self._assigned_counts = None
            self._assignments = ()
            self._heard_ms = now_ms
            self._set_phase(Phase.ASSIGN if leads else Phase.SYNC, now_ms)
        elif code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
            self._due_ms = now_ms
        elif code == ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            self._due_ms = now_ms
        else:
            self._retry(for_code(code, f"group {self.group_id!r}: join refused "
                                       f"({code.name.lower()})"), now_ms)

    def _on_sync(self, response: SyncGroupResponseV0, now_ms: int) -> None:
        code = ErrorCode(response.error_code)
        if code != ErrorCode.NONE:
            self._on_member_error(code, "sync refused", now_ms)
            return
        try:
            assigned = decode_assignment(response.assignment).partitions \
                if response.assignment else ()
        except ZlogError as error:
            self._fail(error)
            return
        self.target = frozenset(assigned)
        self._members = ()
        self._heard_ms = now_ms
        self._set_phase(Phase.STABLE, now_ms + self.heartbeat_interval_ms)

    def _on_heartbeat(self, response: HeartbeatResponseV0, now_ms: int) -> None:
        code = ErrorCode(response.error_code)
        if code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS):
            self._heard_ms = now_ms  # either way the coordinator reset the session
            self._due_ms = now_ms + self.heartbeat_interval_ms
            if code == ErrorCode.REBALANCE_IN_PROGRESS and self.phase is Phase.STABLE:
                self._rejoin(now_ms)
            return
        self._on_member_error(code, "heartbeat refused", now_ms)

    def _on_member_error(self, code: ErrorCode, what: str, now_ms: int) -> None:
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self._rejoin(now_ms)
        elif code in LOST_CODES:
            self._lose(reset_member_id=code == ErrorCode.UNKNOWN_MEMBER_ID)
        else:
            self._retry(for_code(code, f"group {self.group_id!r}: {what} "
                                       f"({code.name.lower()})"), now_ms)

    def _retry(self, error: ZlogError, now_ms: int) -> None:
        """Find the coordinator again (it moved), or ask it again (it cannot answer yet),
        after a backoff; a retriable error never fails the member. Anything else is fatal
        (FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT...)."""
        step = Next.RETRY if error.code in RETRY_SAME_CODES else after_coordinator_error(
            error.code)
        if step is Next.FAIL:
            self._fail(error)
            return
        self.needs_coordinator = self.needs_coordinator or step is Next.RELEARN
        if self.phase in (Phase.SYNC, Phase.ASSIGN):
            self._set_phase(Phase.JOIN)
        self._due_ms = now_ms + self.retry_backoff_ms

    # -- internals ---------------------------------------------------------------------------

    def _rejoin(self, now_ms: int) -> None:
        """Eager: revoke everything first (the poll thread), then join; cooperative: join now,
        keeping the partitions."""
        if self.owned and not self.cooperative:
            self._set_phase(Phase.REVOKING, now_ms + self.heartbeat_interval_ms)
        else:
            self._start_join(now_ms)

    def _start_join(self, now_ms: int) -> None:
        self._set_phase(Phase.JOIN, now_ms)

    def _lose(self, *, reset_member_id: bool) -> None:
        """Everything owned is lost; rejoin once the application dropped it."""
        self._lost = self._lost | self.owned
        self.generation = NO_GENERATION
        if reset_member_id:
            self.member_id = ""
        self._set_phase(Phase.DROPPING)

    def _fail(self, error: ZlogError) -> None:
        self.failure = error
        self._set_phase(Phase.FAILED)

    def _set_phase(self, phase: Phase, due_ms: int | None = None) -> None:
        """Move on; a reply to anything sent before is ignored from now on."""
        self.phase = phase
        self._slot.in_flight = None
        self._due_ms = due_ms

    def _join_request(self) -> JoinGroupRequestV0:
        subscription = encode_subscription(Subscription(
            tuple(sorted(self.topics)), owned_partitions=tuple(sorted(self.owned)),
            generation=self.generation))
        return JoinGroupRequestV0(
            group_id=self.group_id, member_id=self.member_id,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocols=tuple(JoinGroupProtocol(name, subscription) for name in self.assignors),
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            group_instance_id=self.group_instance_id, client_id=self.client_id)

    def _leave_request(self) -> LeaveGroupRequestV0 | None:
        """A dynamic member in the group leaves; a static one does not (KIP-345)."""
        if self.group_instance_id is not None or not self.member_id \
                or self.phase in (Phase.IDLE, Phase.STALE, Phase.FAILED):
            return None
        return LeaveGroupRequestV0(group_id=self.group_id,
                                 members=(LeavingMember(self.member_id, None),))


def _counts_of(topics: Iterable[str], partition_counts: dict[str, int]) -> dict[str, int]:
    """Each topic's partition count, 0 for one that does not exist."""
    return {topic: partition_counts.get(topic, 0) for topic in sorted(topics)}
