"""A consumer never returns a record below its position, nor twice, nor a control record.

Fetches answer with whole stored batches, so the first usually starts before the offset
asked for (docs/protocol.md, Fetch v0).
"""

from __future__ import annotations

import struct

import crc32c
import pytest

from zlog.client.fetch_buffer import (
    PartitionBuffer,
    batches_from_chunk,
    trim_view,
)
from zlog.errors import ErrorCode, ZlogError
from zlog.record.arrays import (
    WALK_BELOW_RECORDS,
    BatchView,
    build_batch_from_values,
    parse_batch,
)
from zlog.record.header import Compression
from zlog.record.records import NewRecord, build_batch
from zlog.types import TopicPartition

WALK_ALWAYS = 2**31  # decode every batch one record at a time, whatever its size

TP = TopicPartition("t", 3)


def batch(base_offset: int, count: int, compression: Compression = Compression.NONE) -> bytes:
    values = [f"v{base_offset + i}".encode() for i in range(count)]
    return build_batch_from_values(values, timestamp_ms=1000 + base_offset,
                                   base_offset=base_offset, compression=compression)


def control_batch(base_offset: int) -> bytes:
    raw = bytearray(build_batch([NewRecord(b"marker")], base_offset=base_offset))
    attributes = struct.unpack_from(">h", raw, 21)[0] | 0x20  # the control bit
    struct.pack_into(">h", raw, 21, attributes)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    return bytes(raw)


def offsets_of(views: list) -> list[int]:  # type: ignore[type-arg]
    return [int(o) for view in views for o in view.offsets]


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4])
def test_records_below_the_position_are_skipped(compression: Compression) -> None:
    chunk = batch(10, 5, compression) + batch(15, 5, compression)
    assert offsets_of(batches_from_chunk(chunk, 12)) == [12, 13, 14, 15, 16, 17, 18, 19]
    assert offsets_of(batches_from_chunk(chunk, 15)) == [15, 16, 17, 18, 19]
    assert offsets_of(batches_from_chunk(chunk, 20)) == []


def test_control_batches_are_not_returned() -> None:
    chunk = batch(0, 2) + control_batch(2) + batch(3, 1)
    assert offsets_of(batches_from_chunk(chunk, 0)) == [0, 1, 3]


def test_a_frame_that_is_not_whole_batches_is_corrupt() -> None:
    chunk = batch(0, 2) + b"\x00" * 30
    with pytest.raises(ZlogError) as caught:
        batches_from_chunk(chunk, 0)
    assert caught.value.code == ErrorCode.CORRUPT_MESSAGE
    broken = bytearray(batch(0, 2))
    broken[-1] ^= 0xFF  # the CRC no longer matches
    with pytest.raises(ZlogError):
        batches_from_chunk(bytes(broken), 0)


def test_trim_keeps_values_and_headers_aligned() -> None:
    records = [NewRecord(b"a"), NewRecord(b"b", headers=(("h", b"1"),)), NewRecord(b"c")]
    view = parse_batch(build_batch(records, base_offset=50))
    trimmed = trim_view(view, 51)
    assert trimmed is not None
    assert [(r.offset, r.value, r.headers) for r in trimmed.to_records()] == [
        (51, b"b", (("h", b"1"),)), (52, b"c", ())]
    assert trim_view(view, 50) is view
    assert trim_view(view, 53) is None


def test_take_records_moves_the_position_record_by_record() -> None:
    buffer = PartitionBuffer()
    buffer.add(batches_from_chunk(batch(0, 3) + batch(3, 3), 1))
    records, position = buffer.take_records(TP, 3)
    assert [(r.offset, r.value) for r in records] == [(1, b"v1"), (2, b"v2"), (3, b"v3")]
    assert records[0].topic == "t" and records[0].partition == 3
    assert records[0].timestamp_ms == 1000
    assert position == 4
    records, position = buffer.take_records(TP, 100)
    assert [r.offset for r in records] == [4, 5]
    assert position == 6
    assert not buffer
    assert buffer.take_records(TP, 5) == ([], None)


def test_take_batches_returns_everything_and_the_next_position() -> None:
    buffer = PartitionBuffer()
    buffer.add(batches_from_chunk(batch(0, 3) + batch(3, 3), 2))
    views, position = buffer.take_batches()
    assert offsets_of(views) == [2, 3, 4, 5]
    assert views[0].values() == [b"v2"]
    assert position == 6
    assert buffer.take_batches() == ([], None)


def _columns(view: BatchView) -> list[list[int]]:
    return [column.tolist() for column in (
        view.offsets, view.timestamps_ms, view.key_starts, view.key_lengths, view.value_starts,
        view.value_lengths, view.header_counts)]


@pytest.mark.parametrize("count", [1, 2, WALK_BELOW_RECORDS - 1, WALK_BELOW_RECORDS])
@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4])
def test_small_batches_decode_as_the_array_parser_does(count: int,
                                                       compression: Compression) -> None:
    records = [
        NewRecord(None if i % 5 == 4 else f"value-{i}".encode(),
                  key=f"k{i}".encode() if i % 2 else None,
                  headers=(("h", b"x"), ("n", None)) if i % 3 == 0 else (),
                  timestamp_ms=2000 + 3 * i)
        for i in range(count)
    ]
    raw = build_batch(records, base_offset=70, compression=compression)
    expected = parse_batch(raw, walk_below_records=0)
    small = parse_batch(raw, walk_below_records=WALK_ALWAYS)
    assert _columns(small) == _columns(expected)
    assert small.record_headers == expected.record_headers
    assert small.values() == expected.values() and small.keys() == expected.keys()
    skip = min(count - 1, 1)
    [fetched] = batches_from_chunk(raw, 70 + skip)
    assert [(r.offset, r.key, r.value, r.headers) for r in fetched.to_records()] == [
        (r.offset, r.key, r.value, r.headers) for r in expected.to_records()][skip:]


def test_small_batch_parser_refuses_what_the_array_parser_refuses() -> None:
    raw = build_batch([NewRecord(b"abc"), NewRecord(b"defgh")])
    # Every single-byte change of the records section, CRC not checked (as after a scan).
    for position in range(61, len(raw)):
        for replacement in (0x00, 0x7F, 0x80, 0xFF):
            broken = bytearray(raw)
            broken[position] = replacement
            try:
                expected = parse_batch(bytes(broken), check_crc=False, walk_below_records=0)
            except ZlogError as error:
                with pytest.raises(ZlogError) as caught:
                    parse_batch(bytes(broken), check_crc=False, walk_below_records=WALK_ALWAYS)
                # The walker checks fields in record order, so which complaint comes first
                # may differ; both are refusals of the batch.
                assert {caught.value.code, error.code} <= {
                    ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD}
            else:
                small = parse_batch(bytes(broken), check_crc=False,
                                    walk_below_records=WALK_ALWAYS)
                assert _columns(small) == _columns(expected)
