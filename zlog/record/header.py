"""The RecordBatch v2 header (magic 2): layout, validation, CRC-32C, stamping and sealing.

The same bytes travel in a produce request, sit in the ring and the segment file and go out in
a fetch response, so the broker's work per batch is `validate_batch` (O(1) plus a CRC) and
`stamp` (the base offset lies outside the CRC), and neither reads a record. Records are
encoded and decoded behind the header by `records` (one at a time, any batch), `arrays` (a
whole batch per numpy pass) and `small` (small batches); `compression` holds the codecs.

Batch layout (big-endian; the CRC-32C covers attributes .. end):

    offset  size  field
         0     8  baseOffset             stamped by the broker
         8     4  batchLength            bytes after this field
        12     4  partitionLeaderEpoch   stamped by the broker
        16     1  magic                  2
        17     4  crc                    uint32, CRC-32C of bytes 21 .. end
        21     2  attributes             bits 0-2 codec, 3 timestamp type, 4 transactional,
                                         5 control
        23     4  lastOffsetDelta
        27     8  baseTimestamp
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  records count
        61        records, compressed as a whole by the codec the attributes name

Errors: a malformed batch raises `ZlogError` with CORRUPT_MESSAGE (framing, CRC, varints,
lengths), INVALID_RECORD (counts and offsets that contradict each other),
UNSUPPORTED_COMPRESSION_TYPE or MESSAGE_TOO_LARGE; no other exception escapes on bad input.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, TypeAlias

import crc32c

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.record.varint import INT32_MAX, INT64_MAX, INT64_MIN

Buffer: TypeAlias = bytes | bytearray | memoryview

BATCH_HEADER_BYTES: Final = 61
# baseOffset and batchLength: the log overhead (Kafka's name), the prefix that frames a batch
# wherever batches lie back to back (a segment, a ring, a fetch answer); a PAD in the ring is
# this prefix alone. batchLength counts the bytes after it.
LOG_OVERHEAD: Final = struct.Struct(">qi")
LOG_OVERHEAD_BYTES: Final = 12
MAGIC: Final = 2
# The smallest record: a 1-byte length and six 1-byte fields (attributes, timestamp delta,
# offset delta, key length, value length, headers count). Bounds a claimed record count.
RECORD_BODY_BYTES_MIN: Final = 6
RECORD_BYTES_MIN: Final = 1 + RECORD_BODY_BYTES_MIN

_HEADER: Final = struct.Struct(
    ">q"  # baseOffset
    "i"  # batchLength
    "i"  # partitionLeaderEpoch
    "b"  # magic
    "I"  # crc
    "h"  # attributes
    "i"  # lastOffsetDelta
    "q"  # baseTimestamp
    "q"  # maxTimestamp
    "q"  # producerId
    "h"  # producerEpoch
    "i"  # baseSequence
    "i"  # records count
)
_BASE_OFFSET: Final = struct.Struct(">q")
_INT32: Final = struct.Struct(">i")
_CRC: Final = struct.Struct(">I")
# Where the fields that code outside this module reads or writes in place lie (the table above).
BATCH_LENGTH_AT: Final = 8
PARTITION_LEADER_EPOCH_AT: Final = 12
MAGIC_AT: Final = 16
CRC_AT: Final = 17
CRC_COVERS_FROM: Final = 21  # the attributes field
LAST_OFFSET_DELTA_AT: Final = 23
MAX_TIMESTAMP_AT: Final = 35
_BATCH_LENGTH_MIN: Final = BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES
# What placing a batch in the log needs, in one unpack: baseOffset, batchLength,
# lastOffsetDelta and maxTimestamp (the bytes between them skipped).
_PLACEMENT: Final = struct.Struct(">qi11xi8xq")

CODEC_MASK: Final = 0x07
TIMESTAMP_TYPE_BIT: Final = 0x08
_TRANSACTIONAL_BIT: Final = 0x10
_CONTROL_BIT: Final = 0x20

assert _HEADER.size == BATCH_HEADER_BYTES
assert LOG_OVERHEAD.size == LOG_OVERHEAD_BYTES == PARTITION_LEADER_EPOCH_AT
assert _PLACEMENT.size == MAX_TIMESTAMP_AT + 8
# baseOffset, batchLength, lastOffsetDelta and maxTimestamp, as the whole header lays them out.
assert _PLACEMENT.unpack_from(_HEADER.pack(*range(1, 14))) == (1, 2, 7, 9)


class Compression(IntEnum):
    """The codec in attribute bits 0-2: Kafka's five, all read and written (compression.py)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """Attribute bit 3: whose clock the record timestamps come from."""

    CREATE_TIME = 0  # the producer's; each record carries its own
    LOG_APPEND_TIME = 1  # the broker's; every record takes the batch's max timestamp


SUPPORTED_COMPRESSION: Final = frozenset(Compression)


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61 fixed bytes in front of a batch's records, one field per wire field."""

    base_offset: int
    batch_length: int  # bytes after the batchLength field
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp_ms: int
    max_timestamp_ms: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD_BYTES

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> Compression:
        codec = self.attributes & CODEC_MASK
        if codec > Compression.ZSTD:
            raise ZlogError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown codec {codec}")
        return Compression(codec)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & TIMESTAMP_TYPE_BIT else 0)


def _corrupt(message: str) -> ZlogError:
    return ZlogError(ErrorCode.CORRUPT_MESSAGE, message)


def _invalid(message: str) -> ZlogError:
    return ZlogError(ErrorCode.INVALID_RECORD, message)


def as_byte_view(buf: Buffer) -> memoryview:
    """A flat view of bytes over any buffer, so lengths and slices count bytes."""
    view = memoryview(buf)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view


# ---------------------------------------------------------------------------------------------
# Header, validation, stamping, scanning.
# ---------------------------------------------------------------------------------------------


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the header at `pos` without looking at anything else (O(1))."""
    available_bytes = as_byte_view(buf).nbytes - pos
    if pos < 0 or available_bytes < BATCH_HEADER_BYTES:
        raise _corrupt(
            f"a batch header needs {BATCH_HEADER_BYTES} bytes, {max(available_bytes, 0)} remain"
        )
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise _corrupt(f"magic is {header.magic}, zlog reads only RecordBatch v2 (magic 2)")
    if header.batch_length < _BATCH_LENGTH_MIN:
        raise _corrupt(f"batchLength {header.batch_length} is shorter than the batch header")
    return header


def validate_batch(buf: Buffer, *, strict: bool = True, check_crc: bool = True) -> BatchHeader:
    """Check that `buf` is exactly one well-framed batch with a valid CRC, without decoding records.

    `strict` is for batches fresh from a producer, whose offset deltas must be 0..count-1;
    batches rewritten by compaction keep their last offset delta across the gaps.
    `check_crc=False` is only for bytes whose CRC was checked when they entered the log.
    """
    return _validate(as_byte_view(buf), strict=strict, check_crc=check_crc)


def _validate(view: memoryview, *, strict: bool, check_crc: bool) -> BatchHeader:
    size_bytes = view.nbytes
    if size_bytes < BATCH_HEADER_BYTES:
        raise _corrupt(f"a batch of {size_bytes} bytes is shorter than its header")
    if size_bytes > limits.BATCH_SIZE_BYTES_MAX:
        raise ZlogError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"a batch of {size_bytes} bytes exceeds {limits.BATCH_SIZE_BYTES_MAX} bytes",
        )
    header = read_header(view)
    if header.size_bytes != size_bytes:
        raise _corrupt(f"batchLength says {header.size_bytes} bytes, the batch has {size_bytes}")
    if check_crc:
        crc = crc32c.crc32c(view[CRC_COVERS_FROM:])
        if crc != header.crc:
            raise _corrupt(f"CRC-32C is {crc:#010x}, the header says {header.crc:#010x}")
    _check_header_fields(header, strict=strict)
    return header


def verify_crc(buf: Buffer) -> None:
    """CORRUPT_MESSAGE unless the CRC-32C of a batch (already framed and checked) is right.

    The log runs this on the ring's own copy of a batch, right after the copy, while the
    bytes are still in the CPU cache: the CRC then costs a fraction of a read from memory.
    """
    view = as_byte_view(buf)
    (stored,) = _CRC.unpack_from(view, CRC_AT)
    crc = crc32c.crc32c(view[CRC_COVERS_FROM:])
    if crc != stored:
        raise _corrupt(f"CRC-32C is {crc:#010x}, the header says {stored:#010x}")


def _check_header_fields(header: BatchHeader, *, strict: bool) -> None:
    count = header.record_count
    if count <= 0:
        raise _invalid(f"a batch must hold at least one record, this one claims {count}")
    if count > limits.BATCH_RECORDS_MAX:
        raise _invalid(f"{count} records exceed the bound of {limits.BATCH_RECORDS_MAX}")
    if strict and header.last_offset_delta != count - 1:
        raise _invalid(
            f"lastOffsetDelta is {header.last_offset_delta} for {count} records, not {count - 1}"
        )
    if header.last_offset_delta < count - 1:
        raise _invalid(f"lastOffsetDelta {header.last_offset_delta} cannot hold {count} records")
    if header.base_offset < 0 or header.last_offset > INT64_MAX:
        raise _corrupt(f"offsets {header.base_offset}..{header.last_offset} are out of range")
    codec = header.attributes & CODEC_MASK
    if codec not in SUPPORTED_COMPRESSION:
        raise ZlogError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"codec {codec} is not one of Kafka's (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)",
        )
    records_bytes = header.size_bytes - BATCH_HEADER_BYTES
    if codec == Compression.NONE and records_bytes < count * RECORD_BYTES_MIN:
        raise _corrupt(f"{count} records cannot fit in {records_bytes} bytes")


def stamp(
    buf: bytearray | memoryview, base_offset: int, partition_leader_epoch: int | None = None
) -> None:
    """Write the broker-assigned fields in place; both lie outside the CRC, which stays valid."""
    view = as_byte_view(buf)
    assert not view.readonly, "stamp needs a writable buffer"
    assert view.nbytes >= BATCH_HEADER_BYTES and view[MAGIC_AT] == MAGIC
    assert 0 <= base_offset <= INT64_MAX - INT32_MAX, base_offset
    _BASE_OFFSET.pack_into(view, 0, base_offset)
    if partition_leader_epoch is not None:
        assert -1 <= partition_leader_epoch <= INT32_MAX, partition_leader_epoch
        _INT32.pack_into(view, PARTITION_LEADER_EPOCH_AT, partition_leader_epoch)


def size_bytes_at(buf: Buffer, pos: int = 0) -> int:
    """The size of the batch at `pos` as its batchLength says, unchecked: for walking batches
    that were validated when they entered the log, such as what a read of it returns."""
    return int(_INT32.unpack_from(buf, pos + BATCH_LENGTH_AT)[0]) + LOG_OVERHEAD_BYTES


def read_placement(buf: Buffer, pos: int = 0) -> tuple[int, int, int, int]:
    """(base offset, next offset, max timestamp, size in bytes) of the batch at `pos`,
    unchecked: what the log needs to place and index a batch validated on its way in."""
    base_offset, batch_length, last_offset_delta, max_timestamp_ms = _PLACEMENT.unpack_from(
        buf, pos)
    return (base_offset, base_offset + last_offset_delta + 1, max_timestamp_ms,
            batch_length + LOG_OVERHEAD_BYTES)


def next_offset_after(chunks: Sequence[Buffer], offset: int) -> int:
    """The offset after the last batch of `chunks` (whole batches as a log read returns them,
    validated on their way in), or `offset` when they hold none: where a read that asked for
    `offset` leaves off."""
    next_offset = offset
    for chunk in chunks:
        view = as_byte_view(chunk)
        position = 0
        while position < view.nbytes:
            _base, next_offset, _stamp, size_bytes = read_placement(view, position)
            position += size_bytes
    return next_offset


def scan_batches(
    buf: Buffer, start: int = 0, *, check_crc: bool = True, stop_at: int | None = None
) -> tuple[list[tuple[int, BatchHeader]], int]:
    """Walk whole batches from `start` and stop at the first torn or invalid one, or at the
    first batch starting at or past `stop_at` (a caller checking a file a piece at a time).

    Returns [(position, header)] and the end of the valid prefix, where recovery cuts the
    log. Garbage never raises: it only ends the prefix. Records are not decoded.
    """
    view = as_byte_view(buf)
    end_bytes = view.nbytes
    assert 0 <= start <= end_bytes
    stop = end_bytes if stop_at is None else stop_at
    found: list[tuple[int, BatchHeader]] = []
    pos = start
    # Each pass consumes at least a header, so the loop is bounded by the buffer size.
    while end_bytes - pos >= BATCH_HEADER_BYTES and pos < stop:
        size_bytes = size_bytes_at(view, pos)
        if size_bytes < BATCH_HEADER_BYTES or size_bytes > end_bytes - pos:
            break
        try:
            header = _validate(view[pos : pos + size_bytes], strict=False, check_crc=check_crc)
        except ZlogError:
            break
        found.append((pos, header))
        pos += size_bytes
    assert start <= pos <= end_bytes
    return found, pos


# ---------------------------------------------------------------------------------------------
# Building: the header in front of records already encoded, and the limits builders keep.
# ---------------------------------------------------------------------------------------------


def write_header(
    batch: bytearray | memoryview,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp_ms: int,
    max_timestamp_ms: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    record_count: int,
) -> None:
    """Fill the first 61 bytes of a batch whose records are already in place, then its CRC."""
    view = as_byte_view(batch)
    assert not view.readonly and view.nbytes >= BATCH_HEADER_BYTES
    assert 0 < record_count <= last_offset_delta + 1
    _HEADER.pack_into(
        view,
        0,
        base_offset,
        view.nbytes - LOG_OVERHEAD_BYTES,
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_timestamp_ms,
        max_timestamp_ms,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    )
    _CRC.pack_into(view, CRC_AT, crc32c.crc32c(view[CRC_COVERS_FROM:]))


def attributes_for(compression: Compression, *, is_transactional: bool = False) -> int:
    """The attributes a builder writes: the codec and the transactional bit, CreateTime."""
    if compression not in SUPPORTED_COMPRESSION:
        raise ZlogError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"cannot write codec {int(compression)}: it is not one of Kafka's",
        )
    return int(compression) | (_TRANSACTIONAL_BIT if is_transactional else 0)


def check_record_count(count: int) -> None:
    """A builder refuses what validate_batch would refuse: no records, or too many."""
    if count <= 0:
        raise _invalid("a batch needs at least one record")
    if count > limits.BATCH_RECORDS_MAX:
        raise _invalid(f"{count} records exceed the bound of {limits.BATCH_RECORDS_MAX}")


def check_timestamp_range(timestamp_ms_min: int, timestamp_ms_max: int, base_ms: int) -> None:
    """Every timestamp and its delta from the base must fit the int64 fields that carry them."""
    if timestamp_ms_min < INT64_MIN or timestamp_ms_max > INT64_MAX:
        raise ZlogError(ErrorCode.INVALID_TIMESTAMP, "a timestamp does not fit in int64")
    if not (INT64_MIN <= base_ms <= INT64_MAX):
        raise ZlogError(ErrorCode.INVALID_TIMESTAMP, "the base timestamp does not fit in int64")
    if timestamp_ms_min - base_ms < INT64_MIN or timestamp_ms_max - base_ms > INT64_MAX:
        raise ZlogError(ErrorCode.INVALID_TIMESTAMP, "a timestamp delta does not fit in int64")


def check_records_size(records_bytes: int) -> None:
    """A builder refuses records that readers would not inflate (the decompression bound)."""
    if records_bytes > limits.DECOMPRESSED_BATCH_BYTES_MAX:
        raise ZlogError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"{records_bytes} bytes of records exceed {limits.DECOMPRESSED_BATCH_BYTES_MAX}",
        )


def seal_batch(records_section: Buffer, **fields: int) -> bytes:
    """Put the header in front of an (already compressed) records section and return the batch."""
    size_bytes = BATCH_HEADER_BYTES + as_byte_view(records_section).nbytes
    if size_bytes > limits.BATCH_SIZE_BYTES_MAX:
        raise ZlogError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"a batch of {size_bytes} bytes exceeds {limits.BATCH_SIZE_BYTES_MAX} bytes",
        )
    batch = bytearray(size_bytes)
    batch[BATCH_HEADER_BYTES:] = records_section
    write_header(batch, **fields)
    return bytes(batch)
