"""OffsetCommit v0's request and response bodies: fixed structs instead of JSON.

A consumer commits after every poll (or every record), so OffsetCommit is the one group request
on a data path's scale: its JSON body cost the coordinator and the committing client more than
anything else per commit (docs/benchmarks.md, "Consumer groups"). Layout (docs/protocol.md,
"OffsetCommit v0"), big-endian, strings as `>H` length + UTF-8:

    request:  group_id, generation i32, retention_ms i64 (-1: the broker's default),
              member_id, has_instance_id i8 [group_instance_id], entry_count u32,
              entry_count x (topic, partition i32, offset i64, leader_epoch i32, metadata)
    response: error_code i16, entry_count u32, entry_count x (topic, partition i32, error i16)

Every count and length is checked against the bytes present (`Cursor`), and a malformed body
raises `ZlogError` with the caller's code, as every other body does.
"""

from __future__ import annotations

import struct
from typing import Final

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.groups import (
    OffsetCommitRequestV0,
    OffsetCommitResponseV0,
    PartitionCommit,
)
from zlog.transport.wire import Cursor, encode_text
from zlog.types import TopicPartition

NO_RETENTION: Final = -1
"""retention_ms on the wire when the request names none (the broker's default applies)."""

_TEXT_LENGTH: Final = struct.Struct(">H")
_REQUEST_FIXED: Final = struct.Struct(">iq")  # generation, retention_ms
_REQUEST_FIXED_THEN_TEXT: Final = struct.Struct(">iqH")  # ... and member_id's length
_FLAG_THEN_COUNT: Final = struct.Struct(">bI")  # has_instance_id, then (without one) the count
_FLAG: Final = struct.Struct(">b")
_COUNT: Final = struct.Struct(">I")
_COMMIT_ENTRY: Final = struct.Struct(">iqiH")  # partition, offset, leader_epoch, metadata len
_RESPONSE_FIXED: Final = struct.Struct(">hI")  # error_code, entry_count
_RESULT_ENTRY: Final = struct.Struct(">ih")  # partition, error_code

# The fewest bytes an entry takes (an empty topic and metadata): bounds a claimed count.
_COMMIT_ENTRY_BYTES_MIN: Final = _TEXT_LENGTH.size + _COMMIT_ENTRY.size
_RESULT_ENTRY_BYTES_MIN: Final = _TEXT_LENGTH.size + _RESULT_ENTRY.size

_KNOWN_ERROR_CODES: Final = {int(code): code for code in ErrorCode}


def _text(value: str, field_name: str) -> bytes:
    raw = encode_text(value, field_name, code=ErrorCode.INVALID_REQUEST)
    return _TEXT_LENGTH.pack(len(raw)) + raw


def _pack(layout: struct.Struct, *values: int) -> bytes:
    """struct.pack, with a field its wire type cannot hold refused as INVALID_REQUEST."""
    try:
        return layout.pack(*values)
    except struct.error as error:
        raise ZlogError(ErrorCode.INVALID_REQUEST, f"OffsetCommit: {error}") from None


# ---------------------------------------------------------------------------------- request


def encode_offset_commit_request(msg: OffsetCommitRequestV0) -> bytes:
    retention_ms = NO_RETENTION if msg.retention_ms is None else msg.retention_ms
    if retention_ms < NO_RETENTION:
        raise ZlogError(ErrorCode.INVALID_REQUEST, f"retention_ms {retention_ms} is negative")
    parts = [_text(msg.group_id, "group_id"), _pack(_REQUEST_FIXED, msg.generation, retention_ms),
             _text(msg.member_id, "member_id")]
    if msg.group_instance_id is None:
        parts.append(_FLAG.pack(0))
    else:
        parts += (_FLAG.pack(1), _text(msg.group_instance_id, "group_instance_id"))
    parts.append(_pack(_COUNT, len(msg.offsets)))
    for tp, commit in msg.offsets:
        metadata = encode_text(commit.metadata, "metadata", code=ErrorCode.INVALID_REQUEST)
        parts += (_text(tp.topic, "topic"),
                  _pack(_COMMIT_ENTRY, tp.partition, commit.offset, commit.leader_epoch,
                        len(metadata)), metadata)
    return b"".join(parts)


def decode_offset_commit_request(body: memoryview, code: ErrorCode) -> OffsetCommitRequestV0:
    well_formed = _decode_well_formed(bytes(body))
    if well_formed is not None:
        return well_formed
    return _decode_checked(body, code)


def _decode_well_formed(data: bytes) -> OffsetCommitRequestV0 | None:
    """A body without an instance id in one pass of slices and unpacks (a commit's decoding
    was a fifth of a coordinator's work per commit); None for anything else or anything
    malformed, which `_decode_checked` then decodes or refuses with the reason.

    It accepts exactly what the checked decoder accepts: a slice past the end shortens
    silently, but the next unpack then fails and the last field must end at the body's end.
    """
    try:
        end = _TEXT_LENGTH.size + _TEXT_LENGTH.unpack_from(data)[0]
        group_id = data[_TEXT_LENGTH.size:end].decode()
        generation, retention_ms, member_bytes = _REQUEST_FIXED_THEN_TEXT.unpack_from(data, end)
        start = end + _REQUEST_FIXED_THEN_TEXT.size
        end = start + member_bytes
        member_id = data[start:end].decode()
        has_instance_id, claimed = _FLAG_THEN_COUNT.unpack_from(data, end)
        if has_instance_id != 0:
            return None
        end += _FLAG_THEN_COUNT.size
        offsets = []
        for _ in range(claimed):
            start = end + _TEXT_LENGTH.size
            end = start + _TEXT_LENGTH.unpack_from(data, end)[0]
            topic = data[start:end].decode()
            partition, offset, leader_epoch, metadata_bytes = _COMMIT_ENTRY.unpack_from(data, end)
            start = end + _COMMIT_ENTRY.size
            end = start + metadata_bytes
            if partition < 0:
                return None
            offsets.append((TopicPartition(topic, partition),
                            PartitionCommit(offset, leader_epoch, data[start:end].decode())))
    except (struct.error, UnicodeDecodeError):
        return None
    if end != len(data) or retention_ms < NO_RETENTION:
        return None
    return OffsetCommitRequestV0(group_id, tuple(offsets), generation, member_id,
                               None, None if retention_ms == NO_RETENTION else retention_ms)


def _decode_checked(body: memoryview, code: ErrorCode) -> OffsetCommitRequestV0:
    cursor = Cursor(body, code, "OffsetCommitRequestV0")
    group_id = cursor.short_text("group_id")
    generation, retention_ms = cursor.unpack(_REQUEST_FIXED)
    if retention_ms < NO_RETENTION:
        raise cursor.fail(f"retention_ms {retention_ms} is negative")
    member_id = cursor.short_text("member_id")
    (has_instance_id,) = cursor.unpack(_FLAG)
    if has_instance_id not in (0, 1):
        raise cursor.fail(f"group_instance_id flag {has_instance_id} is neither 0 nor 1")
    instance_id = cursor.short_text("group_instance_id") if has_instance_id else None
    (claimed,) = cursor.unpack(_COUNT)
    offsets = []
    for _ in range(cursor.count(claimed, _COMMIT_ENTRY_BYTES_MIN, "entry_count")):
        topic = cursor.short_text("topic")
        partition, offset, leader_epoch, metadata_bytes = cursor.unpack(_COMMIT_ENTRY)
        if partition < 0:
            raise cursor.fail(f"partition {partition} is negative")
        metadata = cursor.text(metadata_bytes, "metadata")
        offsets.append((TopicPartition(topic, partition),
                        PartitionCommit(offset, leader_epoch, metadata)))
    cursor.expect_end()
    return OffsetCommitRequestV0(group_id, tuple(offsets), generation, member_id,
                               instance_id, None if retention_ms == NO_RETENTION else retention_ms)


# ---------------------------------------------------------------------------------- response


def encode_offset_commit_response(msg: OffsetCommitResponseV0) -> bytes:
    parts = [_RESPONSE_FIXED.pack(msg.error_code, len(msg.partitions))]
    for tp, error in msg.partitions:
        parts += (_text(tp.topic, "topic"), _pack(_RESULT_ENTRY, tp.partition, error))
    return b"".join(parts)


def decode_offset_commit_response(body: memoryview, code: ErrorCode) -> OffsetCommitResponseV0:
    cursor = Cursor(body, code, "OffsetCommitResponseV0")
    error, claimed = cursor.unpack(_RESPONSE_FIXED)
    results = []
    for _ in range(cursor.count(claimed, _RESULT_ENTRY_BYTES_MIN, "entry_count")):
        topic = cursor.short_text("topic")
        partition, partition_error = cursor.unpack(_RESULT_ENTRY)
        results.append((TopicPartition(topic, partition), _known(partition_error, cursor)))
    cursor.expect_end()
    return OffsetCommitResponseV0(_known(error, cursor), tuple(results))


def _known(error_code: int, cursor: Cursor) -> ErrorCode:
    """A client must not turn a number it does not know into a code it acts on."""
    known = _KNOWN_ERROR_CODES.get(error_code)
    if known is None:
        raise cursor.fail(f"error_code {error_code} is not a known error code")
    return known
