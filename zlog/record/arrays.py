"""The array codec for RecordBatch v2: a whole batch per numpy pass, no Python loop per record.

Producers and consumers move thousands of records per batch, so a per-record Python loop would
cap zlog at a few hundred thousand records a second. Here each record field becomes one array
(lengths, offset deltas, key and value positions) and is encoded or decoded for every record by
a fixed number of numpy operations. Records have no headers on the build side; the parser reads
headers too, one record at a time but only for the records that carry them. Finding where each
record starts is `starts`, moving keys and values in and out is `pieces`, and batches of a few
records are walked by `small` instead. `records.read_records` is the reference the tests hold
this module to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.record.compression import compress_records, uncompressed_records
from zlog.record.header import (
    BATCH_HEADER_BYTES,
    RECORD_BODY_BYTES_MIN,
    RECORD_BYTES_MIN,
    BatchHeader,
    Buffer,
    Compression,
    TimestampType,
    as_byte_view,
    attributes_for,
    check_record_count,
    check_records_size,
    check_timestamp_range,
    seal_batch,
    validate_batch,
    write_header,
)
from zlog.record.pieces import gather_pieces, scatter_pieces, split_pieces
from zlog.record.records import Record, RecordHeaders, decode_headers
from zlog.record.small import walk_records
from zlog.record.starts import record_starts
from zlog.record.varint import (
    INT64_MAX,
    INT64_MIN,
    VARINT_BYTES_MAX,
    VARLONG_BYTES_MAX,
    BoolArray,
    Int64Array,
    UInt8Array,
    UInt64Array,
    read_varints_array,
    varint_sizes_array,
    write_varints_array,
    zigzag_encode_array,
)


def _corrupt(message: str) -> ZlogError:
    return ZlogError(ErrorCode.CORRUPT_MESSAGE, message)


# ---------------------------------------------------------------------------------------------
# Building.
# ---------------------------------------------------------------------------------------------


def _values_payload(values: Sequence[bytes] | UInt8Array) -> tuple[UInt8Array, Int64Array]:
    """Values packed end to end, and their lengths."""
    if isinstance(values, np.ndarray):
        assert values.ndim == 2 and values.dtype == np.uint8, "one uint8 row per value"
        lengths = np.full(values.shape[0], values.shape[1], np.int64)
        return np.ascontiguousarray(values).reshape(-1), lengths
    lengths = np.fromiter(map(len, values), np.int64, count=len(values))
    return np.frombuffer(b"".join(values), np.uint8), lengths


def _keys_payload(keys: Sequence[bytes | None] | None, count: int) -> tuple[UInt8Array, Int64Array]:
    """Keys packed end to end, and their lengths (-1 for a null key)."""
    if keys is None:
        return np.empty(0, np.uint8), np.full(count, -1, np.int64)
    assert len(keys) == count, "one key per value"
    lengths = np.fromiter((-1 if key is None else len(key) for key in keys), np.int64, count)
    packed = b"".join(key for key in keys if key is not None)
    return np.frombuffer(packed, np.uint8), lengths


def _timestamp_deltas(timestamp_ms: int | Int64Array, count: int) -> tuple[Int64Array, int, int]:
    """Per-record deltas from the base timestamp, the base (the largest, as in build_batch), max."""
    if isinstance(timestamp_ms, np.ndarray):
        assert timestamp_ms.shape == (count,), "one timestamp per value"
        stamps_ms = timestamp_ms.astype(np.int64, copy=False)
        low_ms, high_ms = int(stamps_ms.min()), int(stamps_ms.max())
        check_timestamp_range(low_ms, high_ms, high_ms)
        return stamps_ms - high_ms, high_ms, high_ms
    stamp_ms = int(timestamp_ms)
    check_timestamp_range(stamp_ms, stamp_ms, stamp_ms)
    return np.zeros(count, np.int64), stamp_ms, stamp_ms


def _varint_field(values: Int64Array) -> tuple[UInt64Array, Int64Array]:
    zigzag = zigzag_encode_array(values)
    return zigzag, varint_sizes_array(zigzag)


def _encode_records(
    value_lengths: Int64Array, key_lengths: Int64Array, timestamp_deltas_ms: Int64Array
) -> tuple[UInt8Array, Int64Array, Int64Array]:
    """A batch buffer with every record's framing written, and where keys and values go.

    The first BATCH_HEADER_BYTES bytes are left for the header.
    """
    count = value_lengths.size
    timestamp = _varint_field(timestamp_deltas_ms)
    offset = _varint_field(np.arange(count, dtype=np.int64))
    key = _varint_field(key_lengths)
    value = _varint_field(value_lengths)
    key_payload_lengths = np.maximum(key_lengths, 0)
    # attributes and headers count: one byte each
    body_bytes = 2 + timestamp[1] + offset[1] + key[1] + key_payload_lengths
    body_bytes += value[1] + value_lengths
    if int(body_bytes.max()) > limits.RECORD_SIZE_BYTES_MAX:
        raise ZlogError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"a record exceeds {limits.RECORD_SIZE_BYTES_MAX} bytes",
        )
    length = _varint_field(body_bytes)
    record_bytes = length[1] + body_bytes
    ends = np.cumsum(record_bytes) + BATCH_HEADER_BYTES
    starts = ends - record_bytes
    total_bytes = int(ends[-1])
    check_records_size(total_bytes - BATCH_HEADER_BYTES)
    batch = np.empty(total_bytes, np.uint8)
    write_varints_array(batch, starts, *length)
    cursor = starts + length[1]
    batch[cursor] = 0  # attributes
    cursor += 1
    write_varints_array(batch, cursor, *timestamp)
    cursor += timestamp[1]
    write_varints_array(batch, cursor, *offset)
    cursor += offset[1]
    write_varints_array(batch, cursor, *key)
    key_starts = cursor + key[1]
    cursor = key_starts + key_payload_lengths
    write_varints_array(batch, cursor, *value)
    value_starts = cursor + value[1]
    cursor = value_starts + value_lengths
    batch[cursor] = 0  # headers count
    assert int(cursor[-1]) + 1 == total_bytes
    return batch, key_starts, value_starts


def build_batch_from_values(
    values: Sequence[bytes] | UInt8Array,
    *,
    keys: Sequence[bytes | None] | None = None,
    timestamp_ms: int | Int64Array,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
) -> bytes:
    """Encode values (a list of bytes, or a 2-D uint8 array with one row per value) into a batch.

    No headers and no null values (use `records.build_batch`). The bytes equal those of
    `records.build_batch` for the same records.
    """
    attributes = attributes_for(compression, is_transactional=is_transactional)
    value_payload, value_lengths = _values_payload(values)
    count = value_lengths.size
    check_record_count(count)
    key_payload, key_lengths = _keys_payload(keys, count)
    timestamp_deltas_ms, base_timestamp_ms, max_timestamp_ms = _timestamp_deltas(
        timestamp_ms, count
    )
    batch, key_starts, value_starts = _encode_records(
        value_lengths, key_lengths, timestamp_deltas_ms
    )
    scatter_pieces(batch, key_starts, np.maximum(key_lengths, 0), key_payload)
    scatter_pieces(batch, value_starts, value_lengths, value_payload)
    fields = {
        "base_offset": base_offset,
        "partition_leader_epoch": partition_leader_epoch,
        "attributes": attributes,
        "last_offset_delta": count - 1,
        "base_timestamp_ms": base_timestamp_ms,
        "max_timestamp_ms": max_timestamp_ms,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
        "base_sequence": base_sequence,
        "record_count": count,
    }
    records = batch.data[BATCH_HEADER_BYTES:]
    if compression != Compression.NONE:
        return seal_batch(compress_records(records, compression), **fields)
    if batch.size > limits.BATCH_SIZE_BYTES_MAX:
        raise ZlogError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"a batch of {batch.size} bytes exceeds {limits.BATCH_SIZE_BYTES_MAX} bytes",
        )
    write_header(batch.data, **fields)
    return batch.tobytes()


# ---------------------------------------------------------------------------------------------
# Parsing.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class BatchView:
    """A parsed batch: one array per record field instead of one object per record.

    Starts index `records`, the decompressed record bytes: for an uncompressed batch a view of
    the caller's buffer, not a copy, so it lives as long as that buffer holds the batch. A
    length of -1 marks a null key or value.
    """

    header: BatchHeader
    records: UInt8Array
    offsets: Int64Array  # absolute
    timestamps_ms: Int64Array
    key_starts: Int64Array
    key_lengths: Int64Array
    value_starts: Int64Array
    value_lengths: Int64Array
    header_counts: Int64Array
    record_headers: dict[int, RecordHeaders]  # only records that have headers, by index

    def __len__(self) -> int:
        return int(self.offsets.size)

    def value(self, index: int) -> memoryview | None:
        return self._piece(int(self.value_starts[index]), int(self.value_lengths[index]))

    def key(self, index: int) -> memoryview | None:
        return self._piece(int(self.key_starts[index]), int(self.key_lengths[index]))

    def headers(self, index: int) -> RecordHeaders:
        return self.record_headers.get(index, ())

    def values(self) -> list[bytes | None]:
        return self._pieces(self.value_starts, self.value_lengths)

    def keys(self) -> list[bytes | None]:
        return self._pieces(self.key_starts, self.key_lengths)

    def values_concatenated(self) -> tuple[UInt8Array, Int64Array]:
        """All values end to end and the n + 1 positions that delimit them (nulls are empty).

        The form a consumer hands to numpy or Arrow without one object per record.
        """
        lengths = np.maximum(self.value_lengths, 0)
        bounds = np.zeros(lengths.size + 1, np.int64)
        np.cumsum(lengths, out=bounds[1:])
        return gather_pieces(self.records, self.value_starts, lengths), bounds

    def to_records(self) -> list[Record]:
        headers = self.record_headers
        return [
            Record(offset, timestamp_ms, key, value, headers.get(index, ()))
            for index, (offset, timestamp_ms, key, value) in enumerate(
                zip(
                    self.offsets.tolist(),
                    self.timestamps_ms.tolist(),
                    self.keys(),
                    self.values(),
                    strict=True,
                )
            )
        ]

    def _piece(self, start: int, length: int) -> memoryview | None:
        if length < 0:
            return None
        return self.records[start : start + length].data

    def _pieces(self, starts: Int64Array, lengths: Int64Array) -> list[bytes | None]:
        pieces = split_pieces(self.records, starts, np.maximum(lengths, 0))
        for index in np.flatnonzero(lengths < 0).tolist():
            pieces[index] = None
        return pieces


WALK_BELOW_RECORDS: Final = 24
"""Batches of fewer records are walked one record at a time (`small`, which has the figures):
for small batches that beats the array passes' fixed cost per batch."""


def parse_batch(
    buf: Buffer,
    *,
    check_crc: bool = True,
    walk_below_records: int | None = None,
    header: BatchHeader | None = None,
) -> BatchView:
    """Validate a batch and decode every record into arrays (rejects what read_records rejects).

    `check_crc=False` is only for bytes whose CRC was checked when they entered the log.
    `walk_below_records` picks the decoder by record count (tests force one or the other).
    `header` is the header `validate_batch` or `scan_batches` already returned for exactly these
    bytes: on a consumer's small batches a second validation is a fifth of the decode.
    """
    view = as_byte_view(buf)
    if header is None or header.size_bytes != view.nbytes:
        header = validate_batch(view, strict=False, check_crc=check_crc)
    limit = WALK_BELOW_RECORDS if walk_below_records is None else walk_below_records
    if header.record_count < limit:
        return _walked_view(view, header)
    records = np.frombuffer(uncompressed_records(view, header), np.uint8)
    count = header.record_count
    if records.size < count * RECORD_BYTES_MIN:
        raise _corrupt(f"{count} records cannot fit in {records.size} bytes")
    starts, body_starts = record_starts(records, count)
    return _decode_fields(records, starts, body_starts, header)


def _walked_view(view: memoryview, header: BatchHeader) -> BatchView:
    section = uncompressed_records(view, header)  # the caller's bytes when uncompressed
    walked = walk_records(bytes(section), header)
    # One array for the seven columns: each np.array call costs about a microsecond.
    columns = np.array(walked[:7], np.int64)
    return BatchView(
        header=header,
        records=np.frombuffer(section, np.uint8),
        offsets=columns[0],
        timestamps_ms=columns[1],
        key_starts=columns[2],
        key_lengths=columns[3],
        value_starts=columns[4],
        value_lengths=columns[5],
        header_counts=columns[6],
        record_headers=walked.record_headers,
    )


def _field(
    records: UInt8Array, cursor: Int64Array, bytes_max: int, bad: BoolArray
) -> tuple[Int64Array, Int64Array]:
    """Decode one varint field of every record; return (values, cursor after it)."""
    values, sizes_bytes, well_formed = read_varints_array(records, cursor, bytes_max)
    bad |= ~well_formed
    return values, cursor + sizes_bytes


def _decode_fields(
    records: UInt8Array, starts: Int64Array, body_starts: Int64Array, header: BatchHeader
) -> BatchView:
    """Decode and check every field of every record; no guess survives a failed check.

    Each record ends where the next starts (the last at the end of the data): `record_starts`
    decoded every length varint and chained them, so the lengths are not decoded again.
    """
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[-1] = records.size
    assert bool((ends - body_starts >= RECORD_BODY_BYTES_MIN).all()), "chained by length"
    bad = np.zeros(starts.size, np.bool_)
    # Skip the attributes byte: unused in v2 and ignored by Kafka's own readers.
    timestamp_deltas_ms, cursor = _field(records, body_starts + 1, VARLONG_BYTES_MAX, bad)
    offset_deltas, cursor = _field(records, cursor, VARINT_BYTES_MAX, bad)
    key_lengths, key_starts = _field(records, cursor, VARINT_BYTES_MAX, bad)
    value_lengths, value_starts = _field(
        records, key_starts + np.maximum(key_lengths, 0), VARINT_BYTES_MAX, bad
    )
    headers_at = value_starts + np.maximum(value_lengths, 0)
    header_counts, cursor = _field(records, headers_at, VARINT_BYTES_MAX, bad)
    bad |= (key_lengths < -1) | (value_lengths < -1) | (header_counts < 0)
    bad |= header_counts > limits.HEADERS_PER_RECORD_MAX
    # Cursors only move forward, so a field that overran its record leaves cursor > end.
    bad |= cursor > ends
    bad |= (header_counts == 0) & (cursor != ends)
    if bad.any():
        index = int(bad.argmax())
        raise _corrupt(f"record {index} at byte {int(starts[index])} is malformed")
    _check_offset_deltas(offset_deltas, header)
    return BatchView(
        header=header,
        records=records,
        offsets=offset_deltas + header.base_offset,
        timestamps_ms=_timestamps_ms(timestamp_deltas_ms, header),
        key_starts=key_starts,
        key_lengths=key_lengths,
        value_starts=value_starts,
        value_lengths=value_lengths,
        header_counts=header_counts,
        record_headers=_decode_all_headers(records, headers_at, ends, header_counts),
    )


def _check_offset_deltas(offset_deltas: Int64Array, header: BatchHeader) -> None:
    increasing = offset_deltas.size == 1 or bool((np.diff(offset_deltas) > 0).all())
    first, last = int(offset_deltas[0]), int(offset_deltas[-1])
    if not increasing or first < 0 or last > header.last_offset_delta:
        raise ZlogError(
            ErrorCode.INVALID_RECORD,
            f"offset deltas must increase from 0 up to lastOffsetDelta "
            f"{header.last_offset_delta}; they run {first}..{last}",
        )


def _timestamps_ms(timestamp_deltas_ms: Int64Array, header: BatchHeader) -> Int64Array:
    if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
        return np.full(timestamp_deltas_ms.size, header.max_timestamp_ms, np.int64)
    base_ms = header.base_timestamp_ms
    low_ms, high_ms = int(timestamp_deltas_ms.min()), int(timestamp_deltas_ms.max())
    if base_ms + low_ms < INT64_MIN or base_ms + high_ms > INT64_MAX:
        raise _corrupt("a timestamp delta overflows int64")
    return timestamp_deltas_ms + base_ms


def _decode_all_headers(
    records: UInt8Array, headers_at: Int64Array, ends: Int64Array, header_counts: Int64Array
) -> dict[int, RecordHeaders]:
    """Headers of the records that have any, decoded one record at a time by the general codec."""
    with_headers = np.flatnonzero(header_counts > 0).tolist()
    if not with_headers:
        return {}
    data = records.tobytes()
    decoded: dict[int, RecordHeaders] = {}
    for index in with_headers:
        end = int(ends[index])
        headers, position = decode_headers(data, int(headers_at[index]), end)
        if position != end:
            raise _corrupt(f"record {index} has {end - position} bytes left over")
        decoded[index] = headers
    return decoded
