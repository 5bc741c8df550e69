"""Server-side assignment (the idea of Kafka 4's KIP-848): members only heartbeat.

A member sends its subscription and the partitions it still holds; the coordinator computes a
sticky target assignment for the whole group whenever the group epoch moves (membership,
subscriptions or partition counts changed), then reconciles one member per heartbeat: a member
first revokes what its target no longer holds, and is given a partition only once no other
member holds it. So at no instant do two members hold one partition, and a member whose
partitions do not move never stops. Member epochs fence stale members (FENCED_MEMBER_EPOCH)
and stale commits (STALE_MEMBER_EPOCH, checked per partition against the epoch each partition
was assigned in, KIP-1251).

A heartbeat that asks for it (`max_wait_ms`) is a long poll: while nothing changes for its
member the coordinator holds the answer, up to the heartbeat interval, and answers it as soon
as another member's heartbeat, leave or expiry moves this member's assignment or epoch. So a
member hears of a rebalance at once instead of at its next heartbeat.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from zlog.errors import ErrorCode
from zlog.groups.assignors import MemberSubscription, range_assign, sticky_assign
from zlog.groups.config import GroupConfig
from zlog.groups.output import Effects, TimerKey, TimerKind
from zlog.groups.server_side.group import ConsumerGroup, ConsumerMember, MemberState
from zlog.transport.messages.groups import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    GroupHeartbeatRequestV0,
    GroupHeartbeatResponseV0,
    OffsetCommitRequestV0,
)
from zlog.types import TopicPartition

TARGET_ASSIGNORS = {"uniform": sticky_assign, "range": range_assign}
UNRELEASED_HEARTBEAT_INTERVAL_MS = 50
"""The interval told to a member waiting for partitions another member is revoking: it takes
them at its next heartbeat after their release, so a join would otherwise wait up to a whole
interval more than the revocation itself (docs/groups.md §7). A member that long-polls
is told the configured interval: its held heartbeat is answered when they are released."""
MEMBER_TIMERS = (TimerKind.SESSION, TimerKind.REBALANCE, TimerKind.HEARTBEAT_HOLD)
HOLDABLE_STATES = frozenset({MemberState.STABLE, MemberState.UNRELEASED})
"""A member in these states that holds exactly what it was given has nothing to report until
the coordinator has news for it; an UNREVOKED member still has to report its revocation."""


@dataclass(frozen=True, slots=True)
class HeldHeartbeat:
    """A heartbeat whose answer waits for news: what its member knew when it was held."""

    request_id: int
    epoch: int
    assigned: frozenset[TopicPartition]


class ConsumerMachine:
    """Transitions of every server-side group of one coordinator."""

    def __init__(self, config: GroupConfig, effects: Effects, rng: random.Random) -> None:
        self.config = config
        self.fx = effects
        self.rng = rng
        self.partition_counts: dict[str, int] = {}
        self.touched: set[str] = set()
        """Members whose records the current operation may have changed (the coordinator
        writes only theirs, and the group's own)."""
        self.held: dict[str, dict[str, HeldHeartbeat]] = {}
        """Group id -> member id -> its held heartbeat (at most one per member)."""
        self.released = 0
        """Partitions freed so far: a heartbeat that frees one may have news for the held."""
        self.deferring_wakes = False
        self.deferred_wakes: set[str] = set()
        """Groups whose held members a heartbeat brought news to while wakes were deferred
        (`GroupCoordinator.defer_wakes`): woken once, by `wake_deferred`."""

    def _error(self, req: GroupHeartbeatRequestV0, code: ErrorCode, message: str) -> None:
        self.fx.answer(GroupHeartbeatResponseV0(code, message, req.member_id,
                                                             req.member_epoch))

    def heartbeat(self, group: ConsumerGroup, req: GroupHeartbeatRequestV0, now_ms: int) -> None:
        """Handle one heartbeat, then answer every held heartbeat it brought news to."""
        sender = group.members.get(req.member_id)
        if sender is not None:  # a newer request of the member: its held one is answered now
            self._answer_held(group, sender, now_ms)
        before = self._news_mark(group)
        self._beat(group, req, now_ms)
        if self._news_mark(group) == before:  # no held member can have news
            return
        if self.deferring_wakes:
            self.deferred_wakes.add(group.group_id)
        else:
            self.wake(group, now_ms)

    def _news_mark(self, group: ConsumerGroup) -> tuple[int, int, int]:
        """What moves when a held member may have news: a new target is due or was computed,
        or a partition was freed."""
        return group.group_epoch, group.assignment_epoch, self.released

    def _beat(self, group: ConsumerGroup, req: GroupHeartbeatRequestV0, now_ms: int) -> None:
        self.touched.add(req.member_id)
        if req.member_epoch == JOIN_EPOCH:
            member = self._join(group, req, now_ms)
            if member is None:
                return
        else:
            found = group.members.get(req.member_id)
            if found is None:
                self._error(req, ErrorCode.UNKNOWN_MEMBER_ID,
                            f"member {req.member_id!r} is not in group {group.group_id!r}")
                return
            member = found
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                self._leave(group, member, req, now_ms)
                return
            fenced = self._fenced(member, req)
            if fenced:
                self._error(req, ErrorCode.FENCED_MEMBER_EPOCH, fenced)
                return
            self._update(group, member, req)
        before = set(member.assigned)
        owned = None if req.owned is None else frozenset(req.owned)
        if req.member_epoch == JOIN_EPOCH:
            member.reported_owned = frozenset()
        elif owned is not None:
            member.reported_owned = owned
        self._refresh_target(group)
        self._reconcile(group, member, owned, now_ms)
        self.fx.arm(TimerKey(TimerKind.SESSION, group.group_id, member.member_id),
                    now_ms + self.config.consumer_session_timeout_ms)
        changed = req.member_epoch == JOIN_EPOCH or set(member.assigned) != before
        if not changed and self._may_hold(member, req):
            self.held.setdefault(group.group_id, {})[member.member_id] = HeldHeartbeat(
                self.fx.answering, member.epoch, frozenset(member.assigned))
            hold_ms = min(req.max_wait_ms, self.config.consumer_heartbeat_interval_ms)
            self.fx.arm(TimerKey(TimerKind.HEARTBEAT_HOLD, group.group_id, member.member_id),
                        now_ms + hold_ms)
            return
        self._reply(member, self.fx.answering, changed, long_poll=req.max_wait_ms > 0)

    @staticmethod
    def _may_hold(member: ConsumerMember, req: GroupHeartbeatRequestV0) -> bool:
        """The member asked to be held and has nothing to do: its epoch is current, it holds
        exactly what it was given, and it revokes nothing."""
        return (req.max_wait_ms > 0 and req.member_epoch == member.epoch
                and member.state in HOLDABLE_STATES
                and member.reported_owned == frozenset(member.assigned))

    def _reply(self, member: ConsumerMember, request_id: int, changed: bool, *,
               long_poll: bool) -> None:
        interval_ms = self.config.consumer_heartbeat_interval_ms
        if member.state is MemberState.UNRELEASED and not long_poll:
            interval_ms = min(interval_ms, UNRELEASED_HEARTBEAT_INTERVAL_MS)
        self.fx.reply(request_id, GroupHeartbeatResponseV0(
            ErrorCode.NONE, "", member.member_id, member.epoch,
            interval_ms, self.config.consumer_session_timeout_ms,
            tuple(sorted(member.assigned)) if changed else None,
        ))

    def wake(self, group: ConsumerGroup, now_ms: int) -> None:
        """Move every member whose heartbeat is held as far as it can go now, as if it had
        just heartbeat owning what it was given, and answer those that have news: a new
        epoch, partitions to revoke, partitions now free for it."""
        held = self.held.get(group.group_id)
        if not held:
            return
        for member_id in sorted(held):
            member = group.members[member_id]
            self._catch_up(group, member, now_ms)
            waiting = held[member_id]
            if member.epoch != waiting.epoch or frozenset(member.assigned) != waiting.assigned:
                self._answer_held(group, member, now_ms)

    def _catch_up(self, group: ConsumerGroup, member: ConsumerMember, now_ms: int) -> None:
        self.touched.add(member.member_id)
        self._refresh_target(group)
        self._reconcile(group, member, None, now_ms)

    def _take_held(self, group_id: str, member_id: str) -> HeldHeartbeat | None:
        held = self.held.get(group_id, {})
        waiting = held.pop(member_id, None)
        if waiting is not None and not held:
            del self.held[group_id]
        return waiting

    def _answer_held(self, group: ConsumerGroup, member: ConsumerMember, now_ms: int) -> None:
        """Answer the member's held heartbeat with what it has now; the member was live all
        the while it was held, so its session starts again."""
        waiting = self._take_held(group.group_id, member.member_id)
        if waiting is None:
            return
        self.fx.cancel(TimerKey(TimerKind.HEARTBEAT_HOLD, group.group_id, member.member_id))
        self.fx.arm(TimerKey(TimerKind.SESSION, group.group_id, member.member_id),
                    now_ms + self.config.consumer_session_timeout_ms)
        self._reply(member, waiting.request_id, frozenset(member.assigned) != waiting.assigned,
                    long_poll=True)

    @staticmethod
    def invalid(req: GroupHeartbeatRequestV0) -> str | None:
        """Why a heartbeat is malformed, checked before anything is looked up."""
        if req.member_epoch < STATIC_LEAVE_EPOCH:
            return f"member epoch {req.member_epoch} is below -2"
        if req.member_epoch == STATIC_LEAVE_EPOCH and req.group_instance_id is None:
            return "only a static member (with a group instance id) may leave with epoch -2"
        if req.member_epoch == JOIN_EPOCH:
            if not req.subscribed_topics:
                return "a join (epoch 0) must name the subscribed topics"
            if req.rebalance_timeout_ms is None or req.rebalance_timeout_ms < 0:
                return "a join (epoch 0) must carry a non-negative rebalance timeout"
            if req.owned:
                return "a join (epoch 0) cannot own partitions"
        return None

    def _join(self, group: ConsumerGroup, req: GroupHeartbeatRequestV0,
              now_ms: int) -> ConsumerMember | None:
        assert req.subscribed_topics is not None and req.rebalance_timeout_ms is not None
        topics = frozenset(req.subscribed_topics)
        instance_id = req.group_instance_id
        member_id = req.member_id or str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        self.touched.add(member_id)
        known = group.members.get(member_id)
        if known is not None and known.epoch == STATIC_LEAVE_EPOCH:
            return self._replace_static(group, known, member_id, req)
        if known is not None and known.group_instance_id == instance_id:
            # A rejoin after fencing (KAFKA-19233): the client dropped everything it held.
            self._release(group, known, set(known.assigned) | set(known.pending_revocation))
            known.epoch = known.previous_epoch = 0
            known.state = MemberState.STABLE
            self._update(group, known, req)
            return known
        holder_id = group.static_members.get(instance_id) if instance_id is not None else None
        if holder_id is not None and holder_id != member_id:
            holder = group.members[holder_id]
            if holder.epoch != STATIC_LEAVE_EPOCH:
                self._error(req, ErrorCode.UNRELEASED_INSTANCE_ID,
                            f"instance {instance_id!r} is still held by member {holder_id!r}")
                return None
            return self._replace_static(group, holder, member_id, req)
        if len(group.members) >= self.config.max_group_size:
            self._error(req, ErrorCode.GROUP_MAX_SIZE_REACHED,
                        f"group {group.group_id!r} has {len(group.members)} members")
            return None
        member = ConsumerMember(member_id, instance_id, topics, req.rebalance_timeout_ms,
                                req.client_id, req.client_host)
        group.members[member_id] = member
        if instance_id is not None:
            group.static_members[instance_id] = member_id
        group.group_epoch += 1
        return member

    def _replace_static(self, group: ConsumerGroup, holder: ConsumerMember, member_id: str,
                        req: GroupHeartbeatRequestV0) -> ConsumerMember:
        """A static member back within its session takes its old place: same target, same
        partitions, same epoch, and no group epoch bump (KIP-345 for KIP-848)."""
        old_id = holder.member_id
        self.touched.add(old_id)
        del group.members[old_id]
        for kind in MEMBER_TIMERS:
            self.fx.cancel(TimerKey(kind, group.group_id, old_id))
        holder.epoch = holder.previous_epoch
        holder.member_id = member_id
        group.members[member_id] = holder
        assert holder.group_instance_id is not None
        group.static_members[holder.group_instance_id] = member_id
        for tp in holder.holds():
            group.owner[tp] = member_id
        if old_id in group.target:
            group.target[member_id] = group.target.pop(old_id)
        self._update(group, holder, req)
        return holder

    def _update(self, group: ConsumerGroup, member: ConsumerMember,
                req: GroupHeartbeatRequestV0) -> None:
        if req.subscribed_topics is not None and frozenset(req.subscribed_topics) != member.topics:
            member.topics = frozenset(req.subscribed_topics)
            group.group_epoch += 1
        if req.rebalance_timeout_ms is not None:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id = req.client_id or member.client_id
        member.client_host = req.client_host or member.client_host

    @staticmethod
    def _fenced(member: ConsumerMember, req: GroupHeartbeatRequestV0) -> str:
        if member.epoch == STATIC_LEAVE_EPOCH:
            return f"static member {member.member_id!r} left; it must rejoin with epoch 0"
        if req.member_epoch == member.epoch:
            return ""
        owned = set(req.owned or ())
        if req.member_epoch == member.previous_epoch and owned <= set(member.assigned):
            return ""  # the reply that carried the bump was lost; nothing stale is held
        return (f"member epoch {req.member_epoch} is not the current {member.epoch}"
                f" of member {member.member_id!r}")

    def _leave(self, group: ConsumerGroup, member: ConsumerMember, req: GroupHeartbeatRequestV0,
               now_ms: int) -> None:
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            # Keep the partitions for the instance until it returns or its session ends.
            member.previous_epoch, member.epoch = member.epoch, STATIC_LEAVE_EPOCH
            self.fx.arm(TimerKey(TimerKind.SESSION, group.group_id, member.member_id),
                        now_ms + self.config.consumer_session_timeout_ms)
        else:
            self.remove(group, member.member_id)
        self.fx.answer(GroupHeartbeatResponseV0(
            ErrorCode.NONE, "", member.member_id, req.member_epoch,
            self.config.consumer_heartbeat_interval_ms, self.config.consumer_session_timeout_ms))

    def remove(self, group: ConsumerGroup, member_id: str) -> None:
        """Fence a member: its partitions are free at once and the group epoch moves."""
        self.touched.add(member_id)
        member = group.members.pop(member_id)
        self._release(group, member, member.holds())
        group.target.pop(member_id, None)
        if member.group_instance_id is not None:
            group.static_members.pop(member.group_instance_id, None)
        for kind in MEMBER_TIMERS:
            self.fx.cancel(TimerKey(kind, group.group_id, member_id))
        waiting = self._take_held(group.group_id, member_id)
        if waiting is not None:
            self.fx.reply(waiting.request_id, GroupHeartbeatResponseV0(
                ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id!r} was removed from group "
                f"{group.group_id!r}", member_id, member.epoch))
        group.group_epoch += 1

    def _release(self, group: ConsumerGroup, member: ConsumerMember,
                 partitions: set[TopicPartition]) -> None:
        for tp in partitions:
            member.assigned.pop(tp, None)
            member.pending_revocation.pop(tp, None)
            if group.owner.get(tp) == member.member_id:
                del group.owner[tp]
                self.released += 1

    def on_metadata(self, group: ConsumerGroup) -> None:
        """A partition count of a subscribed topic changed since the current target was
        computed: the group needs a new target (unless one is due already)."""
        if group.group_epoch > group.assignment_epoch or not group.members:
            return
        if self._subscribed_counts(group) != group.subscribed_partitions:
            group.group_epoch += 1

    def _subscribed_counts(self, group: ConsumerGroup) -> dict[str, int]:
        return {t: self.partition_counts.get(t, 0) for t in sorted(group.subscribed_topics())}

    def _refresh_target(self, group: ConsumerGroup) -> None:
        self.on_metadata(group)
        if group.group_epoch <= group.assignment_epoch:
            return
        counts = self._subscribed_counts(group)
        subscriptions = [
            MemberSubscription(m.member_id, m.topics, m.group_instance_id,
                               frozenset(group.target.get(m.member_id, ())))
            for _, m in sorted(group.members.items())
        ]
        target = TARGET_ASSIGNORS[group.assignor](subscriptions, counts)
        self.touched.update(group.members)
        group.target = {mid: set(tps) for mid, tps in target.items()}
        group.subscribed_partitions = counts
        group.assignment_epoch = group.group_epoch

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember,
                   owned: frozenset[TopicPartition] | None, now_ms: int) -> None:
        """Advance one member toward its target: revoke first, then assign what is free."""
        target = group.target.get(member.member_id, set())
        rebalance_key = TimerKey(TimerKind.REBALANCE, group.group_id, member.member_id)
        if member.state is MemberState.UNREVOKED:
            if owned is None or owned & set(member.pending_revocation):
                return
            self._release(group, member, set(member.pending_revocation))
            member.state = MemberState.STABLE
            self.fx.cancel(rebalance_key)
        revoke = set(member.assigned) - target
        if revoke:
            if owned is not None and not owned & revoke:
                self._release(group, member, revoke)  # the client let them go already
            else:
                member.pending_revocation = {tp: member.assigned.pop(tp) for tp in sorted(revoke)}
                member.state = MemberState.UNREVOKED
                self.fx.arm(rebalance_key, now_ms + member.rebalance_timeout_ms)
                return
        epoch = group.assignment_epoch
        for tp in sorted(target - set(member.assigned)):
            if tp not in group.owner:
                member.assigned[tp] = epoch
                group.owner[tp] = member.member_id
        if member.epoch != epoch:
            member.previous_epoch, member.epoch = member.epoch, epoch
        member.state = (MemberState.UNRELEASED if target - set(member.assigned)
                        else MemberState.STABLE)

    def load(self, group: ConsumerGroup, now_ms: int) -> None:
        """After a coordinator takes over: every member gets a full session from now, and a
        member in the middle of revoking gets its rebalance timeout again."""
        for member_id, member in sorted(group.members.items()):
            self.fx.arm(TimerKey(TimerKind.SESSION, group.group_id, member_id),
                        now_ms + self.config.consumer_session_timeout_ms)
            if member.state is MemberState.UNREVOKED:
                self.fx.arm(TimerKey(TimerKind.REBALANCE, group.group_id, member_id),
                            now_ms + member.rebalance_timeout_ms)

    def on_timer(self, group: ConsumerGroup, key: TimerKey, now_ms: int) -> None:
        member = group.members.get(key.member_id)
        if member is None:
            return
        if key.kind is TimerKind.HEARTBEAT_HOLD:
            self._catch_up(group, member, now_ms)
            self._answer_held(group, member, now_ms)
            return
        if key.kind is TimerKind.REBALANCE and member.state is not MemberState.UNREVOKED:
            return
        self.remove(group, key.member_id)
        self.wake(group, now_ms)

    def commit_errors(self, group: ConsumerGroup, req: OffsetCommitRequestV0,
                      ) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        """KIP-1251's acceptance: the committing member must hold each partition, and its
        epoch must lie between the partition's assignment epoch and its current epoch."""
        if req.member_id == "" and req.generation < 0:
            return ErrorCode.UNKNOWN_MEMBER_ID if group.members else {}
        member = group.members.get(req.member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if req.generation > member.epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        errors: dict[TopicPartition, ErrorCode] = {}
        for tp, _ in req.offsets:
            given = member.assigned.get(tp, member.pending_revocation.get(tp))
            if given is None or not given <= req.generation <= member.epoch:
                errors[tp] = ErrorCode.STALE_MEMBER_EPOCH
        return errors
