"""The general RecordBatch v2 codec: round trips, header fields, stamping and scanning a log.

The layout under test is Kafka's RecordBatch v2 (magic 2), as documented in
org.apache.kafka.common.record.DefaultRecordBatch and DefaultRecord.
"""

from __future__ import annotations

import struct

import lz4.frame
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.record.batch_edits import reseal
from zlog.errors import ErrorCode, ZlogError
from zlog.record.header import (
    BATCH_HEADER_BYTES,
    LOG_OVERHEAD_BYTES,
    Compression,
    TimestampType,
    read_header,
    scan_batches,
    stamp,
    validate_batch,
)
from zlog.record.records import NewRecord, Record, build_batch, read_records, validate_records

CODECS = [Compression.NONE, Compression.LZ4]


def expected_records(
    records: list[NewRecord], base_offset: int, base_timestamp_ms: int
) -> list[Record]:
    return [
        Record(
            offset=base_offset + index,
            timestamp_ms=base_timestamp_ms if record.timestamp_ms is None else record.timestamp_ms,
            key=record.key,
            value=record.value,
            headers=record.headers,
        )
        for index, record in enumerate(records)
    ]


MIXED = [
    NewRecord(b"plain value", timestamp_ms=1_700_000_000_000),
    NewRecord(None, key=b"tombstone-key", timestamp_ms=1_700_000_000_005),
    NewRecord(b"", key=b"", timestamp_ms=1_699_999_999_990),
    NewRecord(
        b"with headers",
        key=b"k",
        headers=(("trace-id", b"abc"), ("empty", b""), ("null", None), ("ключ", b"\xff")),
        timestamp_ms=1_700_000_000_001,
    ),
    NewRecord(b"x" * 100, timestamp_ms=1_700_000_000_002),  # 2-byte length varints
    NewRecord(bytes(range(256)) * 280, key=b"big"),  # 71,680 bytes: 3-byte length varints
]


def test_header_sizes_match_kafka() -> None:
    assert BATCH_HEADER_BYTES == 61
    assert LOG_OVERHEAD_BYTES == 12


@pytest.mark.parametrize("compression", CODECS)
def test_round_trip_keeps_every_field(compression: Compression) -> None:
    batch = build_batch(MIXED, base_offset=42, compression=compression)
    header = validate_batch(batch)
    assert header.compression == compression
    assert header.record_count == len(MIXED)
    assert header.last_offset_delta == len(MIXED) - 1
    assert header.base_offset == 42 and header.last_offset == 47 and header.next_offset == 48
    assert header.size_bytes == len(batch)
    # The record without a timestamp takes the default base: the largest timestamp given.
    assert header.base_timestamp_ms == 1_700_000_000_005
    assert header.max_timestamp_ms == 1_700_000_000_005
    assert read_records(batch) == expected_records(MIXED, 42, 1_700_000_000_005)
    validate_records(batch)


@pytest.mark.parametrize("compression", CODECS)
@pytest.mark.parametrize("count", [1, 20_000])
def test_round_trip_one_and_many_records(compression: Compression, count: int) -> None:
    records = [NewRecord(f"value-{index}".encode(), timestamp_ms=index) for index in range(count)]
    batch = build_batch(records, compression=compression)
    header = validate_batch(batch)
    assert header.record_count == count
    assert read_records(batch) == expected_records(records, 0, count - 1)


def test_records_without_timestamps_take_the_base_timestamp() -> None:
    records = [NewRecord(b"a"), NewRecord(b"b", timestamp_ms=7)]
    assert [r.timestamp_ms for r in read_records(build_batch(records))] == [7, 7]
    no_stamps = build_batch([NewRecord(b"a")])
    assert read_records(no_stamps)[0].timestamp_ms == 0
    explicit = build_batch(records, base_timestamp_ms=5)
    assert validate_batch(explicit).base_timestamp_ms == 5
    assert [r.timestamp_ms for r in read_records(explicit)] == [5, 7]


def test_producer_fields_and_transactional_bit() -> None:
    batch = build_batch(
        [NewRecord(b"v")] * 3,
        producer_id=1234,
        producer_epoch=5,
        base_sequence=77,
        partition_leader_epoch=9,
        is_transactional=True,
    )
    header = validate_batch(batch)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1234, 5, 77)
    assert header.partition_leader_epoch == 9
    assert header.is_transactional and not header.is_control
    assert header.timestamp_type == TimestampType.CREATE_TIME


def test_compacted_batch_keeps_its_offsets_and_last_offset_delta() -> None:
    """Compaction keeps original offsets, so deltas have gaps and lastOffsetDelta stays."""
    survivors = [NewRecord(b"a"), NewRecord(b"b"), NewRecord(b"c")]
    batch = build_batch(survivors, base_offset=100, offset_deltas=[0, 3, 7], last_offset_delta=9)
    header = validate_batch(batch, strict=False)
    assert header.record_count == 3 and header.last_offset_delta == 9
    assert header.next_offset == 110
    assert [record.offset for record in read_records(batch)] == [100, 103, 107]
    with pytest.raises(ZlogError) as raised:
        validate_batch(batch, strict=True)
    assert raised.value.code == ErrorCode.INVALID_RECORD


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    batch = bytearray(build_batch([NewRecord(b"a", timestamp_ms=1), NewRecord(b"b", None)]))
    struct.pack_into(">q", batch, 35, 999)  # maxTimestamp, as a broker sets it
    batch[22] |= 0x08  # attributes (low byte): LogAppendTime
    sealed = reseal(batch)
    assert read_header(sealed).timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [record.timestamp_ms for record in read_records(sealed)] == [999, 999]


def test_lz4_frames_use_independent_blocks() -> None:
    """Java clients reject LZ4 frames with linked blocks (docs/protocol.md, "Record batches")."""
    batch = build_batch([NewRecord(b"compressible " * 1000)], compression=Compression.LZ4)
    frame_info = lz4.frame.get_frame_info(batch[BATCH_HEADER_BYTES:])
    assert frame_info["block_linked"] is False


def test_read_header_parses_at_a_position() -> None:
    first = build_batch([NewRecord(b"one")], base_offset=3)
    second = build_batch([NewRecord(b"two"), NewRecord(b"three")], base_offset=4)
    log = first + second
    header = read_header(log, len(first))
    assert header.base_offset == 4 and header.record_count == 2
    assert header.size_bytes == len(second)


# ---------------------------------------------------------------------------------------------
# stamp
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", CODECS)
def test_stamp_keeps_the_crc_valid_and_the_records_untouched(compression: Compression) -> None:
    original = build_batch(MIXED, compression=compression)
    stamped = bytearray(original)
    stamp(stamped, base_offset=123_456_789_012, partition_leader_epoch=17)
    header = validate_batch(stamped)
    assert header.base_offset == 123_456_789_012
    assert header.partition_leader_epoch == 17
    assert header.crc == read_header(original).crc
    # Only baseOffset (0..8) and partitionLeaderEpoch (12..16) changed.
    assert stamped[8:12] == original[8:12]
    assert stamped[16:] == original[16:]
    assert read_records(stamped) == expected_records(MIXED, 123_456_789_012, 1_700_000_000_005)


def test_stamp_without_epoch_leaves_the_epoch_and_works_on_a_view() -> None:
    batch = build_batch([NewRecord(b"v")], partition_leader_epoch=4)
    ring = bytearray(10) + bytearray(batch) + bytearray(10)
    view = memoryview(ring)[10 : 10 + len(batch)]
    stamp(view, base_offset=8)
    header = validate_batch(view)
    assert header.base_offset == 8 and header.partition_leader_epoch == 4


# ---------------------------------------------------------------------------------------------
# scan_batches
# ---------------------------------------------------------------------------------------------


def three_batch_log() -> tuple[bytes, list[int]]:
    batches = [
        build_batch([NewRecord(b"a" * 10)] * 3, base_offset=0),
        build_batch([NewRecord(b"b" * 500)] * 4, base_offset=3, compression=Compression.LZ4),
        build_batch(MIXED[:5], base_offset=7),  # headers, nulls, 2-byte lengths
    ]
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    return b"".join(batches), positions


@pytest.mark.parametrize("check_crc", [True, False])
def test_scan_returns_the_valid_prefix_for_a_cut_at_every_byte(check_crc: bool) -> None:
    log, positions = three_batch_log()
    last = positions[-1]
    for cut in range(last, len(log) + 1):
        found, end = scan_batches(log[:cut], check_crc=check_crc)
        if cut == len(log):
            assert [position for position, _ in found] == positions
            assert end == len(log)
        else:
            assert [position for position, _ in found] == positions[:2], cut
            assert end == last, cut


def test_scan_stops_at_a_corrupt_batch() -> None:
    log, positions = three_batch_log()
    damaged = bytearray(log)
    damaged[positions[1] + 70] ^= 0x01  # inside the second batch's records
    found, end = scan_batches(damaged)
    assert [position for position, _ in found] == [0]
    assert end == positions[1]
    # Without the CRC check, a flipped payload byte goes unseen: that is what the CRC is for.
    assert scan_batches(damaged, check_crc=False)[1] == len(log)


def test_scan_starts_where_asked_and_reports_headers() -> None:
    log, positions = three_batch_log()
    found, end = scan_batches(log, positions[1])
    assert [(position, header.base_offset) for position, header in found] == [
        (positions[1], 3),
        (positions[2], 7),
    ]
    assert end == len(log)
    assert scan_batches(b"") == ([], 0)


@settings(max_examples=200, deadline=None)
@given(garbage=st.binary(max_size=300), keep=st.integers(min_value=0, max_value=2))
def test_scan_never_raises_on_garbage(garbage: bytes, keep: int) -> None:
    log, positions = three_batch_log()
    prefix = log[: positions[keep]] if keep else b""
    found, end = scan_batches(prefix + garbage)
    assert len(found) >= keep
    assert len(prefix) <= end <= len(prefix) + len(garbage)


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

header_strategy = st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8))
record_strategy = st.builds(
    NewRecord,
    value=st.none() | st.binary(max_size=300),
    key=st.none() | st.binary(max_size=20),
    headers=st.lists(header_strategy, max_size=3).map(tuple),
    timestamp_ms=st.none() | st.integers(min_value=-(2**40), max_value=2**42),
)


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(record_strategy, min_size=1, max_size=30),
    compression=st.sampled_from(CODECS),
    base_offset=st.integers(min_value=0, max_value=2**62),
)
def test_any_records_round_trip(
    records: list[NewRecord], compression: Compression, base_offset: int
) -> None:
    batch = build_batch(records, base_offset=base_offset, compression=compression)
    header = validate_batch(batch)
    validate_records(batch)
    assert read_records(batch) == expected_records(records, base_offset, header.base_timestamp_ms)
