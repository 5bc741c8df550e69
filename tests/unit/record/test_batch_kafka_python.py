"""Conformance against an independent RecordBatch v2 codec: kafka-python's DefaultRecordBatch.

Kafka clients must read what zlog writes and zlog must read what they write, byte for byte
(DESIGN.md section 2: one format end to end).
"""

from __future__ import annotations

import numpy as np
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from zlog.record.arrays import build_batch_from_values, parse_batch
from zlog.record.header import Compression, stamp, validate_batch
from zlog.record.records import NewRecord, Record, build_batch, read_records, validate_records

CODECS = [Compression.NONE, Compression.LZ4]

RECORDS = [
    NewRecord(b"value-0", key=b"key-0", timestamp_ms=1_700_000_000_000),
    NewRecord(None, key=b"tombstone", timestamp_ms=1_700_000_000_003),
    NewRecord(b"", timestamp_ms=1_699_999_999_000),
    NewRecord(
        b"headers" * 20,
        key=b"h",
        headers=(("trace", b"t-1"), ("none", None), ("ü", b"")),
        timestamp_ms=1_700_000_000_001,
    ),
    NewRecord(b"big " * 20_000, key=None, timestamp_ms=1_700_000_000_002),
]


def kafka_python_records(batch: bytes) -> list[Record]:
    """Decode with kafka-python, checking its CRC first (it must be done before iterating)."""
    decoded = DefaultRecordBatch(batch)
    assert decoded.validate_crc()
    return [
        Record(
            offset=record.offset,
            timestamp_ms=record.timestamp,
            key=record.key,
            value=record.value,
            headers=tuple(record.headers),
        )
        for record in decoded
    ]


@pytest.mark.parametrize("compression", CODECS)
def test_kafka_python_reads_general_batches(compression: Compression) -> None:
    batch = bytearray(
        build_batch(RECORDS, compression=compression, producer_id=7, producer_epoch=2)
    )
    stamp(batch, base_offset=1_000, partition_leader_epoch=3)
    decoded = DefaultRecordBatch(bytes(batch))
    assert decoded.validate_crc()
    assert decoded.base_offset == 1_000 and decoded.leader_epoch == 3
    assert decoded.magic == 2
    assert decoded.compression_type == int(compression)
    assert decoded.records_count == len(RECORDS)
    assert decoded.last_offset_delta == len(RECORDS) - 1
    assert decoded.max_timestamp == 1_700_000_000_003
    assert (decoded.producer_id, decoded.producer_epoch) == (7, 2)
    assert kafka_python_records(bytes(batch)) == read_records(batch)
    assert [record.value for record in read_records(batch)] == [r.value for r in RECORDS]


@pytest.mark.parametrize("compression", CODECS)
def test_kafka_python_reads_fast_batches(compression: Compression) -> None:
    rng = np.random.default_rng(1)
    values = [b"%d" % index * int(size) for index, size in enumerate(rng.integers(0, 50, 3_000))]
    keys: list[bytes | None] = [None if index % 4 else b"k%d" % index for index in range(3_000)]
    timestamps_ms = 1_700_000_000_000 + np.arange(3_000, dtype=np.int64)
    batch = build_batch_from_values(
        values, keys=keys, timestamp_ms=timestamps_ms, base_offset=50, compression=compression
    )
    records = kafka_python_records(batch)
    assert [record.value for record in records] == values
    assert [record.key for record in records] == keys
    assert [record.offset for record in records] == list(range(50, 3_050))
    assert [record.timestamp_ms for record in records] == timestamps_ms.tolist()


def test_kafka_python_reads_a_fetched_run_of_batches() -> None:
    """A fetch response carries whole batches back to back; clients split them."""
    first = bytearray(build_batch_from_values([b"a", b"b"], timestamp_ms=1))
    second = bytearray(build_batch(RECORDS[:2], compression=Compression.LZ4))
    stamp(first, base_offset=0)
    stamp(second, base_offset=2)
    fetched = MemoryRecords(bytes(first + second))
    offsets: list[int] = []
    while fetched.has_next():
        offsets.extend(record.offset for record in fetched.next_batch())
    assert offsets == [0, 1, 2, 3]


def build_with_kafka_python(
    compression: Compression, records: list[NewRecord], producer_id: int = -1
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(compression),
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        batch_size=64 * 1024 * 1024,
    )
    for offset, record in enumerate(records):
        headers = list(record.headers)
        assert builder.append(offset, record.timestamp_ms, record.key, record.value, headers)
    return bytes(builder.build())


@pytest.mark.parametrize("compression", CODECS)
def test_kafka_python_batches_read_here(compression: Compression) -> None:
    batch = build_with_kafka_python(compression, RECORDS, producer_id=99)
    header = validate_batch(batch, strict=True)
    # kafka-python sends uncompressed when LZ4 does not shrink the batch; these records shrink.
    assert header.compression == compression
    assert header.producer_id == 99
    validate_records(batch)
    expected = kafka_python_records(batch)
    assert read_records(batch) == expected
    assert parse_batch(batch).to_records() == expected


@pytest.mark.parametrize("compression", CODECS)
def test_many_kafka_python_records_parse_fast(compression: Compression) -> None:
    records = [
        NewRecord(b"%06d" % index * (1 + index % 30), timestamp_ms=1_000 + index % 97)
        for index in range(5_000)
    ]
    batch = build_with_kafka_python(compression, records)
    assert validate_batch(batch).compression == compression
    view = parse_batch(batch)
    assert view.values() == [record.value for record in records]
    assert view.timestamps_ms.tolist() == [record.timestamp_ms for record in records]


@pytest.mark.parametrize("compression", CODECS)
def test_same_bytes_as_kafka_python(compression: Compression) -> None:
    """With kafka-python's conventions (first timestamp as base, epoch 0) the bytes are equal."""
    records = [
        NewRecord(b"value %d" % index * 9, key=b"k", timestamp_ms=5_000 + index)
        for index in range(200)
    ]
    theirs = build_with_kafka_python(compression, records)
    ours = build_batch(
        records, base_timestamp_ms=5_000, partition_leader_epoch=0, compression=compression
    )
    assert ours == theirs
