"""Offsets-log records of server-side groups (key types 3-8), and the group <-> records mapping.

The shapes follow Kafka 4's coordinator records, except that topics are named (zlog's metadata
has no topic ids yet), so these types are zlog's own. A server-side group is persisted as the
set of its current records: `group_level_records` and `member_records` give them for a group in
memory and `group_from_records` rebuilds the group from them, so the coordinator writes, after
each operation, exactly the records that differ, and a replay of the log gives back the group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from itertools import groupby
from typing import Final, TypeAlias

from zlog.groups.server_side.group import ConsumerGroup, ConsumerMember, MemberState
from zlog.transport.kafka_codec import KafkaReader, KafkaWriter
from zlog.types import TopicPartition


class ConsumerRecordType(IntEnum):
    GROUP_EPOCH = 3
    SUBSCRIBED_PARTITIONS = 4
    MEMBER = 5
    ASSIGNMENT_EPOCH = 6
    TARGET = 7
    CURRENT_ASSIGNMENT = 8


GROUP_TYPES: Final = frozenset({ConsumerRecordType.GROUP_EPOCH,
                                ConsumerRecordType.SUBSCRIBED_PARTITIONS,
                                ConsumerRecordType.ASSIGNMENT_EPOCH})
VALUE_VERSION: Final = 0
_STATE_CODES: Final = {MemberState.STABLE: 0, MemberState.UNREVOKED: 1,
                       MemberState.UNRELEASED: 2}


@dataclass(frozen=True, slots=True, order=True)
class ConsumerGroupKey:
    record_type: ConsumerRecordType
    group_id: str


@dataclass(frozen=True, slots=True, order=True)
class ConsumerMemberKey:
    record_type: ConsumerRecordType
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class EpochValue:
    """Type 3 (the group epoch) and type 6 (the epoch of the current target)."""

    epoch: int


@dataclass(frozen=True, slots=True)
class SubscribedPartitionsValue:
    counts: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class MemberValue:
    group_instance_id: str | None
    client_id: str
    client_host: str
    topics: tuple[str, ...]
    rebalance_timeout_ms: int


@dataclass(frozen=True, slots=True)
class TargetValue:
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    epoch: int
    previous_epoch: int
    state: MemberState
    assigned: tuple[tuple[TopicPartition, int], ...]
    """(partition, the assignment epoch it was given in)."""
    pending_revocation: tuple[tuple[TopicPartition, int], ...]


ConsumerKey: TypeAlias = ConsumerGroupKey | ConsumerMemberKey
ConsumerValue: TypeAlias = (EpochValue | SubscribedPartitionsValue | MemberValue | TargetValue
                            | CurrentAssignmentValue)


# --- codecs ---------------------------------------------------------------------------------


def write_consumer_key(out: KafkaWriter, key: ConsumerKey) -> None:
    out.int16(key.record_type, "key type")
    out.string(key.group_id, "group id")
    if isinstance(key, ConsumerMemberKey):
        out.string(key.member_id, "member id")


def read_consumer_key(reader: KafkaReader, record_type: ConsumerRecordType) -> ConsumerKey:
    group_id = reader.string("group id")
    if record_type in GROUP_TYPES:
        return ConsumerGroupKey(record_type, group_id)
    return ConsumerMemberKey(record_type, group_id, reader.string("member id"))


def _write_epoched(out: KafkaWriter, pairs: Iterable[tuple[TopicPartition, int]]) -> None:
    by_topic = [(topic, list(items))
                for topic, items in groupby(sorted(pairs), key=lambda pair: pair[0].topic)]
    out.array(len(by_topic), "topics")
    for topic, items in by_topic:
        out.string(topic, "topic")
        out.int32_array((tp.partition for tp, _ in items), "partitions")
        out.int32_array((epoch for _, epoch in items), "assignment epochs")


def _read_epoched(reader: KafkaReader) -> tuple[tuple[TopicPartition, int], ...]:
    pairs: list[tuple[TopicPartition, int]] = []
    for _ in range(reader.array(10, "topics")):
        topic = reader.string("topic")
        numbers = reader.int32_array("partitions")
        epochs = reader.int32_array("assignment epochs")
        if len(epochs) != len(numbers):
            raise reader.fail(f"{len(numbers)} partitions of {topic!r} but {len(epochs)} epochs")
        pairs.extend((TopicPartition(topic, p), e) for p, e in zip(numbers, epochs, strict=True))
    return tuple(pairs)


def write_consumer_value(out: KafkaWriter, value: ConsumerValue) -> None:
    out.int16(VALUE_VERSION, "version")
    if isinstance(value, EpochValue):
        out.int32(value.epoch, "epoch")
    elif isinstance(value, SubscribedPartitionsValue):
        out.array(len(value.counts), "topics")
        for topic, count in value.counts:
            out.string(topic, "topic")
            out.int32(count, "partitions")
    elif isinstance(value, MemberValue):
        out.string(value.group_instance_id, "group instance id")
        out.string(value.client_id, "client id")
        out.string(value.client_host, "client host")
        out.string_array(value.topics, "topics")
        out.int32(value.rebalance_timeout_ms, "rebalance timeout")
    elif isinstance(value, TargetValue):
        _write_epoched(out, ((tp, 0) for tp in value.partitions))
    else:
        out.int32(value.epoch, "member epoch")
        out.int32(value.previous_epoch, "previous member epoch")
        out.int8(_STATE_CODES[value.state], "member state")
        _write_epoched(out, value.assigned)
        _write_epoched(out, value.pending_revocation)


def read_consumer_value(reader: KafkaReader, key: ConsumerKey) -> ConsumerValue:
    version = reader.int16()
    if version < VALUE_VERSION:
        raise reader.fail(f"value version {version} is negative")
    kind = key.record_type
    if kind in (ConsumerRecordType.GROUP_EPOCH, ConsumerRecordType.ASSIGNMENT_EPOCH):
        return EpochValue(reader.int32())
    if kind == ConsumerRecordType.SUBSCRIBED_PARTITIONS:
        return SubscribedPartitionsValue(tuple(
            (reader.string("topic"), reader.int32()) for _ in range(reader.array(6, "topics"))))
    if kind == ConsumerRecordType.MEMBER:
        return MemberValue(reader.nullable_string("group instance id"),
                           reader.string("client id"), reader.string("client host"),
                           tuple(reader.string_array("topics")), reader.int32())
    if kind == ConsumerRecordType.TARGET:
        return TargetValue(tuple(tp for tp, _ in _read_epoched(reader)))
    epoch, previous_epoch, state_code = reader.int32(), reader.int32(), reader.int8()
    states = {code: state for state, code in _STATE_CODES.items()}
    if state_code not in states:
        raise reader.fail(f"member state {state_code} is not 0..2")
    return CurrentAssignmentValue(epoch, previous_epoch, states[state_code],
                                  _read_epoched(reader), _read_epoched(reader))


# --- group <-> records ----------------------------------------------------------------------


def key_order(key: ConsumerKey) -> tuple[int, str, str]:
    return (int(key.record_type), key.group_id,
            key.member_id if isinstance(key, ConsumerMemberKey) else "")


def group_level_records(group: ConsumerGroup) -> dict[ConsumerKey, ConsumerValue]:
    gid = group.group_id
    kinds = ConsumerRecordType
    return {
        ConsumerGroupKey(kinds.GROUP_EPOCH, gid): EpochValue(group.group_epoch),
        ConsumerGroupKey(kinds.SUBSCRIBED_PARTITIONS, gid): SubscribedPartitionsValue(
            tuple(sorted(group.subscribed_partitions.items()))),
        ConsumerGroupKey(kinds.ASSIGNMENT_EPOCH, gid): EpochValue(group.assignment_epoch),
    }


def member_records(group: ConsumerGroup, member_id: str) -> dict[ConsumerKey, ConsumerValue]:
    """The records of one member (none if it is gone)."""
    gid = group.group_id
    kinds = ConsumerRecordType
    records: dict[ConsumerKey, ConsumerValue] = {}
    m = group.members.get(member_id)
    if m is not None:
        records[ConsumerMemberKey(kinds.MEMBER, gid, member_id)] = MemberValue(
            m.group_instance_id, m.client_id, m.client_host, tuple(sorted(m.topics)),
            m.rebalance_timeout_ms)
        records[ConsumerMemberKey(kinds.CURRENT_ASSIGNMENT, gid, member_id)] = (
            CurrentAssignmentValue(m.epoch, m.previous_epoch, m.state,
                                   tuple(sorted(m.assigned.items())),
                                   tuple(sorted(m.pending_revocation.items()))))
    target = group.target.get(member_id)
    if target is not None:
        records[ConsumerMemberKey(kinds.TARGET, gid, member_id)] = TargetValue(
            tuple(sorted(target)))
    return records


def group_from_records(group_id: str, records: Mapping[ConsumerKey, ConsumerValue],
                       ) -> ConsumerGroup:
    group = ConsumerGroup(group_id)
    for key, value in sorted(records.items(), key=lambda item: key_order(item[0])):
        if isinstance(key, ConsumerGroupKey):
            if isinstance(value, EpochValue) and key.record_type == (
                ConsumerRecordType.GROUP_EPOCH
            ):
                group.group_epoch = value.epoch
            elif isinstance(value, EpochValue):
                group.assignment_epoch = value.epoch
            elif isinstance(value, SubscribedPartitionsValue):
                group.subscribed_partitions = dict(value.counts)
        elif isinstance(value, MemberValue):
            group.members[key.member_id] = ConsumerMember(
                key.member_id, value.group_instance_id, frozenset(value.topics),
                value.rebalance_timeout_ms, value.client_id, value.client_host)
            if value.group_instance_id is not None:
                group.static_members[value.group_instance_id] = key.member_id
    for key, value in sorted(records.items(), key=lambda item: key_order(item[0])):
        if not isinstance(key, ConsumerMemberKey):
            continue
        if isinstance(value, TargetValue):
            group.target[key.member_id] = set(value.partitions)
        elif isinstance(value, CurrentAssignmentValue) and key.member_id in group.members:
            member = group.members[key.member_id]
            member.epoch, member.previous_epoch = value.epoch, value.previous_epoch
            member.state = value.state
            member.assigned = dict(value.assigned)
            member.pending_revocation = dict(value.pending_revocation)
            for tp in member.holds():
                group.owner[tp] = key.member_id
    return group


def changed_records(
    before: Mapping[ConsumerKey, ConsumerValue], after: Mapping[ConsumerKey, ConsumerValue],
) -> list[tuple[ConsumerKey, ConsumerValue | None]]:
    """What to write to go from `before` to `after`: tombstones for keys that went away (member
    records before group records), then the new or changed values."""
    gone = sorted((k for k in before if k not in after),
                  key=lambda k: (-int(k.record_type), key_order(k)))
    upserts = sorted((k for k, v in after.items() if before.get(k) != v), key=key_order)
    return [(k, None) for k in gone] + [(k, after[k]) for k in upserts]
