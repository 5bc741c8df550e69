"""The group coordinator of one `__consumer_offsets` partition: a pure, deterministic core.

The partition worker that leads the offsets partition drives it: it replays the partition's
log into `load`, then feeds every group request, fired timer and metadata change in with the
time, and carries out each returned `Output` (append the records in one batch, release the
replies once they are committed, arm the timers). No sockets, threads or clocks here, and
member ids come from an injected `random.Random`, so one seed replays one run exactly.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import Final, TypeAlias

from zlog.errors import ErrorCode, ZlogError
from zlog.groups.classic.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_subscription
from zlog.groups.classic.group import ClassicGroup, ClassicState
from zlog.groups.classic.machine import ClassicMachine, member_error
from zlog.groups.config import GroupConfig
from zlog.groups.describe import describe_classic, describe_consumer
from zlog.groups.offsets import OffsetStore
from zlog.groups.output import Effects, Output, TimerKey, TimerKind
from zlog.groups.records import GroupMetadataKey, OffsetCommitKey, OffsetsRecord
from zlog.groups.replay import LoadedGroups
from zlog.groups.server_side.group import ConsumerGroup
from zlog.groups.server_side.machine import ConsumerMachine
from zlog.groups.server_side.records import (
    ConsumerKey,
    ConsumerMemberKey,
    ConsumerValue,
    changed_records,
    group_from_records,
    group_level_records,
    member_records,
)
from zlog.transport.messages.groups import (
    DeletedGroup,
    DeleteGroupsResponseV0,
    DescribeGroupsRequestV0,
    DescribeGroupsResponseV0,
    GroupDescription,
    GroupHeartbeatRequestV0,
    GroupHeartbeatResponseV0,
    HeartbeatRequestV0,
    HeartbeatResponseV0,
    JoinGroupRequestV0,
    JoinGroupResponseV0,
    LeaveGroupRequestV0,
    LeaveGroupResponseV0,
    ListedGroup,
    ListGroupsRequestV0,
    ListGroupsResponseV0,
    OffsetCommitRequestV0,
    OffsetCommitResponseV0,
    OffsetFetchRequestV0,
    OffsetFetchResponseV0,
    SyncGroupRequestV0,
    SyncGroupResponseV0,
)
from zlog.transport.messages.groups import (
    GroupRequest as Request,
)
from zlog.transport.messages.groups import (
    GroupResponse as Response,
)
from zlog.transport.wire import utf8_longer_than
from zlog.types import TopicPartition

Group: TypeAlias = ClassicGroup | ConsumerGroup

GROUP_ID_MAX_BYTES: Final = 32_767
MEMBER_ID_MAX_BYTES: Final = 1_024
CLASSIC: Final = "classic"
CONSUMER: Final = "consumer"
EXPIRY_KEY: Final = TimerKey(TimerKind.OFFSETS_EXPIRY)

# Requests that name a group and refuse the empty id (Kafka keeps "" for offsets and admin).
_NEEDS_GROUP_ID = (JoinGroupRequestV0, SyncGroupRequestV0, HeartbeatRequestV0, LeaveGroupRequestV0,
                   GroupHeartbeatRequestV0)


def error_response(req: Request, code: ErrorCode, message: str = "") -> Response:
    """The whole-request error reply of `req`'s type."""
    if isinstance(req, JoinGroupRequestV0):
        return JoinGroupResponseV0(code, req.member_id)
    if isinstance(req, SyncGroupRequestV0):
        return SyncGroupResponseV0(code)
    if isinstance(req, HeartbeatRequestV0):
        return HeartbeatResponseV0(code)
    if isinstance(req, LeaveGroupRequestV0):
        return LeaveGroupResponseV0(code)
    if isinstance(req, OffsetCommitRequestV0):
        return OffsetCommitResponseV0(code, tuple((tp, code) for tp, _ in req.offsets))
    if isinstance(req, OffsetFetchRequestV0):
        return OffsetFetchResponseV0(code)
    if isinstance(req, GroupHeartbeatRequestV0):
        return GroupHeartbeatResponseV0(code, message, req.member_id, req.member_epoch)
    if isinstance(req, DescribeGroupsRequestV0):
        return DescribeGroupsResponseV0(tuple(GroupDescription(g, code, "") for g in req.group_ids))
    if isinstance(req, ListGroupsRequestV0):
        return ListGroupsResponseV0(code)
    return DeleteGroupsResponseV0(tuple(DeletedGroup(g, code) for g in req.group_ids))


def group_state_name(group: Group) -> str:
    state: str = group.state.value
    return state


class GroupCoordinator:
    def __init__(self, config: GroupConfig | None = None, rng: random.Random | None = None,
                 partition_counts: Mapping[str, int] | None = None) -> None:
        self.config = config or GroupConfig()
        self.fx = Effects()
        self.rng = rng or random.Random(0)
        self.classic = ClassicMachine(self.config, self.fx, self.rng)
        self.consumer = ConsumerMachine(self.config, self.fx, self.rng)
        self.consumer.partition_counts = dict(partition_counts or {})
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        self.persisted: dict[str, dict[ConsumerKey, ConsumerValue]] = {}
        """The current records of each server-side group, as the log has them."""
        self.loaded = False

    @property
    def partition_counts(self) -> dict[str, int]:
        return self.consumer.partition_counts

    # --- driver entry points ------------------------------------------------------------

    def load(self, loaded: LoadedGroups, now_ms: int) -> Output:
        """Take over the partition with the state its log replays to."""
        for group_id, found in sorted(loaded.groups.items()):
            if found.offsets:
                self.offsets.committed[group_id] = dict(found.offsets)
            if found.metadata is not None:
                group = ClassicGroup.from_metadata(group_id, found.metadata)
                self.groups[group_id] = group
                self.classic.load(group, found.join_complete, now_ms)
            elif found.consumer:
                server_side = group_from_records(group_id, found.consumer)
                self.persisted[group_id] = dict(found.consumer)
                self.groups[group_id] = server_side
                self.consumer.load(server_side, now_ms)
            else:
                self.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=now_ms)
        self.loaded = True
        self.fx.arm(EXPIRY_KEY, now_ms + self.config.offsets_retention_check_interval_ms)
        return self.fx.take()

    def handle(self, request_id: int, req: Request, now_ms: int) -> Output:
        """Handle one request; every reply to it carries `request_id`, the driver's handle."""
        self.fx.answering = request_id
        self._dispatch(req, now_ms)
        return self.fx.take()

    def on_timer(self, key: TimerKey, now_ms: int) -> Output:
        """A timer fired; ignored unless it is still armed with a deadline now past."""
        if self.fx.is_due(key, now_ms):
            del self.fx.deadlines[key]
            self._fire(key, now_ms)
        return self.fx.take()

    def advance(self, now_ms: int) -> Output:
        """Fire every timer due by `now_ms`, earliest first, each at its own deadline: what a
        driver with a timer heap does when it wakes on time."""
        merged = Output()
        while due := self.fx.due(now_ms):
            part = self.on_timer(due[0], self.fx.deadlines[due[0]])
            merged.replies += part.replies
            merged.records += part.records
            merged.timers += part.timers
        return merged

    def next_deadline_ms(self) -> int | None:
        return self.fx.next_deadline_ms()

    def defer_wakes(self) -> None:
        """From now until `wake_deferred`, a heartbeat that brings held members news only
        notes their group. A driver that answers nothing before the end of a batch of
        requests loses no time by it, and held members hear everything the batch did in one
        answer: a joiner woken by the first of six releases in a batch would otherwise get
        one partition, and wait for a whole second round trip for the other five."""
        self.consumer.deferring_wakes = True

    def wake_deferred(self, now_ms: int) -> Output:
        """Wake the held members of every group noted since `defer_wakes`."""
        machine = self.consumer
        machine.deferring_wakes = False
        for group_id in sorted(machine.deferred_wakes):
            group = self.groups.get(group_id)
            if isinstance(group, ConsumerGroup):
                self._persisting(group_id, partial(machine.wake, group, now_ms))
        machine.deferred_wakes.clear()
        return self.fx.take()

    def update_metadata(self, partition_counts: Mapping[str, int]) -> Output:
        """The worker's view of topic partition counts changed (topics created, grown,
        deleted): server-side groups subscribed to a changed topic get a new epoch."""
        self.consumer.partition_counts.clear()
        self.consumer.partition_counts.update(partition_counts)
        for group_id, group in sorted(self.groups.items()):
            if isinstance(group, ConsumerGroup):
                self._persisting(group_id, partial(self.consumer.on_metadata, group))
        return self.fx.take()

    # --- dispatch -----------------------------------------------------------------------

    def _dispatch(self, req: Request, now_ms: int) -> None:
        problem = self._invalid_ids(req)
        if problem is not None:
            code, message = problem
            self.fx.answer(error_response(req, code, message))
            return
        if not self.loaded:
            self._while_loading(req)
            return
        if isinstance(req, OffsetCommitRequestV0):  # first: the one at a data path's rate
            self._commit(req, now_ms)
        elif isinstance(req, JoinGroupRequestV0):
            self._join(req, now_ms)
        elif isinstance(req, SyncGroupRequestV0 | HeartbeatRequestV0 | LeaveGroupRequestV0):
            group = self.groups.get(req.group_id)
            if not isinstance(group, ClassicGroup):
                self.fx.answer(error_response(req, ErrorCode.UNKNOWN_MEMBER_ID))
            elif isinstance(req, SyncGroupRequestV0):
                self.classic.sync(group, req, now_ms)
            elif isinstance(req, HeartbeatRequestV0):
                self.classic.heartbeat(group, req, now_ms)
            else:
                self.classic.leave(group, req, now_ms)
                self._forget_if_unused(group)
        elif isinstance(req, GroupHeartbeatRequestV0):
            self._persisting(req.group_id, lambda: self._group_heartbeat(req, now_ms))
        elif isinstance(req, OffsetFetchRequestV0):
            self.fx.answer(OffsetFetchResponseV0(
                ErrorCode.NONE, self.offsets.fetch(req.group_id, req.partitions)))
        elif isinstance(req, DescribeGroupsRequestV0):
            self.fx.answer(DescribeGroupsResponseV0(
                tuple(self._describe(g) for g in req.group_ids)))
        elif isinstance(req, ListGroupsRequestV0):
            self.fx.answer(self._list(req))
        else:
            self.fx.answer(DeleteGroupsResponseV0(
                tuple(DeletedGroup(g, self._delete(g)) for g in req.group_ids)))

    def _invalid_ids(self, req: Request) -> tuple[ErrorCode, str] | None:
        ids = getattr(req, "group_ids", None) or (
            (req.group_id,) if hasattr(req, "group_id") else ())
        for group_id in ids:
            if utf8_longer_than(group_id, GROUP_ID_MAX_BYTES):
                return ErrorCode.INVALID_GROUP_ID, f"group id over {GROUP_ID_MAX_BYTES} bytes"
            if group_id == "" and isinstance(req, _NEEDS_GROUP_ID):
                return ErrorCode.INVALID_GROUP_ID, "the group id is empty"
        for name in ("member_id", "group_instance_id"):
            value = getattr(req, name, None)
            if value is not None and utf8_longer_than(value, MEMBER_ID_MAX_BYTES):
                return ErrorCode.INVALID_REQUEST, f"{name} longer than {MEMBER_ID_MAX_BYTES} bytes"
        return None

    def _while_loading(self, req: Request) -> None:
        if isinstance(req, HeartbeatRequestV0):
            # Answer blindly: the member keeps its session until the group is loaded.
            self.fx.answer(HeartbeatResponseV0(ErrorCode.NONE))
        elif isinstance(req, SyncGroupRequestV0):
            self.fx.answer(SyncGroupResponseV0(ErrorCode.REBALANCE_IN_PROGRESS))
        else:
            self.fx.answer(
                          error_response(req, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))

    # --- classic join, server-side heartbeat --------------------------------------------

    def _join(self, req: JoinGroupRequestV0, now_ms: int) -> None:
        config = self.config
        if not config.min_session_timeout_ms <= req.session_timeout_ms <= (
            config.max_session_timeout_ms
        ):
            self.fx.answer(JoinGroupResponseV0(
                ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id))
            return
        if req.rebalance_timeout_ms < 0:
            self.fx.answer(JoinGroupResponseV0(ErrorCode.INVALID_REQUEST,
                                                            req.member_id))
            return
        if req.rebalance_timeout_ms > config.max_rebalance_timeout_ms:
            req = replace(req, rebalance_timeout_ms=config.max_rebalance_timeout_ms)
        group = self.groups.get(req.group_id)
        if isinstance(group, ConsumerGroup):
            if group.members:
                self.fx.answer(JoinGroupResponseV0(
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
                return
            self._write_consumer_changes(group.group_id, {})
            del self.groups[req.group_id]
            group = None  # an empty group may change protocol
        if group is None:
            if req.member_id != "":
                self.fx.answer(JoinGroupResponseV0(ErrorCode.UNKNOWN_MEMBER_ID,
                                                                req.member_id))
                return
            group = ClassicGroup(req.group_id, state_timestamp_ms=now_ms)
            self.groups[req.group_id] = group
        self.classic.join(group, req, now_ms)
        self._forget_if_unused(group)

    def _group_heartbeat(self, req: GroupHeartbeatRequestV0, now_ms: int) -> None:
        problem = self.consumer.invalid(req)
        if problem is not None:
            self.fx.answer(error_response(req, ErrorCode.INVALID_REQUEST, problem))
            return
        group = self.groups.get(req.group_id)
        if isinstance(group, ClassicGroup):
            if group.members or group.pending_members:
                self.fx.answer(error_response(
                    req, ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                    f"group {req.group_id!r} is a live classic group"))
                return
            if group.metadata_written:
                self.fx.write(OffsetsRecord(GroupMetadataKey(group.group_id), None))
            group = None
        if group is None:
            if req.member_epoch != 0:
                self.fx.answer(error_response(
                    req, ErrorCode.UNKNOWN_MEMBER_ID, f"no group {req.group_id!r}"))
                return
            group = ConsumerGroup(req.group_id)
            self.groups[req.group_id] = group
        self.consumer.heartbeat(group, req, now_ms)
        self._forget_if_unused(group)

    def _forget_if_unused(self, group: Group) -> None:
        """Drop a group that holds nothing the log would bring back on replay."""
        if self.groups.get(group.group_id) is not group or self.offsets.of(group.group_id):
            return
        if isinstance(group, ClassicGroup):
            unused = not (group.members or group.pending_members or group.metadata_written)
        else:
            unused = not group.members
        if unused:
            del self.groups[group.group_id]

    # --- offsets ------------------------------------------------------------------------

    def _commit(self, req: OffsetCommitRequestV0, now_ms: int) -> None:
        group = self.groups.get(req.group_id)
        refused: ErrorCode | dict[TopicPartition, ErrorCode]
        if group is None:
            if req.generation >= 0 or req.member_id:
                refused = ErrorCode.ILLEGAL_GENERATION
            else:
                group = ClassicGroup(req.group_id, state_timestamp_ms=now_ms)
                refused = {}
        elif isinstance(group, ConsumerGroup):
            refused = self.consumer.commit_errors(group, req)
        else:
            refused = self._classic_commit_error(group, req, now_ms)
        if isinstance(refused, ErrorCode):
            self.fx.answer(error_response(req, refused))
            return
        assert group is not None
        results, records = self.offsets.commit_records(
            req, self.partition_counts, self.config.offset_metadata_max_bytes, now_ms)
        if refused:  # a server-side member's partitions it does not own
            results = [(tp, refused.get(tp, code)) for tp, code in results]
            records = [r for r in records if _committed_partition(r) not in refused]
        for record in records:
            self.fx.write(record)
            self.offsets.apply(record)
        self.groups.setdefault(req.group_id, group)
        self._forget_if_unused(group)
        self.fx.answer(OffsetCommitResponseV0(ErrorCode.NONE, tuple(results)))

    def _classic_commit_error(self, group: ClassicGroup, req: OffsetCommitRequestV0,
                              now_ms: int) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        if group.state is ClassicState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        has_identity = req.generation >= 0 or req.member_id or req.group_instance_id
        if req.generation < 0 and group.state is ClassicState.EMPTY:
            return {}
        if has_identity:
            error = member_error(group, req.member_id, req.group_instance_id)
            if error is not ErrorCode.NONE:
                return error
            if req.generation != group.generation:
                return ErrorCode.ILLEGAL_GENERATION
        elif group.state is not ClassicState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is ClassicState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        self.classic.touch(group, req.member_id, now_ms)
        return {}

    def _expire_offsets(self, now_ms: int) -> None:
        retention_ms = self.config.offsets_retention_ms
        for group_id in sorted(set(self.groups) | set(self.offsets.committed)):
            group = self.groups.get(group_id)
            if isinstance(group, ConsumerGroup):
                expired = self.offsets.expired(group_id, now_ms, retention_ms, since_ms=None,
                                               keep_topics=group.subscribed_topics())
            elif group is None or group.protocol_type is None:
                expired = self.offsets.expired(group_id, now_ms, retention_ms, since_ms=None)
            elif group.state is ClassicState.EMPTY:
                expired = self.offsets.expired(group_id, now_ms, retention_ms,
                                               since_ms=group.state_timestamp_ms)
            elif group.state is ClassicState.STABLE and group.protocol_type == (
                CONSUMER_PROTOCOL_TYPE
            ) and (subscribed := _classic_subscribed(group)) is not None:
                expired = self.offsets.expired(group_id, now_ms, retention_ms, since_ms=None,
                                               keep_topics=subscribed)
            else:
                expired = []
            for record in self.offsets.tombstones(group_id, expired):
                self.fx.write(record)
                self.offsets.apply(record)
            if group is not None and not self.offsets.of(group_id) and _is_empty(group):
                self._remove_group(group)

    def _consumer_timer(self, group: ConsumerGroup, key: TimerKey, now_ms: int) -> None:
        self.consumer.on_timer(group, key, now_ms)
        self._forget_if_unused(group)

    def _persisting(self, group_id: str, op: Callable[[], None]) -> None:
        """Run an operation on a server-side group, then write the records it changed (of the
        group itself and of the members it touched): the log then replays to the group as it
        is in memory, and a heartbeat costs what its member changed, not the group's size."""
        self.consumer.touched.clear()
        op()
        written = self.persisted.get(group_id, {})
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            self._write_consumer_changes(group_id, {})
            return
        touched = self.consumer.touched
        after = group_level_records(group)
        for member_id in sorted(touched):
            after.update(member_records(group, member_id))
        self._write_consumer_changes(group_id, after, {
            k for k in written if isinstance(k, ConsumerMemberKey) and k.member_id not in touched
        })

    def _write_consumer_changes(self, group_id: str,
                                after: Mapping[ConsumerKey, ConsumerValue],
                                untouched: set[ConsumerKey] | None = None) -> None:
        """Write what differs between the group's records in the log and `after` (keys in
        `untouched` are left as they are)."""
        written = self.persisted.setdefault(group_id, {})
        before = {k: v for k, v in written.items() if k not in (untouched or set())}
        for key, value in changed_records(before, after):
            self.fx.write(OffsetsRecord(key, value))
            if value is None:
                del written[key]
            else:
                written[key] = value
        if not written:
            del self.persisted[group_id]

    def _remove_group(self, group: Group) -> None:
        if isinstance(group, ConsumerGroup):
            self._write_consumer_changes(group.group_id, {})
        if isinstance(group, ClassicGroup):
            if group.metadata_written:
                self.fx.write(OffsetsRecord(GroupMetadataKey(group.group_id), None))
            group.state = ClassicState.DEAD
        for record in self.offsets.tombstones(group.group_id):
            self.fx.write(record)
            self.offsets.apply(record)
        del self.groups[group.group_id]

    # --- admin --------------------------------------------------------------------------

    def _describe(self, group_id: str) -> GroupDescription:
        group = self.groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, ErrorCode.NONE, ClassicState.DEAD.value)
        if isinstance(group, ClassicGroup):
            return describe_classic(group)
        return describe_consumer(group)

    def _list(self, req: ListGroupsRequestV0) -> ListGroupsResponseV0:
        listed = []
        for group_id, group in sorted(self.groups.items()):
            if isinstance(group, ClassicGroup):
                entry = ListedGroup(group_id, group.protocol_type or "", group_state_name(group),
                                    CLASSIC)
            else:
                entry = ListedGroup(group_id, CONSUMER_PROTOCOL_TYPE, group_state_name(group),
                                    CONSUMER)
            if (not req.states or entry.state in req.states) and (
                not req.types or entry.group_type in req.types
            ):
                listed.append(entry)
        return ListGroupsResponseV0(ErrorCode.NONE, tuple(listed))

    def _delete(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not _is_empty(group):
            return ErrorCode.NON_EMPTY_GROUP
        self._remove_group(group)
        return ErrorCode.NONE

    # --- timers -------------------------------------------------------------------------

    def _fire(self, key: TimerKey, now_ms: int) -> None:
        if key.kind is TimerKind.OFFSETS_EXPIRY:
            self._expire_offsets(now_ms)
            self.fx.arm(EXPIRY_KEY, now_ms + self.config.offsets_retention_check_interval_ms)
            return
        group = self.groups.get(key.group_id)
        if isinstance(group, ConsumerGroup):
            self._persisting(group.group_id, partial(self._consumer_timer, group, key, now_ms))
            return
        if isinstance(group, ClassicGroup):
            if key.kind is TimerKind.JOIN:
                self.classic.on_join_timer(group, now_ms)
            elif key.kind is TimerKind.SYNC:
                self.classic.on_sync_timer(group, now_ms)
            else:
                self.classic.on_member_timer(group, key, now_ms)
        if group is not None:
            self._forget_if_unused(group)


def _committed_partition(record: OffsetsRecord) -> TopicPartition:
    key = record.key
    assert isinstance(key, OffsetCommitKey)
    return TopicPartition(key.topic, key.partition)


def _is_empty(group: Group) -> bool:
    if isinstance(group, ClassicGroup):
        return group.state is ClassicState.EMPTY and not group.pending_members
    return not group.members


def _classic_subscribed(group: ClassicGroup) -> frozenset[str] | None:
    """The topics a classic "consumer" group's members subscribe to; None when a member's
    subscription cannot be read (then nothing of the group expires)."""
    topics: set[str] = set()
    for member in group.members.values():
        try:
            topics.update(decode_subscription(member.metadata_for(group.protocol_name)).topics)
        except ZlogError:
            return None
    return frozenset(topics)
