"""Offsets-log record codecs: Kafka's byte layout, round trips, versions and malformed input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zlog.errors import ErrorCode, ZlogError
from zlog.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    OffsetsRecord,
    RecordKey,
    RecordValue,
    UnknownRecordTypeError,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)
from zlog.groups.server_side.group import MemberState
from zlog.groups.server_side.records import (
    ConsumerGroupKey,
    ConsumerMemberKey,
    ConsumerRecordType,
    CurrentAssignmentValue,
    EpochValue,
    MemberValue,
    SubscribedPartitionsValue,
    TargetValue,
)
from zlog.types import TopicPartition

MEMBER = MemberMetadata("c-1", "inst-a", "client", "/10.0.0.1", 300_000, 10_000, b"sub", b"asg")
GROUP = GroupMetadataValue("consumer", 7, "range", "c-1", 1_700_000_000_000, (MEMBER,))


def test_offset_commit_key_is_kafkas_layout() -> None:
    assert encode_key(OffsetCommitKey("g", "t", 3)) == (
        b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    )
    assert encode_key(GroupMetadataKey("g")) == b"\x00\x02\x00\x01g"


def test_offset_commit_value_v3_is_kafkas_layout() -> None:
    value = OffsetCommitValue(offset=42, commit_timestamp_ms=5, leader_epoch=2, metadata="m")
    assert encode_value(value) == struct.pack(">hqih1sq", 3, 42, 2, 1, b"m", 5)


def test_legacy_key_type_zero_reads_as_an_offset_commit() -> None:
    assert decode_key(b"\x00\x00\x00\x01g\x00\x01t\x00\x00\x00\x03") == OffsetCommitKey("g", "t", 3)


@pytest.mark.parametrize(
    "value",
    [
        OffsetCommitValue(10, 99),
        OffsetCommitValue(10, 99, leader_epoch=4, metadata="ünï"),
        OffsetCommitValue(10, 99, metadata="x", expire_timestamp_ms=1234),
    ],
)
def test_offset_commit_values_round_trip(value: OffsetCommitValue) -> None:
    key = OffsetCommitKey("g", "t", 0)
    assert decode_value(key, encode_value(value)) == value


def test_version_one_carries_the_expire_time_and_no_leader_epoch() -> None:
    raw = encode_value(OffsetCommitValue(10, 99, leader_epoch=4, expire_timestamp_ms=7))
    assert raw is not None and raw[:2] == b"\x00\x01"
    decoded = decode_value(OffsetCommitKey("g", "t", 0), raw)
    assert decoded == OffsetCommitValue(10, 99, -1, "", 7)


def test_group_metadata_round_trips_with_null_fields_and_members() -> None:
    empty = GroupMetadataValue("consumer", 0, None, None, 1, ())
    for value in (GROUP, empty):
        assert decode_value(GroupMetadataKey("g"), encode_value(value)) == value


def test_tombstones_are_null_values() -> None:
    record = OffsetsRecord(GroupMetadataKey("g"), None)
    assert encode_record(record) == (b"\x00\x02\x00\x01g", None)
    assert decode_record(*encode_record(record)) == record


def test_trailing_bytes_of_a_newer_writer_are_ignored() -> None:
    raw = encode_value(GROUP)
    assert raw is not None
    assert decode_value(GroupMetadataKey("g"), raw + b"future field") == GROUP


def test_unknown_key_type_is_its_own_error() -> None:
    with pytest.raises(UnknownRecordTypeError) as caught:
        decode_key(b"\x00\x63\x00\x01g")
    assert caught.value.record_type == 99


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        (b"\x00", None, "needs 2 bytes"),
        (b"\x00\x02\x00\x05g", None, "claims 5 bytes"),
        (b"\x00\x02\x00\x01g!", None, "trailing"),
        (b"\x00\x02\x00\x01\xff", None, "not UTF-8"),
        (b"\x00\x02\x00\x01g", b"\x00\x09", "version 9"),
        (b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00", b"\x00\x03\x00", "needs 8 bytes"),
        (b"\x00\x02\x00\x01g", b"\x00\x03\xff\xff", "null where a string is required"),
        (b"\x00\x02\x00\x01g",
         b"\x00\x03\x00\x01c\x00\x00\x00\x01\xff\xff\xff\xff" + b"\x00" * 8 + b"\x7f\xff\xff\xff",
         "members"),
    ],
)
def test_malformed_records_raise_corrupt_message(key: bytes, value: bytes | None,
                                                 says: str) -> None:
    with pytest.raises(ZlogError) as caught:
        decode_record(key, value)
    assert caught.value.code == ErrorCode.CORRUPT_MESSAGE
    assert says in caught.value.message


def test_values_out_of_range_are_refused_when_encoding() -> None:
    with pytest.raises(ZlogError) as caught:
        encode_key(OffsetCommitKey("g", "t", 2**31))
    assert caught.value.code == ErrorCode.INVALID_REQUEST


texts = st.text(max_size=20)


@given(texts, texts, st.integers(0, 2**31 - 1), st.integers(-1, 2**63 - 1), texts)
def test_any_commit_round_trips(group: str, topic: str, partition: int, offset: int,
                                metadata: str) -> None:
    record = OffsetsRecord(OffsetCommitKey(group, topic, partition),
                           OffsetCommitValue(offset, 1, 0, metadata))
    assert decode_record(*encode_record(record)) == record


SERVER_SIDE_RECORDS = [
    (ConsumerGroupKey(ConsumerRecordType.GROUP_EPOCH, "g"), EpochValue(4)),
    (ConsumerGroupKey(ConsumerRecordType.SUBSCRIBED_PARTITIONS, "g"),
     SubscribedPartitionsValue((("a", 3), ("b", 1)))),
    (ConsumerMemberKey(ConsumerRecordType.MEMBER, "g", "m"),
     MemberValue("inst", "client", "/10.0.0.1", ("a", "b"), 30_000)),
    (ConsumerGroupKey(ConsumerRecordType.ASSIGNMENT_EPOCH, "g"), EpochValue(3)),
    (ConsumerMemberKey(ConsumerRecordType.TARGET, "g", "m"),
     TargetValue((TopicPartition("a", 0), TopicPartition("b", 0)))),
    (ConsumerMemberKey(ConsumerRecordType.CURRENT_ASSIGNMENT, "g", "m"),
     CurrentAssignmentValue(3, 2, MemberState.UNREVOKED, ((TopicPartition("a", 0), 2),),
                            ((TopicPartition("a", 2), 1), (TopicPartition("b", 0), 3)))),
]


@pytest.mark.parametrize(("key", "value"), SERVER_SIDE_RECORDS)
def test_server_side_records_round_trip(key: RecordKey, value: RecordValue) -> None:
    record = OffsetsRecord(key, value)
    raw_key, raw_value = encode_record(record)
    assert raw_key[:2] == int(key.record_type).to_bytes(2, "big")  # type: ignore[union-attr]
    assert decode_record(raw_key, raw_value) == record
    assert decode_record(raw_key, None) == OffsetsRecord(key, None)


def test_malformed_server_side_records_are_refused() -> None:
    key = ConsumerMemberKey(ConsumerRecordType.CURRENT_ASSIGNMENT, "g", "m")
    raw_key = encode_key(key)
    bad_state = struct.pack(">hiib", 0, 1, 0, 7) + b"\x00" * 8
    uneven = struct.pack(">hiib", 0, 1, 0, 0) + struct.pack(">ih1siii", 1, 1, b"a", 1, 0, 0)
    for value, says in ((bad_state, "member state 7"), (uneven, "1 partitions of 'a' but 0")):
        with pytest.raises(ZlogError) as caught:
            decode_record(raw_key, value)
        assert caught.value.code == ErrorCode.CORRUPT_MESSAGE and says in caught.value.message
