"""Produce v0 and Fetch v0/v1 bodies: fixed structs, with record batches riding as their own
frames.

These are the data path (Fetch v1 is a follower's fetch), so their bodies are structs rather
than JSON (docs/protocol.md, "Produce v0" and "Fetch v0"), and batches are never copied: a
decoded entry holds memoryviews of the received frames, an encoded message lists the caller's
buffers as frames.

Every count read off the wire is checked against the bytes (or frames) actually present before
it is used, and every malformed body raises `ZlogError` with the caller's code.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final, TypeVar

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.data import (
    FetchEntry,
    FetchRequestV0,
    FetchRequestV1,
    FetchRequestV2,
    FetchResponseV0,
    FetchResponseV1,
    FetchResponseV2,
    FetchResult,
    ProduceEntry,
    ProduceRequestV0,
    ProduceResponseV0,
    ProduceResult,
    ReplicaFetchEntry,
    ReplicaFetchResult,
)
from zlog.transport.wire import Buffer, Cursor, clip_message, encode_text
from zlog.types import NO_TOPIC_ID

ConsumerFetch = TypeVar("ConsumerFetch", FetchRequestV0, FetchRequestV2)

_PRODUCE_REQUEST: Final = struct.Struct(">hiI")  # acks, timeout_ms, entry_count
_PRODUCE_REQUEST_ENTRY: Final = struct.Struct(">iIH")  # partition, batch_count, topic_length
_PRODUCE_RESPONSE_ENTRY: Final = struct.Struct(
    ">ihqqqH"  # partition, error_code, base_offset, log_append_time_ms, log_start_offset,
)  # message_length; then message bytes, then topic as >H + bytes
_FETCH_REQUEST: Final = struct.Struct(">iiiiI")  # replica_id, max_wait_ms, min_bytes,
# max_bytes, entry_count
_FETCH_REQUEST_ENTRY: Final = struct.Struct(">iqiH")  # partition, fetch_offset,
# partition_max_bytes, topic_length; then topic bytes
_FETCH_RESPONSE_ENTRY: Final = struct.Struct(
    ">ihqqqIH"  # partition, error_code, high_watermark, last_stable_offset, log_start_offset,
)  # frame_count, message_length; then message bytes, then topic as >H + bytes
_COUNT: Final = struct.Struct(">I")
_TEXT_LENGTH: Final = struct.Struct(">H")

# The fewest bytes an entry can take, which bounds a claimed entry count.
_PRODUCE_RESPONSE_ENTRY_BYTES_MIN: Final = _PRODUCE_RESPONSE_ENTRY.size + _TEXT_LENGTH.size
_FETCH_RESPONSE_ENTRY_BYTES_MIN: Final = _FETCH_RESPONSE_ENTRY.size + _TEXT_LENGTH.size

# The one-partition shape of each data-path body as a single struct: the fixed part and the
# fixed part of its only entry, back to back (big-endian formats have no padding). A body of
# exactly that shape decodes in one unpack (`_one_partition_*`); any other body, malformed ones
# included, goes through the general cursor decoder, so every error reads the same.
_PRODUCE_REQUEST_ONE: Final = struct.Struct(">hiI" "iIH")
_FETCH_REQUEST_ONE: Final = struct.Struct(">iiiiI" "iqiH")
_PRODUCE_RESPONSE_ONE: Final = struct.Struct(">I" "ihqqqH")
assert _PRODUCE_REQUEST_ONE.size == _PRODUCE_REQUEST.size + _PRODUCE_REQUEST_ENTRY.size
assert _FETCH_REQUEST_ONE.size == _FETCH_REQUEST.size + _FETCH_REQUEST_ENTRY.size
assert _PRODUCE_RESPONSE_ONE.size == _COUNT.size + _PRODUCE_RESPONSE_ENTRY.size


def _pack(layout: struct.Struct, values: tuple[int, ...], what: str) -> bytes:
    """struct.pack, with an out-of-range field reported as INVALID_REQUEST, not struct.error."""
    try:
        return layout.pack(*values)
    except struct.error as error:
        raise ZlogError(ErrorCode.INVALID_REQUEST, f"{what}: {error}") from None


def _topic_bytes(topic: str) -> bytes:
    return encode_text(topic, "topic", code=ErrorCode.INVALID_TOPIC_EXCEPTION)


def _take_frames(
    frames: Sequence[memoryview], start: int, count: int, cursor: Cursor
) -> tuple[memoryview, ...]:
    if count > len(frames) - start:
        raise cursor.fail(f"an entry claims {count} frames, {len(frames) - start} remain")
    return tuple(frames[start : start + count])


def _expect_all_frames_used(frames: Sequence[memoryview], used: int, cursor: Cursor) -> None:
    if used != len(frames):
        raise cursor.fail(f"entries account for {used} frames, the message has {len(frames)}")


# ---------------------------------------------------------------------------------------------
# Produce.
# ---------------------------------------------------------------------------------------------


def encode_produce_request(msg: ProduceRequestV0) -> tuple[bytes, list[Buffer]]:
    parts = [_pack(_PRODUCE_REQUEST, (msg.acks, msg.timeout_ms, len(msg.entries)), "produce")]
    frames: list[Buffer] = []
    for entry in msg.entries:
        topic = _topic_bytes(entry.topic)
        fields = (entry.partition, len(entry.batches), len(topic))
        parts.append(_pack(_PRODUCE_REQUEST_ENTRY, fields, "produce entry"))
        parts.append(topic)
        frames.extend(entry.batches)
    return b"".join(parts), frames


def _utf8(view: memoryview) -> str | None:
    try:
        return str(view, "utf-8")
    except UnicodeDecodeError:
        return None


def _one_partition_produce_request(
    body: memoryview, frames: Sequence[memoryview]
) -> ProduceRequestV0 | None:
    """A request for one partition whose batches are all the frames; None for any other body."""
    fixed_bytes = _PRODUCE_REQUEST_ONE.size
    if body.nbytes < fixed_bytes:
        return None
    acks, timeout_ms, entry_count, partition, batch_count, topic_length = (
        _PRODUCE_REQUEST_ONE.unpack_from(body)
    )
    if entry_count != 1 or batch_count != len(frames):
        return None
    if body.nbytes != fixed_bytes + topic_length:
        return None
    topic = _utf8(body[fixed_bytes:])
    if topic is None:
        return None
    return ProduceRequestV0(acks, timeout_ms, (ProduceEntry(topic, partition, tuple(frames)),))


def decode_produce_request(
    body: memoryview, frames: Sequence[memoryview], code: ErrorCode
) -> ProduceRequestV0:
    one = _one_partition_produce_request(body, frames)
    if one is not None:
        return one
    cursor = Cursor(body, code, "Produce v0 request")
    acks, timeout_ms, claimed = cursor.unpack(_PRODUCE_REQUEST)
    entry_count = cursor.count(claimed, _PRODUCE_REQUEST_ENTRY.size, "entry_count")
    entries: list[ProduceEntry] = []
    used = 0
    for _ in range(entry_count):
        partition, batch_count, topic_length = cursor.unpack(_PRODUCE_REQUEST_ENTRY)
        topic = cursor.text(topic_length, "topic")
        batches = _take_frames(frames, used, batch_count, cursor)
        used += batch_count
        entries.append(ProduceEntry(topic, partition, batches))
    cursor.expect_end()
    _expect_all_frames_used(frames, used, cursor)
    return ProduceRequestV0(acks, timeout_ms, tuple(entries))


def encode_produce_response(msg: ProduceResponseV0) -> bytes:
    parts = [_pack(_COUNT, (len(msg.entries),), "produce response")]
    for entry in msg.entries:
        message = clip_message(entry.error_message)
        topic = _topic_bytes(entry.topic)
        fields = (
            entry.partition,
            entry.error_code,
            entry.base_offset,
            entry.log_append_time_ms,
            entry.log_start_offset,
            len(message),
        )
        parts.append(_pack(_PRODUCE_RESPONSE_ENTRY, fields, "produce result"))
        parts.append(message)
        parts.append(_pack(_TEXT_LENGTH, (len(topic),), "topic"))
        parts.append(topic)
    return b"".join(parts)


def _one_partition_produce_response(
    body: memoryview, frames: Sequence[memoryview]
) -> ProduceResponseV0 | None:
    """A response with one result and no frames; None for any other body."""
    fixed_bytes = _PRODUCE_RESPONSE_ONE.size
    if frames or body.nbytes < fixed_bytes:
        return None
    fields = _PRODUCE_RESPONSE_ONE.unpack_from(body)
    entry_count, partition, error_code, base_offset, append_time_ms, log_start_offset = fields[:6]
    message_end = fixed_bytes + fields[6]
    if entry_count != 1 or body.nbytes < message_end + _TEXT_LENGTH.size:
        return None
    (topic_length,) = _TEXT_LENGTH.unpack_from(body, message_end)
    topic_start = message_end + _TEXT_LENGTH.size
    if body.nbytes != topic_start + topic_length:
        return None
    message, topic = _utf8(body[fixed_bytes:message_end]), _utf8(body[topic_start:])
    if message is None or topic is None:
        return None
    result = ProduceResult(
        topic, partition, error_code, base_offset, append_time_ms, log_start_offset, message
    )
    return ProduceResponseV0((result,))


def decode_produce_response(
    body: memoryview, frames: Sequence[memoryview], code: ErrorCode
) -> ProduceResponseV0:
    one = _one_partition_produce_response(body, frames)
    if one is not None:
        return one
    cursor = Cursor(body, code, "Produce v0 response")
    (claimed,) = cursor.unpack(_COUNT)
    entry_count = cursor.count(claimed, _PRODUCE_RESPONSE_ENTRY_BYTES_MIN, "entry_count")
    entries: list[ProduceResult] = []
    for _ in range(entry_count):
        fields = cursor.unpack(_PRODUCE_RESPONSE_ENTRY)
        partition, error_code, base_offset, append_time_ms, log_start_offset = fields[:5]
        message = cursor.text(fields[5], "error message")
        topic = cursor.short_text("topic")
        entries.append(
            ProduceResult(
                topic,
                partition,
                error_code,
                base_offset,
                append_time_ms,
                log_start_offset,
                message,
            )
        )
    cursor.expect_end()
    _expect_all_frames_used(frames, 0, cursor)
    return ProduceResponseV0(tuple(entries))


# ---------------------------------------------------------------------------------------------
# Fetch.
# ---------------------------------------------------------------------------------------------


def encode_fetch_request(msg: FetchRequestV0 | FetchRequestV2) -> bytes:
    fields = (msg.replica_id, msg.max_wait_ms, msg.min_bytes, msg.max_bytes, len(msg.entries))
    parts = [_pack(_FETCH_REQUEST, fields, "fetch")]
    for entry in msg.entries:
        topic = _topic_bytes(entry.topic)
        entry_fields = (entry.partition, entry.fetch_offset, entry.partition_max_bytes, len(topic))
        parts.append(_pack(_FETCH_REQUEST_ENTRY, entry_fields, "fetch entry"))
        parts.append(topic)
    return b"".join(parts)


def decode_fetch_request(
    body: memoryview, frames: Sequence[memoryview], code: ErrorCode,
    cls: type[ConsumerFetch],
) -> ConsumerFetch:
    """Also refuses negative waits and sizes: they have no meaning a worker could act on.

    Fetch v2 (a subscription) has v0's body; `cls` says which of the two it is.
    """
    one = _one_partition_fetch_request(body, frames, cls)
    if one is not None:
        return one
    cursor = Cursor(body, code, f"Fetch v{cls.API_VERSION} request")
    replica_id, max_wait_ms, min_bytes, max_bytes, claimed = cursor.unpack(_FETCH_REQUEST)
    for name, value in (("max_wait_ms", max_wait_ms), ("min_bytes", min_bytes),
                        ("max_bytes", max_bytes)):
        if value < 0:
            raise cursor.fail(f"{name} is {value}, it must not be negative")
    entry_count = cursor.count(claimed, _FETCH_REQUEST_ENTRY.size, "entry_count")
    entries: list[FetchEntry] = []
    for _ in range(entry_count):
        partition, fetch_offset, partition_max_bytes, topic_length = cursor.unpack(
            _FETCH_REQUEST_ENTRY
        )
        if partition_max_bytes < 0:
            raise cursor.fail(f"partition_max_bytes is {partition_max_bytes}, it must not be < 0")
        topic = cursor.text(topic_length, "topic")
        entries.append(FetchEntry(topic, partition, fetch_offset, partition_max_bytes))
    cursor.expect_end()
    _expect_all_frames_used(frames, 0, cursor)
    return cls(replica_id, max_wait_ms, min_bytes, max_bytes, tuple(entries))


def _one_partition_fetch_request(
    body: memoryview, frames: Sequence[memoryview], cls: type[ConsumerFetch]
) -> ConsumerFetch | None:
    """A fetch of one partition with no negative wait or size; None for any other body."""
    fixed_bytes = _FETCH_REQUEST_ONE.size
    if frames or body.nbytes < fixed_bytes:
        return None
    (replica_id, max_wait_ms, min_bytes, max_bytes, entry_count, partition, fetch_offset,
     partition_max_bytes, topic_length) = _FETCH_REQUEST_ONE.unpack_from(body)
    if entry_count != 1 or body.nbytes != fixed_bytes + topic_length:
        return None
    if min(max_wait_ms, min_bytes, max_bytes, partition_max_bytes) < 0:
        return None
    topic = _utf8(body[fixed_bytes:])
    if topic is None:
        return None
    entry = FetchEntry(topic, partition, fetch_offset, partition_max_bytes)
    return cls(replica_id, max_wait_ms, min_bytes, max_bytes, (entry,))


def encode_subscription_response(msg: FetchResponseV2) -> tuple[bytes, list[Buffer]]:
    """v0's body and one byte more: 1 when further answers follow, else 0."""
    body, frames = encode_fetch_response(msg)
    return body + (b"\x01" if msg.more else b"\x00"), frames


def decode_subscription_response(
    body: memoryview, frames: Sequence[memoryview], code: ErrorCode
) -> FetchResponseV2:
    if body.nbytes < 1 or body[-1] > 1:
        raise ZlogError(code, "a Fetch v2 response ends with its more flag, 0 or 1")
    answer = decode_fetch_response(body[:-1], frames, code)
    return FetchResponseV2(answer.entries, more=bool(body[-1]))


def encode_fetch_response(msg: FetchResponseV0 | FetchResponseV2) -> tuple[bytes, list[Buffer]]:
    parts = [_pack(_COUNT, (len(msg.entries),), "fetch response")]
    frames: list[Buffer] = []
    for entry in msg.entries:
        message = clip_message(entry.error_message)
        topic = _topic_bytes(entry.topic)
        fields = (
            entry.partition,
            entry.error_code,
            entry.high_watermark,
            entry.last_stable_offset,
            entry.log_start_offset,
            len(entry.chunks),
            len(message),
        )
        parts.append(_pack(_FETCH_RESPONSE_ENTRY, fields, "fetch result"))
        parts.append(message)
        parts.append(_pack(_TEXT_LENGTH, (len(topic),), "topic"))
        parts.append(topic)
        frames.extend(entry.chunks)
    return b"".join(parts), frames


def decode_fetch_response(
    body: memoryview, frames: Sequence[memoryview], code: ErrorCode
) -> FetchResponseV0:
    cursor = Cursor(body, code, "Fetch v0 response")
    (claimed,) = cursor.unpack(_COUNT)
    entry_count = cursor.count(claimed, _FETCH_RESPONSE_ENTRY_BYTES_MIN, "entry_count")
    entries: list[FetchResult] = []
    used = 0
    for _ in range(entry_count):
        fields = cursor.unpack(_FETCH_RESPONSE_ENTRY)
        partition, error_code, high_watermark, last_stable_offset, log_start_offset = fields[:5]
        frame_count, message_length = fields[5], fields[6]
        message = cursor.text(message_length, "error message")
        topic = cursor.short_text("topic")
        chunks = _take_frames(frames, used, frame_count, cursor)
        used += frame_count
        entries.append(
            FetchResult(
                topic,
                partition,
                error_code,
                high_watermark,
                last_stable_offset,
                log_start_offset,
                chunks,
                message,
            )
        )
    cursor.expect_end()
    _expect_all_frames_used(frames, used, cursor)
    return FetchResponseV0(tuple(entries))


# ---------------------------------------------------------------------------------------------
# Fetch v1: a follower's fetch.
# ---------------------------------------------------------------------------------------------

_FETCH_V1_REQUEST: Final = struct.Struct(">iqiiiI")  # replica_id, broker_epoch, max_wait_ms,
# min_bytes, max_bytes, entry_count
_FETCH_V1_REQUEST_ENTRY: Final = struct.Struct(">iqiiqiQQH")  # partition, fetch_offset,
# current_leader_epoch, last_fetched_epoch, log_start_offset, partition_max_bytes, topic_id
# (Kafka's Uuid: its high then low 64 bits, zeros for none), topic_length
_FETCH_V1_RESPONSE_ENTRY: Final = struct.Struct(
    ">ihiqqqiqIH"  # partition, error_code, leader_epoch, high_watermark, log_start_offset,
)  # log_end_offset, diverging_epoch, diverging_end_offset, frame_count, message_length;
# then message bytes, then topic as >H + bytes
_FETCH_V1_RESPONSE_ENTRY_BYTES_MIN: Final = _FETCH_V1_RESPONSE_ENTRY.size + _TEXT_LENGTH.size


def _topic_id_halves(topic_id: str) -> tuple[int, int]:
    """A topic id as Kafka's Uuid travels: two unsigned 64-bit halves; none is zeros."""
    value = 0 if topic_id == NO_TOPIC_ID else int(topic_id, 16)
    return value >> 64, value & (2**64 - 1)


def _topic_id_text(high: int, low: int) -> str:
    value = high << 64 | low
    return NO_TOPIC_ID if value == 0 else f"{value:032x}"


def encode_replica_fetch_request(msg: FetchRequestV1) -> bytes:
    fields = (msg.replica_id, msg.broker_epoch, msg.max_wait_ms, msg.min_bytes, msg.max_bytes,
              len(msg.entries))
    parts = [_pack(_FETCH_V1_REQUEST, fields, "replica fetch")]
    for entry in msg.entries:
        topic = _topic_bytes(entry.topic)
        entry_fields = (entry.partition, entry.fetch_offset, entry.current_leader_epoch,
                        entry.last_fetched_epoch, entry.log_start_offset,
                        entry.partition_max_bytes, *_topic_id_halves(entry.topic_id), len(topic))
        parts.append(_pack(_FETCH_V1_REQUEST_ENTRY, entry_fields, "replica fetch entry"))
        parts.append(topic)
    return b"".join(parts)


def decode_replica_fetch_request(
    body: memoryview, frames: Sequence[memoryview], code: ErrorCode
) -> FetchRequestV1:
    """A follower's fetch; negative waits, sizes or offsets are refused."""
    cursor = Cursor(body, code, "Fetch v1 request")
    replica_id, broker_epoch, max_wait_ms, min_bytes, max_bytes, claimed = cursor.unpack(
        _FETCH_V1_REQUEST)
    for name, value in (("replica_id", replica_id), ("broker_epoch", broker_epoch),
                        ("max_wait_ms", max_wait_ms), ("min_bytes", min_bytes),
                        ("max_bytes", max_bytes)):
        if value < 0:
            raise cursor.fail(f"{name} is {value}, it must not be negative")
    entry_count = cursor.count(claimed, _FETCH_V1_REQUEST_ENTRY.size, "entry_count")
    entries: list[ReplicaFetchEntry] = []
    for _ in range(entry_count):
        (partition, fetch_offset, current_leader_epoch, last_fetched_epoch, log_start_offset,
         partition_max_bytes, id_high, id_low, topic_length) = cursor.unpack(
             _FETCH_V1_REQUEST_ENTRY)
        if min(fetch_offset, partition_max_bytes, current_leader_epoch) < 0:
            raise cursor.fail("fetch_offset, current_leader_epoch and partition_max_bytes "
                              "must not be negative")
        topic = cursor.text(topic_length, "topic")
        entries.append(ReplicaFetchEntry(topic, partition, fetch_offset, current_leader_epoch,
                                         last_fetched_epoch, log_start_offset,
                                         partition_max_bytes, _topic_id_text(id_high, id_low)))
    cursor.expect_end()
    _expect_all_frames_used(frames, 0, cursor)
    return FetchRequestV1(replica_id, broker_epoch, max_wait_ms, min_bytes, max_bytes,
                          tuple(entries))


def encode_replica_fetch_response(msg: FetchResponseV1) -> tuple[bytes, list[Buffer]]:
    parts = [_pack(_COUNT, (len(msg.entries),), "replica fetch response")]
    frames: list[Buffer] = []
    for entry in msg.entries:
        message = clip_message(entry.error_message)
        topic = _topic_bytes(entry.topic)
        fields = (entry.partition, entry.error_code, entry.leader_epoch, entry.high_watermark,
                  entry.log_start_offset, entry.log_end_offset, entry.diverging_epoch,
                  entry.diverging_end_offset, len(entry.chunks), len(message))
        parts.append(_pack(_FETCH_V1_RESPONSE_ENTRY, fields, "replica fetch result"))
        parts.append(message)
        parts.append(_pack(_TEXT_LENGTH, (len(topic),), "topic"))
        parts.append(topic)
        frames.extend(entry.chunks)
    return b"".join(parts), frames


def decode_replica_fetch_response(
    body: memoryview, frames: Sequence[memoryview], code: ErrorCode
) -> FetchResponseV1:
    cursor = Cursor(body, code, "Fetch v1 response")
    (claimed,) = cursor.unpack(_COUNT)
    entry_count = cursor.count(claimed, _FETCH_V1_RESPONSE_ENTRY_BYTES_MIN, "entry_count")
    entries: list[ReplicaFetchResult] = []
    used = 0
    for _ in range(entry_count):
        (partition, error_code, leader_epoch, high_watermark, log_start_offset, log_end_offset,
         diverging_epoch, diverging_end_offset, frame_count,
         message_length) = cursor.unpack(_FETCH_V1_RESPONSE_ENTRY)
        message = cursor.text(message_length, "error message")
        topic = cursor.short_text("topic")
        chunks = _take_frames(frames, used, frame_count, cursor)
        used += frame_count
        entries.append(ReplicaFetchResult(
            topic, partition, error_code, leader_epoch, high_watermark, log_start_offset,
            log_end_offset, diverging_epoch, diverging_end_offset, chunks, message))
    cursor.expect_end()
    _expect_all_frames_used(frames, used, cursor)
    return FetchResponseV1(tuple(entries))
