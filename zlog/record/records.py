"""The general record codec: builds and reads any batch, one record at a time.

Any batch means headers, null keys and values, per-record timestamps and the offset gaps that
compaction leaves. This codec is the reference: `arrays` (the hot path's array codec) and
`small` are tested against it, and it against kafka-python.

Record layout (zigzag varints, see `varint`):

    length varint (bytes after it) | attributes int8 (unused) | timestampDelta varlong |
    offsetDelta varint | keyLength varint (-1 = null) | key | valueLength varint (-1 = null) |
    value | headers count varint | per header: keyLength varint, key (utf-8),
    valueLength varint (-1 = null), value
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.record.compression import compress_records, uncompressed_records
from zlog.record.header import (
    RECORD_BODY_BYTES_MIN,
    RECORD_BYTES_MIN,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    Buffer,
    Compression,
    as_byte_view,
    attributes_for,
    check_record_count,
    check_records_size,
    check_timestamp_range,
    seal_batch,
    validate_batch,
)
from zlog.record.varint import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

RecordHeaders: TypeAlias = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record to be written; the batch gives it its offset."""

    value: bytes | None
    key: bytes | None = None
    headers: RecordHeaders = ()
    timestamp_ms: int | None = None  # None: the batch's base timestamp


@dataclass(frozen=True, slots=True)
class Record:
    """A record read back, with its absolute offset."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: RecordHeaders = ()


def _corrupt(message: str) -> ZlogError:
    return ZlogError(ErrorCode.CORRUPT_MESSAGE, message)


def _invalid(message: str) -> ZlogError:
    return ZlogError(ErrorCode.INVALID_RECORD, message)


# ---------------------------------------------------------------------------------------------
# Building.
# ---------------------------------------------------------------------------------------------


_RECORD_ATTRIBUTES: Final = b"\x00"  # unused in v2
_NULL_LENGTH: Final = encode_varint(-1)
_NO_HEADERS: Final = encode_varint(0)  # the headers section of a record without headers


def record_body(
    timestamp_delta_ms: int,
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers_section: bytes = _NO_HEADERS,
) -> bytes:
    """A record's bytes after its length varint, every size already within the limits.

    The one framing of a record for both builders that write records one at a time: the
    general one (`build_batch`, which checks each record first) and the plain one of small
    batches (`small.build_plain_batch`, whose records are far from every limit).
    """
    return b"".join((
        _RECORD_ATTRIBUTES,
        encode_varlong(timestamp_delta_ms),
        encode_varint(offset_delta),
        _NULL_LENGTH if key is None else encode_varint(len(key)),
        key or b"",
        _NULL_LENGTH if value is None else encode_varint(len(value)),
        value or b"",
        headers_section,
    ))


def _too_large(what: str, size_bytes: int) -> ZlogError:
    return ZlogError(
        ErrorCode.MESSAGE_TOO_LARGE,
        f"a {what} of {size_bytes} bytes exceeds {limits.RECORD_SIZE_BYTES_MAX} bytes",
    )


def _headers_section(headers: RecordHeaders) -> bytes:
    size_bytes_max = limits.RECORD_SIZE_BYTES_MAX
    parts = [encode_varint(len(headers))]
    for header_key, header_value in headers:
        encoded_key = header_key.encode("utf-8")
        if len(encoded_key) > size_bytes_max:
            raise _too_large("header key", len(encoded_key))
        if header_value is not None and len(header_value) > size_bytes_max:
            raise _too_large("header value", len(header_value))
        parts.append(encode_varint(len(encoded_key)))
        parts.append(encoded_key)
        parts.append(_NULL_LENGTH if header_value is None else encode_varint(len(header_value)))
        parts.append(header_value or b"")
    return b"".join(parts)


def _encode_record(record: NewRecord, offset_delta: int, timestamp_delta_ms: int) -> bytes:
    """A record checked against the limits, then framed; errors in the order fields are met."""
    headers, key, value = record.headers, record.key, record.value
    if len(headers) > limits.HEADERS_PER_RECORD_MAX:
        raise _invalid(f"{len(headers)} headers exceed {limits.HEADERS_PER_RECORD_MAX}")
    size_bytes_max = limits.RECORD_SIZE_BYTES_MAX
    if key is not None and len(key) > size_bytes_max:
        raise _too_large("key", len(key))
    if value is not None and len(value) > size_bytes_max:
        raise _too_large("value", len(value))
    headers_section = _headers_section(headers) if headers else _NO_HEADERS
    body = record_body(timestamp_delta_ms, offset_delta, key, value, headers_section)
    if len(body) > size_bytes_max:
        raise _too_large("record", len(body))
    return encode_varint(len(body)) + body


def _resolve_offset_deltas(
    count: int, offset_deltas: Sequence[int] | None, last_offset_delta: int | None
) -> tuple[Sequence[int], int]:
    """Offset deltas 0..count-1, or the gapped ones a compacted batch keeps (caller-checked)."""
    deltas: Sequence[int] = range(count) if offset_deltas is None else offset_deltas
    assert len(deltas) == count, "one offset delta per record"
    assert deltas[0] >= 0
    assert all(later > earlier for earlier, later in itertools.pairwise(deltas))
    last = deltas[-1] if last_offset_delta is None else last_offset_delta
    assert deltas[-1] <= last <= INT32_MAX, last
    return deltas, last


def build_batch(
    records: Sequence[NewRecord],
    *,
    base_offset: int = 0,
    base_timestamp_ms: int | None = None,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    offset_deltas: Sequence[int] | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Encode records into one batch: any keys, values, headers and timestamps.

    A record without a timestamp takes `base_timestamp_ms`, which defaults to the largest
    timestamp given (or 0). `offset_deltas` and `last_offset_delta` let compaction rebuild a
    batch whose surviving records keep their original offsets.
    """
    count = len(records)
    check_record_count(count)
    attributes = attributes_for(compression, is_transactional=is_transactional)
    deltas, last_delta = _resolve_offset_deltas(count, offset_deltas, last_offset_delta)
    given_ms = [record.timestamp_ms for record in records if record.timestamp_ms is not None]
    if base_timestamp_ms is None:
        base_timestamp_ms = max(given_ms) if given_ms else 0
    timestamps_ms = [
        base_timestamp_ms if record.timestamp_ms is None else record.timestamp_ms
        for record in records
    ]
    check_timestamp_range(min(timestamps_ms), max(timestamps_ms), base_timestamp_ms)
    encoded = b"".join(
        _encode_record(record, delta, timestamp_ms - base_timestamp_ms)
        for record, delta, timestamp_ms in zip(records, deltas, timestamps_ms, strict=True)
    )
    check_records_size(len(encoded))
    return seal_batch(
        compress_records(encoded, compression),
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=last_delta,
        base_timestamp_ms=base_timestamp_ms,
        max_timestamp_ms=max(timestamps_ms),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=count,
    )


# ---------------------------------------------------------------------------------------------
# Reading.
# ---------------------------------------------------------------------------------------------


def read_records(buf: Buffer) -> list[Record]:
    """Validate a batch and decode every record (the general, one-record-at-a-time reader)."""
    view = as_byte_view(buf)
    header = validate_batch(view, strict=False)
    return _decode_records(bytes(uncompressed_records(view, header)), header, keep=True)


def validate_records(buf: Buffer) -> None:
    """Everything `validate_batch` checks, then inflate (bounded) and walk every record."""
    view = as_byte_view(buf)
    header = validate_batch(view, strict=False)
    _decode_records(bytes(uncompressed_records(view, header)), header, keep=False)


def _decode_bytes(data: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = decode_varint(data, pos, end)
    if length == -1:
        return None, pos
    if length < -1 or length > end - pos:
        raise _corrupt(f"a {what} length of {length} does not fit its record")
    return data[pos : pos + length], pos + length


def decode_headers(data: bytes, pos: int, end: int) -> tuple[RecordHeaders, int]:
    """Decode a record's headers count and headers from data[pos:end]."""
    count, pos = decode_varint(data, pos, end)
    # Each header takes at least two bytes (two 1-byte lengths); bound before allocating.
    if count < 0 or count > limits.HEADERS_PER_RECORD_MAX or 2 * count > end - pos:
        raise _corrupt(f"a headers count of {count} does not fit its record")
    headers: list[tuple[str, bytes | None]] = []
    for _index in range(count):
        key_length, pos = decode_varint(data, pos, end)
        if key_length < 0 or key_length > end - pos:
            raise _corrupt(f"a header key length of {key_length} does not fit its record")
        try:
            key = data[pos : pos + key_length].decode("utf-8")
        except UnicodeDecodeError as error:
            raise _corrupt(f"a header key is not UTF-8: {error}") from error
        value, pos = _decode_bytes(data, pos + key_length, end, "header value")
        headers.append((key, value))
    return tuple(headers), pos


def record_timestamp_ms(header: BatchHeader, timestamp_delta_ms: int) -> int:
    """A record's timestamp: its own under CreateTime, the batch's max under LogAppendTime."""
    if header.attributes & TIMESTAMP_TYPE_BIT:
        return header.max_timestamp_ms
    timestamp_ms = header.base_timestamp_ms + timestamp_delta_ms
    if not (INT64_MIN <= timestamp_ms <= INT64_MAX):
        raise _corrupt(f"a timestamp delta of {timestamp_delta_ms} overflows int64")
    return timestamp_ms


def _decode_records(data: bytes, header: BatchHeader, *, keep: bool) -> list[Record]:
    count = header.record_count
    data_bytes = len(data)
    if data_bytes < count * RECORD_BYTES_MIN:
        raise _corrupt(f"{count} records cannot fit in {data_bytes} bytes")
    records: list[Record] = []
    pos = 0
    previous_delta = -1
    for index in range(count):
        length, body_start = decode_varint(data, pos, data_bytes)
        if length < RECORD_BODY_BYTES_MIN or length > data_bytes - body_start:
            raise _corrupt(f"record {index} claims {length} bytes")
        record_end = body_start + length
        # Skip the attributes byte: unused in v2 and ignored by Kafka's own readers.
        timestamp_delta_ms, pos = decode_varlong(data, body_start + 1, record_end)
        offset_delta, pos = decode_varint(data, pos, record_end)
        if offset_delta <= previous_delta or offset_delta > header.last_offset_delta:
            raise _invalid(
                f"record {index} has offset delta {offset_delta} after {previous_delta}"
                f" (lastOffsetDelta {header.last_offset_delta})"
            )
        previous_delta = offset_delta
        key, pos = _decode_bytes(data, pos, record_end, "key")
        value, pos = _decode_bytes(data, pos, record_end, "value")
        headers, pos = decode_headers(data, pos, record_end)
        if pos != record_end:
            raise _corrupt(f"record {index} has {record_end - pos} bytes left over")
        timestamp_ms = record_timestamp_ms(header, timestamp_delta_ms)
        if keep:
            offset = header.base_offset + offset_delta
            records.append(Record(offset, timestamp_ms, key, value, headers))
    if pos != data_bytes:
        raise _corrupt(f"{data_bytes - pos} bytes follow the last of {count} records")
    return records
