"""Key and value codecs of the compacted `__consumer_offsets` topic: what a coordinator writes.

A record's key starts with an int16 type, its value with an int16 version, and a null value is
a tombstone (compaction then drops the key). Types 0-2 are byte-identical to Kafka's, so a
Kafka tool reading the topic understands zlog's commits and classic groups. Evolution rule: a
value version only ever appends fields, and a reader ignores trailing bytes it does not know;
an unknown key type raises `UnknownRecordTypeError` so a loader can skip it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final, TypeAlias

from zlog.errors import ErrorCode, ZlogError
from zlog.groups.server_side.records import (
    ConsumerKey,
    ConsumerRecordType,
    ConsumerValue,
    read_consumer_key,
    read_consumer_value,
    write_consumer_key,
    write_consumer_value,
)
from zlog.transport.kafka_codec import CORRUPT, KafkaReader, KafkaWriter
from zlog.transport.wire import Buffer
from zlog.types import NO_LEADER_EPOCH


class RecordType(IntEnum):
    """The int16 at the front of every key (Kafka's key versions double as record kinds);
    types 3-8 are the server-side groups' (`server_side/records.py`)."""

    OFFSET_COMMIT_LEGACY = 0
    OFFSET_COMMIT = 1
    GROUP_METADATA = 2


JOIN_COMPLETE_HEADER: Final = ("zs", b"CR")
"""Record header on the GroupMetadata written when a join completes: the generation it names
was handed out, so a coordinator that loads it must not hand that generation out again."""

OFFSET_COMMIT_VALUE_VERSION: Final = 3
OFFSET_COMMIT_VALUE_WITH_EXPIRY: Final = 1
GROUP_METADATA_VALUE_VERSION: Final = 3


class UnknownRecordTypeError(ZlogError):
    """A key type this version of zlog does not know: written by a newer one, skipped on load."""

    def __init__(self, record_type: int) -> None:
        super().__init__(CORRUPT, f"unknown offsets-log key type {record_type}")
        self.record_type = record_type


@dataclass(frozen=True, slots=True, order=True)
class OffsetCommitKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True, order=True)
class GroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    commit_timestamp_ms: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    expire_timestamp_ms: int | None = None
    """Only version 1 carries it (an explicit retention from OffsetCommit v2-v4)."""


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp_ms: int
    members: tuple[MemberMetadata, ...] = ()


RecordKey: TypeAlias = OffsetCommitKey | GroupMetadataKey | ConsumerKey
RecordValue: TypeAlias = OffsetCommitValue | GroupMetadataValue | ConsumerValue


@dataclass(frozen=True, slots=True)
class OffsetsRecord:
    """One record of the offsets log; `value` None is a tombstone."""

    key: RecordKey
    value: RecordValue | None
    headers: tuple[tuple[str, bytes], ...] = field(default=())

    @property
    def is_join_complete(self) -> bool:
        return JOIN_COMPLETE_HEADER in self.headers


def encode_key(key: RecordKey) -> bytes:
    out = KafkaWriter(ErrorCode.INVALID_REQUEST)
    if isinstance(key, OffsetCommitKey):
        out.int16(RecordType.OFFSET_COMMIT, "key type")
        out.string(key.group_id, "group id")
        out.string(key.topic, "topic")
        out.int32(key.partition, "partition")
    elif isinstance(key, GroupMetadataKey):
        out.int16(RecordType.GROUP_METADATA, "key type")
        out.string(key.group_id, "group id")
    else:
        write_consumer_key(out, key)
    return out.done()


def decode_key(data: Buffer) -> RecordKey:
    reader = KafkaReader(data, "offsets-log key")
    record_type = reader.int16()
    if record_type in (RecordType.OFFSET_COMMIT_LEGACY, RecordType.OFFSET_COMMIT):
        key: RecordKey = OffsetCommitKey(
            reader.string("group id"), reader.string("topic"), reader.int32()
        )
    elif record_type == RecordType.GROUP_METADATA:
        key = GroupMetadataKey(reader.string("group id"))
    elif record_type in ConsumerRecordType._value2member_map_:
        key = read_consumer_key(reader, ConsumerRecordType(record_type))
    else:
        raise UnknownRecordTypeError(record_type)
    reader.expect_end()
    return key


def encode_value(value: RecordValue | None) -> bytes | None:
    if value is None:
        return None
    out = KafkaWriter(ErrorCode.INVALID_REQUEST)
    if isinstance(value, OffsetCommitValue):
        _write_offset_commit(out, value)
    elif isinstance(value, GroupMetadataValue):
        _write_group_metadata(out, value)
    else:
        write_consumer_value(out, value)
    return out.done()


def _write_offset_commit(out: KafkaWriter, value: OffsetCommitValue) -> None:
    if value.expire_timestamp_ms is not None:
        out.int16(OFFSET_COMMIT_VALUE_WITH_EXPIRY, "version")
        out.int64(value.offset, "offset")
        out.string(value.metadata, "metadata")
        out.int64(value.commit_timestamp_ms, "commit timestamp")
        out.int64(value.expire_timestamp_ms, "expire timestamp")
        return
    out.int16(OFFSET_COMMIT_VALUE_VERSION, "version")
    out.int64(value.offset, "offset")
    out.int32(value.leader_epoch, "leader epoch")
    out.string(value.metadata, "metadata")
    out.int64(value.commit_timestamp_ms, "commit timestamp")


def _write_group_metadata(out: KafkaWriter, value: GroupMetadataValue) -> None:
    out.int16(GROUP_METADATA_VALUE_VERSION, "version")
    out.string(value.protocol_type, "protocol type")
    out.int32(value.generation, "generation")
    out.string(value.protocol_name, "protocol")
    out.string(value.leader_id, "leader")
    out.int64(value.state_timestamp_ms, "state timestamp")
    out.array(len(value.members), "members")
    for member in value.members:
        out.string(member.member_id, "member id")
        out.string(member.group_instance_id, "group instance id")
        out.string(member.client_id, "client id")
        out.string(member.client_host, "client host")
        out.int32(member.rebalance_timeout_ms, "rebalance timeout")
        out.int32(member.session_timeout_ms, "session timeout")
        out.bytes_(member.subscription, "subscription")
        out.bytes_(member.assignment, "assignment")


def decode_value(key: RecordKey, data: Buffer | None) -> RecordValue | None:
    """The value of `key`'s record; None for a tombstone. Trailing bytes of a known version are
    ignored (fields a newer writer appended)."""
    if data is None:
        return None
    if isinstance(key, OffsetCommitKey):
        return _read_offset_commit(KafkaReader(data, f"offset commit of {key}"))
    if isinstance(key, GroupMetadataKey):
        return _read_group_metadata(KafkaReader(data, f"group metadata of {key.group_id!r}"))
    return read_consumer_value(KafkaReader(data, f"{key.record_type.name.lower()} of {key}"), key)


def _read_offset_commit(reader: KafkaReader) -> OffsetCommitValue:
    version = reader.int16()
    if not 0 <= version <= OFFSET_COMMIT_VALUE_VERSION:
        raise reader.fail(f"offset commit value version {version} is not 0..3")
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else NO_LEADER_EPOCH
    metadata = reader.string("metadata")
    commit_timestamp_ms = reader.int64()
    expire_timestamp_ms = reader.int64() if version == 1 else None
    return OffsetCommitValue(offset, commit_timestamp_ms, leader_epoch, metadata,
                             expire_timestamp_ms)


def _read_group_metadata(reader: KafkaReader) -> GroupMetadataValue:
    version = reader.int16()
    if not 0 <= version <= GROUP_METADATA_VALUE_VERSION:
        raise reader.fail(f"group metadata value version {version} is not 0..3")
    protocol_type = reader.string("protocol type")
    generation = reader.int32()
    protocol_name = reader.nullable_string("protocol")
    leader_id = reader.nullable_string("leader")
    state_timestamp_ms = reader.int64() if version >= 2 else -1
    members = []
    for _ in range(reader.array(1, "members")):
        member_id = reader.string("member id")
        instance_id = reader.nullable_string("group instance id") if version >= 3 else None
        client_id = reader.string("client id")
        client_host = reader.string("client host")
        rebalance_timeout_ms = reader.int32() if version >= 1 else -1
        session_timeout_ms = reader.int32()
        if rebalance_timeout_ms == -1:
            rebalance_timeout_ms = session_timeout_ms
        members.append(MemberMetadata(
            member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
            session_timeout_ms, reader.bytes_("subscription"), reader.bytes_("assignment"),
        ))
    return GroupMetadataValue(protocol_type, generation, protocol_name, leader_id,
                              state_timestamp_ms, tuple(members))


def encode_record(record: OffsetsRecord) -> tuple[bytes, bytes | None]:
    return encode_key(record.key), encode_value(record.value)


def decode_record(
    key: Buffer, value: Buffer | None, headers: tuple[tuple[str, bytes], ...] = ()
) -> OffsetsRecord:
    decoded_key = decode_key(key)
    return OffsetsRecord(decoded_key, decode_value(decoded_key, value), headers)
