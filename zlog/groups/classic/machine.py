"""The classic group protocol (Kafka's JoinGroup/SyncGroup rebalance), as a pure state machine.

States Empty -> PreparingRebalance -> CompletingRebalance -> Stable (and Dead): a rebalance
parks every member's JoinGroup until all have rejoined or the rebalance timeout fires, bumps
the generation, hands the leader every member's subscription, and parks SyncGroups until the
leader sends the assignments. Generations fence everything that carries one (SyncGroup,
Heartbeat, OffsetCommit). docs/groups.md walks through the table this follows.
"""

from __future__ import annotations

import random
import uuid

from zlog.errors import ErrorCode
from zlog.groups.classic.group import ClassicGroup, ClassicMember, ClassicState
from zlog.groups.config import GroupConfig
from zlog.groups.output import Effects, TimerKey, TimerKind
from zlog.groups.records import JOIN_COMPLETE_HEADER, GroupMetadataKey, OffsetsRecord
from zlog.transport.messages.groups import (
    HeartbeatRequestV0,
    HeartbeatResponseV0,
    JoinGroupMember,
    JoinGroupRequestV0,
    JoinGroupResponseV0,
    LeaveGroupRequestV0,
    LeaveGroupResponseV0,
    LeftMember,
    SyncGroupRequestV0,
    SyncGroupResponseV0,
)

PREPARING = ClassicState.PREPARING_REBALANCE
COMPLETING = ClassicState.COMPLETING_REBALANCE
STABLE = ClassicState.STABLE
EMPTY = ClassicState.EMPTY
DEAD = ClassicState.DEAD


def new_member_id(prefix: str, rng: random.Random) -> str:
    """`<client or instance id>-<uuid4>`, drawn from the injected generator (replayable)."""
    return f"{prefix}-{uuid.UUID(int=rng.getrandbits(128), version=4)}"


def member_error(group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode:
    """Kafka's current-member check: an instance id now mapped to another member is fenced
    (82); an unknown member id is 25."""
    if instance_id is not None:
        holder = group.static_members.get(instance_id)
        if holder is not None and holder != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
    if member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return ErrorCode.NONE


class ClassicMachine:
    """Transitions of every classic group of one coordinator; state lives in `groups`."""

    def __init__(self, config: GroupConfig, effects: Effects, rng: random.Random) -> None:
        self.config = config
        self.fx = effects
        self.rng = rng

    # --- JoinGroup ----------------------------------------------------------------------

    def join(self, group: ClassicGroup, req: JoinGroupRequestV0, now_ms: int) -> None:
        if group.state is DEAD:
            self._join_error(req, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return
        if not group.supports(req.protocol_type, req.protocols):
            self._join_error(req, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            return
        if req.member_id == "":
            self._join_new(group, req, now_ms)
        elif req.member_id in group.pending_members:
            group.pending_members.discard(req.member_id)
            self.fx.cancel(TimerKey(TimerKind.PENDING_MEMBER, group.group_id, req.member_id))
            self._add_and_rebalance(group, req, req.member_id, now_ms)
        else:
            self._join_existing(group, req, now_ms)

    def _join_error(self, req: JoinGroupRequestV0, code: ErrorCode, member_id: str = "") -> None:
        self.fx.answer(JoinGroupResponseV0(code, member_id or req.member_id))

    def _full(self, group: ClassicGroup) -> bool:
        return len(group.members) + len(group.pending_members) >= self.config.max_group_size

    def _join_new(self, group: ClassicGroup, req: JoinGroupRequestV0, now_ms: int) -> None:
        instance_id = req.group_instance_id
        if instance_id is not None and instance_id in group.static_members:
            self._replace_static(group, req, now_ms)
            return
        if self._full(group):
            self._join_error(req, ErrorCode.GROUP_MAX_SIZE_REACHED)
            return
        member_id = new_member_id(instance_id or req.client_id, self.rng)
        if instance_id is None and req.require_known_member_id:
            group.pending_members.add(member_id)
            self.fx.arm(TimerKey(TimerKind.PENDING_MEMBER, group.group_id, member_id),
                        now_ms + req.session_timeout_ms)
            self._join_error(req, ErrorCode.MEMBER_ID_REQUIRED, member_id)
            return
        self._add_and_rebalance(group, req, member_id, now_ms)

    def _add_and_rebalance(self, group: ClassicGroup, req: JoinGroupRequestV0, member_id: str,
                           now_ms: int) -> None:
        if len(group.members) >= self.config.max_group_size:
            self._join_error(req, ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
            return
        member = ClassicMember(
            member_id, req.group_instance_id, req.client_id, req.client_host,
            req.session_timeout_ms, req.rebalance_timeout_ms, req.protocols,
            join_request=self.fx.answering,
        )
        if not group.members:
            group.protocol_type = req.protocol_type
        group.members[member_id] = member
        if req.group_instance_id is not None:
            group.static_members[req.group_instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        if group.initial_join:
            group.new_member_added = True
        self.fx.arm(TimerKey(TimerKind.NEW_MEMBER_JOIN, group.group_id, member_id),
                    now_ms + self.config.new_member_join_timeout_ms)
        self._rebalance_or_try_complete(group, now_ms)

    def _join_existing(self, group: ClassicGroup, req: JoinGroupRequestV0, now_ms: int) -> None:
        error = member_error(group, req.member_id, req.group_instance_id)
        if error is not ErrorCode.NONE:
            self._join_error(req, error)
            return
        member = group.members[req.member_id]
        changed = member.protocols != req.protocols
        if group.state is PREPARING or (group.state is COMPLETING and changed) or (
            group.state is STABLE and (changed or member.member_id == group.leader_id)
        ):
            self._update_member(group, member, req)
            self._rebalance_or_try_complete(group, now_ms)
            return
        # CompletingRebalance or Stable with nothing new: the member lost our reply; resend it.
        self._reply_join(group, member, self.fx.answering, with_members=(
            group.state is COMPLETING and member.member_id == group.leader_id))

    def _update_member(self, group: ClassicGroup, member: ClassicMember,
                       req: JoinGroupRequestV0) -> None:
        if member.join_request is not None and member.join_request != self.fx.answering:
            # A duplicate join replaces the parked one (Kafka answers the old one this way).
            self.fx.reply(member.join_request,
                          JoinGroupResponseV0(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        member.protocols = req.protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.join_request = self.fx.answering

    def _replace_static(self, group: ClassicGroup, req: JoinGroupRequestV0, now_ms: int) -> None:
        """KIP-345: a static member restarting under its instance id takes over its old
        member id; the old id is fenced and, in Stable, nobody rebalances."""
        assert req.group_instance_id is not None
        old_id = group.static_members[req.group_instance_id]
        member = group.members.pop(old_id)
        new_id = new_member_id(req.group_instance_id, self.rng)
        for kind in (TimerKind.SESSION, TimerKind.NEW_MEMBER_JOIN):
            self.fx.cancel(TimerKey(kind, group.group_id, old_id))
        fenced = JoinGroupResponseV0(ErrorCode.FENCED_INSTANCE_ID, old_id)
        if member.join_request is not None:
            self.fx.reply(member.join_request, fenced)
        if member.sync_request is not None:
            self.fx.reply(member.sync_request, SyncGroupResponseV0(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id, member.join_request, member.sync_request = new_id, None, None
        group.members[new_id] = member
        group.static_members[req.group_instance_id] = new_id
        old_leader = group.leader_id
        if old_leader == old_id:
            group.leader_id = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        old_protocols = member.protocols
        if group.state is STABLE:
            member.protocols = req.protocols
            if group.protocol_name in member.protocol_names and group.select_protocol() == (
                group.protocol_name
            ):
                member.session_timeout_ms = req.session_timeout_ms
                member.rebalance_timeout_ms = req.rebalance_timeout_ms
                self._write_metadata(group)
                self._arm_session(group, member, now_ms)
                is_leader = new_id == group.leader_id
                self.fx.answer(JoinGroupResponseV0(
                    ErrorCode.NONE, new_id, group.generation, group.protocol_type,
                    group.protocol_name,
                    # Old clients get the old leader id so that they do not re-assign.
                    leader_id=old_leader or "", skip_assignment=is_leader,
                    members=self._member_list(group) if is_leader else (),
                ))
                return
            member.protocols = old_protocols
        self._update_member(group, member, req)
        self._rebalance_or_try_complete(group, now_ms)

    def _rebalance_or_try_complete(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state is PREPARING:
            self._try_complete_join(group, now_ms)
        else:
            self._prepare_rebalance(group, now_ms)

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state is COMPLETING:
            self._fail_parked_syncs(group, ErrorCode.REBALANCE_IN_PROGRESS)
            for member in group.members.values():
                member.assignment = b""
        self.fx.cancel(TimerKey(TimerKind.SYNC, group.group_id))
        group.pending_sync.clear()
        timeout_ms = min(group.rebalance_timeout_ms, self.config.max_rebalance_timeout_ms)
        delay_ms = self.config.initial_rebalance_delay_ms
        if group.state is EMPTY and delay_ms > 0:
            group.initial_join, group.new_member_added = True, False
            group.initial_join_remaining_ms = max(timeout_ms - delay_ms, 0)
            self.fx.arm(TimerKey(TimerKind.JOIN, group.group_id), now_ms + delay_ms)
        else:
            group.initial_join = False
            self.fx.arm(TimerKey(TimerKind.JOIN, group.group_id), now_ms + timeout_ms)
        group.transition(PREPARING, now_ms)
        self._try_complete_join(group, now_ms)

    def _fail_parked_syncs(self, group: ClassicGroup, code: ErrorCode) -> None:
        for _, member in sorted(group.members.items()):
            if member.sync_request is not None:
                self.fx.reply(member.sync_request, SyncGroupResponseV0(code))
                member.sync_request = None

    def _try_complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state is PREPARING and not group.initial_join and group.all_joined():
            self._complete_join(group, now_ms)

    def on_join_timer(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state is not PREPARING:
            return
        if group.initial_join and group.new_member_added and group.initial_join_remaining_ms:
            delay_ms = min(self.config.initial_rebalance_delay_ms,
                           group.initial_join_remaining_ms)
            group.initial_join_remaining_ms -= delay_ms
            group.new_member_added = False
            self.fx.arm(TimerKey(TimerKind.JOIN, group.group_id), now_ms + delay_ms)
            return
        group.initial_join = False
        self._complete_join(group, now_ms)

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        for member_id, member in sorted(group.members.items()):
            if member.join_request is None and member.group_instance_id is None:
                self._remove_member(group, member_id)
        for member_id in sorted(group.pending_members):
            self.fx.cancel(TimerKey(TimerKind.PENDING_MEMBER, group.group_id, member_id))
        group.pending_members.clear()
        joined = group.joined_members()
        if group.members and not joined:
            timeout_ms = min(group.rebalance_timeout_ms, self.config.max_rebalance_timeout_ms)
            self.fx.arm(TimerKey(TimerKind.JOIN, group.group_id), now_ms + timeout_ms)
            return
        self.fx.cancel(TimerKey(TimerKind.JOIN, group.group_id))
        group.generation += 1
        if not group.members:
            group.protocol_name, group.leader_id = None, None
            group.transition(EMPTY, now_ms)
            self._write_metadata(group)
            return
        if group.leader_id is None or group.members[group.leader_id].join_request is None:
            group.leader_id = joined[0].member_id
        group.protocol_name = group.select_protocol()
        group.transition(COMPLETING, now_ms)
        self._write_metadata(group, join_complete=True)
        for member in joined:
            assert member.join_request is not None
            self._reply_join(group, member, member.join_request,
                             with_members=member.member_id == group.leader_id)
            member.join_request, member.is_new = None, False
            self.fx.cancel(TimerKey(TimerKind.NEW_MEMBER_JOIN, group.group_id, member.member_id))
            self._arm_session(group, member, now_ms)
            group.pending_sync.add(member.member_id)
        timeout_ms = min(group.rebalance_timeout_ms, self.config.max_rebalance_timeout_ms)
        self.fx.arm(TimerKey(TimerKind.SYNC, group.group_id), now_ms + timeout_ms)

    def _member_list(self, group: ClassicGroup) -> tuple[JoinGroupMember, ...]:
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
            for _, m in sorted(group.members.items())
        )

    def _reply_join(self, group: ClassicGroup, member: ClassicMember, request_id: int,
                    *, with_members: bool) -> None:
        self.fx.reply(request_id, JoinGroupResponseV0(
            ErrorCode.NONE, member.member_id, group.generation, group.protocol_type,
            group.protocol_name, group.leader_id or "",
            members=self._member_list(group) if with_members else (),
        ))

    def _write_metadata(self, group: ClassicGroup, *, join_complete: bool = False) -> None:
        headers = (JOIN_COMPLETE_HEADER,) if join_complete else ()
        self.fx.write(OffsetsRecord(GroupMetadataKey(group.group_id), group.to_metadata(),
                                    headers))
        group.metadata_written = True

    def _arm_session(self, group: ClassicGroup, member: ClassicMember, now_ms: int) -> None:
        self.fx.arm(TimerKey(TimerKind.SESSION, group.group_id, member.member_id),
                    now_ms + member.session_timeout_ms)

    # --- SyncGroup, Heartbeat -----------------------------------------------------------

    def sync(self, group: ClassicGroup, req: SyncGroupRequestV0, now_ms: int) -> None:
        def answer(code: ErrorCode) -> None:
            self.fx.answer(SyncGroupResponseV0(code))

        error = self._check_generation(group, req.member_id, req.group_instance_id,
                                       req.generation)
        if error is not ErrorCode.NONE:
            answer(error)
            return
        if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != group.protocol_name
        ):
            answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            return
        member = group.members[req.member_id]
        if group.state is PREPARING:
            answer(ErrorCode.REBALANCE_IN_PROGRESS)
            return
        self._synced(group, member, now_ms)
        if group.state is STABLE:
            self._reply_sync(group, member, self.fx.answering)
            return
        member.sync_request = self.fx.answering
        if member.member_id != group.leader_id:
            return
        given = dict(req.assignments)
        for member_id, other in group.members.items():
            other.assignment = given.get(member_id, b"")
        group.transition(STABLE, now_ms)
        self._write_metadata(group)
        for _, other in sorted(group.members.items()):
            if other.sync_request is not None:
                self._reply_sync(group, other, other.sync_request)
                other.sync_request = None
                self._arm_session(group, other, now_ms)

    def _synced(self, group: ClassicGroup, member: ClassicMember, now_ms: int) -> None:
        self._arm_session(group, member, now_ms)
        group.pending_sync.discard(member.member_id)
        if not group.pending_sync:
            self.fx.cancel(TimerKey(TimerKind.SYNC, group.group_id))

    def _reply_sync(self, group: ClassicGroup, member: ClassicMember, request_id: int) -> None:
        self.fx.reply(request_id, SyncGroupResponseV0(
            ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name))

    def _check_generation(self, group: ClassicGroup, member_id: str, instance_id: str | None,
                          generation: int) -> ErrorCode:
        if group.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = member_error(group, member_id, instance_id)
        if error is not ErrorCode.NONE:
            return error
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def heartbeat(self, group: ClassicGroup, req: HeartbeatRequestV0, now_ms: int) -> None:
        error = self._check_generation(group, req.member_id, req.group_instance_id,
                                       req.generation)
        if error is ErrorCode.NONE:
            self._arm_session(group, group.members[req.member_id], now_ms)
            if group.state is PREPARING:
                error = ErrorCode.REBALANCE_IN_PROGRESS
        self.fx.answer(HeartbeatResponseV0(error))

    def touch(self, group: ClassicGroup, member_id: str, now_ms: int) -> None:
        """A commit from a member in Stable or PreparingRebalance keeps its session alive."""
        member = group.members.get(member_id)
        if member is not None:
            self._arm_session(group, member, now_ms)

    # --- LeaveGroup, expiry -------------------------------------------------------------

    def leave(self, group: ClassicGroup, req: LeaveGroupRequestV0, now_ms: int) -> None:
        if group.state is DEAD:
            self.fx.answer(
                          LeaveGroupResponseV0(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        results: list[LeftMember] = []
        removed = False
        for given_id, instance_id in req.members:
            member_id = given_id
            if given_id == "" and instance_id is not None:
                member_id = group.static_members.get(instance_id, "")
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self.fx.cancel(TimerKey(TimerKind.PENDING_MEMBER, group.group_id, member_id))
                results.append(LeftMember(member_id, instance_id, ErrorCode.NONE))
                continue
            error = member_error(group, member_id, instance_id)
            results.append(LeftMember(member_id, instance_id, error))
            if error is ErrorCode.NONE:
                self._remove_member(group, member_id)
                removed = True
        if removed:
            self._after_removal(group, now_ms)
        else:
            self._try_complete_join(group, now_ms)
        top = results[0][2] if len(results) == 1 else ErrorCode.NONE
        self.fx.answer(LeaveGroupResponseV0(top, tuple(results)))

    def _remove_member(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members.pop(member_id)
        for kind in (TimerKind.SESSION, TimerKind.NEW_MEMBER_JOIN):
            self.fx.cancel(TimerKey(kind, group.group_id, member_id))
        if member.join_request is not None:
            self.fx.reply(member.join_request,
                          JoinGroupResponseV0(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        if member.sync_request is not None:
            self.fx.reply(member.sync_request, SyncGroupResponseV0(ErrorCode.UNKNOWN_MEMBER_ID))
        if member.group_instance_id is not None:
            group.static_members.pop(member.group_instance_id, None)
        group.pending_sync.discard(member_id)
        if group.leader_id == member_id:
            group.leader_id = min(group.members, default=None)

    def _after_removal(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state in (STABLE, COMPLETING):
            self._prepare_rebalance(group, now_ms)
        else:
            self._try_complete_join(group, now_ms)

    def on_member_timer(self, group: ClassicGroup, key: TimerKey, now_ms: int) -> None:
        if key.kind is TimerKind.PENDING_MEMBER:
            group.pending_members.discard(key.member_id)
            self._try_complete_join(group, now_ms)
            return
        member = group.members.get(key.member_id)
        if member is None:
            return
        if key.kind is TimerKind.SESSION and member.join_request is not None:
            return  # parked in JoinGroup: the join timer, not the session, decides
        self._remove_member(group, key.member_id)
        self._after_removal(group, now_ms)

    def on_sync_timer(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state not in (COMPLETING, STABLE) or not group.pending_sync:
            return
        for member_id in sorted(group.pending_sync):
            if member_id in group.members:
                self._remove_member(group, member_id)
        self._prepare_rebalance(group, now_ms)

    def load(self, group: ClassicGroup, join_complete: bool, now_ms: int) -> None:
        """After a coordinator takes over: fresh sessions for every member; a group whose last
        record was a join completion goes back to rebalancing, so its next generation is new."""
        for _, member in sorted(group.members.items()):
            self._arm_session(group, member, now_ms)
        if join_complete and group.members:
            group.state = COMPLETING
            self._prepare_rebalance(group, now_ms)
