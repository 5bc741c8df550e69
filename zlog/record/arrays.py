"""The array codec for RecordBatch v2: a whole batch per numpy pass, no Python loop per record.

Producers and consumers move thousands of records per batch, so a per-record Python loop would
cap zlog at a few hundred thousand records a second. Here each record field becomes one array
(lengths, offset deltas, key and value positions) and is encoded or decoded for every record by
a fixed number of numpy operations. Records have no headers on the build side; the parser reads
headers too, one record at a time but only for the records that carry them.

Finding where records start is the one serial-looking step of parsing, since each record's
length says where the next begins. Most batches are regular (equal values, so equal record
sizes over long runs), so the parser first *speculates*: it predicts evenly spaced starts, checks
them all at once and re-speculates from the first miss. For irregular batches it filters every
byte position down to plausible record starts and follows their next-record pointers by pointer
doubling. A guess only ever saves time: every start is checked by decoding its record, the
records must chain exactly to the end of the data, and a batch neither method explains is walked
record by record, which also yields the precise error. `header.read_records` is the reference the
tests hold this module to.
"""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.record.header import (
    BATCH_HEADER_BYTES,
    RECORD_BODY_BYTES_MIN,
    RECORD_BYTES_MIN,
    BatchHeader,
    Buffer,
    Compression,
    Record,
    RecordHeaders,
    TimestampType,
    as_byte_view,
    attributes_for,
    check_record_count,
    check_records_size,
    check_timestamp_range,
    compress_records,
    decode_headers,
    seal_batch,
    uncompressed_records,
    validate_batch,
    write_header,
)
from zlog.record.small import walk_records
from zlog.record.varint import (
    INT64_MAX,
    INT64_MIN,
    VARINT_BYTES_MAX,
    VARLONG_BYTES_MAX,
    BoolArray,
    Int64Array,
    UInt8Array,
    UInt64Array,
    decode_varint,
    read_varints_array,
    varint_sizes_array,
    write_varints_array,
    zigzag_encode_array,
)

# Above this many runs of evenly spaced equal-length pieces, copying through a byte mask is
# cheaper than one strided copy per run.
_COPY_RUNS_MAX: Final = 32
# Speculation re-predicts at most this often, and gives up on runs shorter than the minimum.
_SPECULATION_RUNS_MAX: Final = 4
_SPECULATION_RUN_RECORDS_MIN: Final = 16
# Pointer doubling indexes zero bytes; past this many per record the serial walk is cheaper.
_ZERO_BYTES_PER_RECORD_MAX: Final = 16
_ZERO_BYTES_SLACK: Final = 4096


def _corrupt(message: str) -> ZlogError:
    return ZlogError(ErrorCode.CORRUPT_MESSAGE, message)


# ---------------------------------------------------------------------------------------------
# Copying pieces between a packed payload and their places in a batch.
# ---------------------------------------------------------------------------------------------


def _uniform_runs(
    starts: Int64Array, lengths: Int64Array
) -> list[tuple[int, int, int, int]] | None:
    """Split pieces into runs of equal length and equal spacing: (first, stop, stride, width).

    None when there are so many runs that a byte mask is the cheaper copy.
    """
    count = starts.size
    if count == 1:
        return [(0, 1, max(int(lengths[0]), 1), int(lengths[0]))]
    strides = np.diff(starts)
    breaks = lengths[1:] != lengths[:-1]
    breaks[1:] |= strides[1:] != strides[:-1]
    cuts = np.flatnonzero(breaks) + 1
    if cuts.size >= _COPY_RUNS_MAX:
        return None
    bounds = [0, *cuts.tolist(), count]
    runs = []
    for first, stop in itertools.pairwise(bounds):
        width = int(lengths[first])
        stride = int(strides[first]) if stop - first > 1 else max(width, 1)
        assert stride >= width, "pieces never overlap"
        runs.append((first, stop, stride, width))
    return runs


def _rows(buf: UInt8Array, start: int, count: int, stride: int, width: int) -> UInt8Array:
    """A (count, width) view of buf whose rows start `stride` bytes apart."""
    return np.ndarray((count, width), np.uint8, buffer=buf, offset=start, strides=(stride, 1))


def _piece_mask(size_bytes: int, starts: Int64Array, lengths: Int64Array) -> BoolArray:
    """True on every byte covered by a piece; pieces are sorted and disjoint.

    Built as alternating runs of False (the gap before a piece) and True (the piece), which
    np.repeat writes in one pass.
    """
    count = starts.size
    ends = starts + lengths
    run_bytes = np.empty(2 * count + 1, np.int64)
    run_bytes[0] = starts[0]
    run_bytes[2:-1:2] = starts[1:] - ends[:-1]
    run_bytes[1::2] = lengths
    run_bytes[-1] = size_bytes - ends[-1]
    assert bool((run_bytes >= 0).all()), "pieces are sorted, disjoint and inside the buffer"
    pattern = np.zeros(2 * count + 1, np.bool_)
    pattern[1::2] = True
    return np.repeat(pattern, run_bytes)


def scatter_pieces(
    out: UInt8Array, starts: Int64Array, lengths: Int64Array, payload: UInt8Array
) -> None:
    """Copy the pieces packed end to end in `payload` so that piece i lands at out[starts[i]:]."""
    assert payload.size == int(lengths.sum())
    if payload.size == 0:
        return
    runs = _uniform_runs(starts, lengths)
    if runs is None:
        out[_piece_mask(out.size, starts, lengths)] = payload
        return
    payload_at = 0
    for first, stop, stride, width in runs:
        count = stop - first
        rows = _rows(out, int(starts[first]), count, stride, width)
        rows[...] = payload[payload_at : payload_at + count * width].reshape(count, width)
        payload_at += count * width


def gather_pieces(buf: UInt8Array, starts: Int64Array, lengths: Int64Array) -> UInt8Array:
    """The pieces buf[starts[i]:starts[i] + lengths[i]], packed end to end in a new array."""
    total_bytes = int(lengths.sum())
    if total_bytes == 0:
        return np.empty(0, np.uint8)
    runs = _uniform_runs(starts, lengths)
    if runs is None:
        return buf[_piece_mask(buf.size, starts, lengths)]
    packed = np.empty(total_bytes, np.uint8)
    packed_at = 0
    for first, stop, stride, width in runs:
        count = stop - first
        rows = _rows(buf, int(starts[first]), count, stride, width)
        packed[packed_at : packed_at + count * width].reshape(count, width)[...] = rows
        packed_at += count * width
    return packed


def split_pieces(buf: UInt8Array, starts: Int64Array, lengths: Int64Array) -> list[bytes | None]:
    """The pieces as separate bytes objects: the one per-record object a list of values needs.

    An evenly spaced run becomes one struct format ("100s10x100s..."), so a single C call
    makes all of its bytes objects; the struct module caches formats, and batches repeat them.
    """
    runs = _uniform_runs(starts, lengths)
    if runs is None:
        data = buf.tobytes()
        ends = starts + lengths
        return list(map(data.__getitem__, map(slice, starts.tolist(), ends.tolist())))
    pieces: list[bytes | None] = []
    for first, stop, stride, width in runs:
        layout = f"{width}s{stride - width}x" * (stop - first - 1) + f"{width}s"
        pieces.extend(struct.unpack_from(layout, buf.data, int(starts[first])))
    return pieces


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
    if int(body_bytes.max()) > limits.record_size_bytes_max:
        raise ZlogError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"a record exceeds {limits.record_size_bytes_max} bytes",
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

    No headers and no null values (use `header.build_batch`). The bytes equal those of
    `header.build_batch` for the same records.
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
    if batch.size > limits.batch_size_bytes_max:
        raise ZlogError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"a batch of {batch.size} bytes exceeds {limits.batch_size_bytes_max} bytes",
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
"""Batches of fewer records are walked one record at a time (`small`): below about 30
records that beats the array passes' fixed cost per batch."""


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
    starts, body_starts = _record_starts(records, count)
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


# Where records start, and where their bodies (the bytes after the length varint) start.
Starts = tuple[Int64Array, Int64Array]


def _record_ends(
    records: UInt8Array, starts: Int64Array
) -> tuple[Int64Array, Int64Array, BoolArray]:
    """Body start and end of the records at `starts`, and whether each length is plausible."""
    lengths, sizes_bytes, well_formed = read_varints_array(records, starts, VARINT_BYTES_MAX)
    body_starts = starts + sizes_bytes
    ends = body_starts + lengths
    plausible = well_formed & (lengths >= RECORD_BODY_BYTES_MIN) & (ends <= records.size)
    return body_starts, ends, plausible


def _record_starts(records: UInt8Array, count: int) -> Starts:
    """Every record's start, each one's length varint decoded and chained to the next start."""
    (found, found_bodies), position = _speculate(records, count)
    if found.size == count:
        if position != records.size:
            raise _corrupt(f"{records.size - position} bytes follow the last of {count} records")
        return found, found_bodies
    rest = _chain_by_doubling(records, position, count - found.size)
    if rest is None:
        rest = _chain_serially(records, position, count - found.size)
    return np.concatenate((found, rest[0])), np.concatenate((found_bodies, rest[1]))


def _speculate(records: UInt8Array, count: int) -> tuple[Starts, int]:
    """Starts of the leading records, found by predicting runs of equal-size records.

    A run is predicted from one decoded record: the records after it are assumed to repeat its
    size, which holds when their length varints repeat its bytes, and that is checked for all
    predicted starts at once. Returns the starts confirmed and the position after them.
    """
    data_bytes = records.size
    confirmed: list[Int64Array] = []
    bodies: list[Int64Array] = []
    found = 0
    position = 0
    for _run in range(_SPECULATION_RUNS_MAX):
        prefix = records[position : position + VARINT_BYTES_MAX].tobytes()
        try:
            length, body_at = decode_varint(prefix, 0, len(prefix))
        except ZlogError:
            break
        size_bytes = body_at + length
        if length < RECORD_BODY_BYTES_MIN or size_bytes > data_bytes - position:
            break
        fitting = min(count - found, (data_bytes - position) // size_bytes)
        predicted = position + size_bytes * np.arange(fitting, dtype=np.int64)
        matches = records.take(predicted) == prefix[0]
        for byte_index in range(1, body_at):
            matches &= records.take(predicted + byte_index) == prefix[byte_index]
        run = fitting if matches.all() else int(matches.argmin())
        assert run >= 1, "the first prediction is the record just decoded"
        confirmed.append(predicted[:run])
        bodies.append(predicted[:run] + body_at)
        found += run
        position += size_bytes * run
        if found == count or run < _SPECULATION_RUN_RECORDS_MIN:
            break
    if not confirmed:
        return (np.empty(0, np.int64), np.empty(0, np.int64)), 0
    return (np.concatenate(confirmed), np.concatenate(bodies)), position


def _candidate_starts(segment: UInt8Array, count: int) -> Int64Array | None:
    """Sorted positions that could start a record of under 1 MiB whose attributes byte is zero.

    Every record producers write has a zero attributes byte right after its 1-3 byte length
    varint, so candidates are found back from the zero bytes; a record this misses (non-zero
    attributes, or 1 MiB and more) is found by the serial walk instead. So is every record of a
    batch whose values are mostly zeros: None rather than eight bytes of index per zero byte.
    """
    is_zero = segment == 0
    if np.count_nonzero(is_zero) > _ZERO_BYTES_PER_RECORD_MAX * count + _ZERO_BYTES_SLACK:
        return None
    zeros = np.flatnonzero(is_zero)
    found: list[Int64Array] = []
    for size_bytes in (1, 2, 3):
        at = zeros[zeros >= size_bytes] - size_bytes
        first = segment[at]
        fits = (first & 1) == 0  # an even zigzag value: the length is not negative
        if size_bytes == 1:
            fits &= (first < 0x80) & (first >= 2 * RECORD_BODY_BYTES_MIN)
        else:
            for byte_index in range(size_bytes - 1):
                fits &= segment[at + byte_index] >= 0x80
            fits &= segment[at + size_bytes - 1] < 0x80
        found.append(at[fits])
    return np.sort(np.concatenate(found))


def _chain_by_doubling(records: UInt8Array, position: int, count: int) -> Starts | None:
    """The next `count` record starts from `position`, found by pointer doubling; None if unsure."""
    segment = records[position:]
    candidates = _candidate_starts(segment, count)
    if candidates is None or candidates.size < count or candidates[0] != 0:
        return None
    total = candidates.size
    body_starts, ends, plausible = _record_ends(segment, candidates)
    index = np.minimum(np.searchsorted(candidates, ends), total - 1)
    terminal, dead = total, total + 1
    successor = np.where(candidates[index] == ends, index, dead)
    successor[ends == segment.size] = terminal
    successor[~plausible] = dead
    jump = np.concatenate((successor, np.array([terminal, dead], np.int64)))
    chain = _follow(jump, count)
    if chain is None:
        return None
    return candidates[chain] + position, body_starts[chain] + position


def _follow(jump: Int64Array, count: int) -> Int64Array | None:
    """The `count` nodes on the path from node 0 if it then reaches the terminal node, else None.

    `jump` maps each node to its successor; its last two entries are the terminal and a dead
    node, each its own successor.
    """
    total = jump.size - 2
    terminal, dead = total, total + 1
    # Most candidates off the chain are pointed to by none: drop those twice over, and the
    # survivors usually are the chain already.
    alive = np.ones(total, np.bool_)
    for _round in range(2):
        pointed = np.zeros(total + 2, np.bool_)
        pointed[jump[:total][alive]] = True
        pointed[0] = True
        alive &= pointed[:total]
    survivors = np.flatnonzero(alive)
    if (
        survivors.size == count
        and bool((jump[survivors[:-1]] == survivors[1:]).all())
        and jump[survivors[-1]] == terminal
    ):
        return survivors
    reached = np.zeros(total + 2, np.bool_)
    reached[0] = True
    # After r rounds `reached` holds the first 2**r nodes of the path from node 0.
    for _round in range(math.ceil(math.log2(count + 1))):
        reached[jump[reached]] = True
        jump = jump[jump]
    chain = np.flatnonzero(reached[:total])
    if chain.size != count or not reached[terminal] or reached[dead]:
        return None
    return chain


def _chain_serially(records: UInt8Array, position: int, count: int) -> Starts:
    """The next `count` record starts, one length at a time: the reference and the error path."""
    data = records.tobytes()
    size = len(data)
    starts = np.empty(count, np.int64)
    body_starts = np.empty(count, np.int64)
    for index in range(count):
        starts[index] = position
        length, body_start = decode_varint(data, position, size)
        if length < RECORD_BODY_BYTES_MIN or length > size - body_start:
            raise _corrupt(f"a record at byte {position} claims {length} bytes")
        body_starts[index] = body_start
        position = body_start + length
    if position != size:
        raise _corrupt(f"{size - position} bytes follow the last of the records")
    return starts, body_starts


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

    Each record ends where the next starts (the last at the end of the data): `_record_starts`
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
    bad |= header_counts > limits.headers_per_record_max
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
