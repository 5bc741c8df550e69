"""Fetched batches -> Arrow rows (zlog/spark/arrow_rows.py), checked against the batch codec."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zlog.record.arrays import build_batch_from_values, parse_batch
from zlog.record.header import Compression
from zlog.record.records import NewRecord, build_batch
from zlog.spark.arrow_rows import ArrowRowBuilder, gather
from zlog.spark.schema import source_arrow_schema

pieces = st.lists(st.tuples(st.integers(0, 5), st.integers(-1, 9)), min_size=1, max_size=40)


@given(pieces)
def test_gather_packs_the_pieces_end_to_end(layout: list[tuple[int, int]]) -> None:
    starts, lengths, position = [], [], 0
    for gap, length in layout:
        position += gap
        starts.append(position)
        lengths.append(length)
        position += max(length, 0)
    records = np.arange(position + 3, dtype=np.uint8)
    expected = b"".join(bytes(records[s:s + max(n, 0)]) for s, n in zip(starts, lengths,
                                                                          strict=True))
    got = gather(records, np.array(starts, np.int64), np.array(lengths, np.int64))
    assert got.tobytes() == expected
    assert got.flags.c_contiguous, "Arrow takes the buffer as it is"


def test_evenly_spaced_one_byte_pieces_come_out_contiguous() -> None:
    got = gather(np.arange(40, dtype=np.uint8), np.arange(0, 40, 10, dtype=np.int64),
                 np.ones(4, np.int64))
    assert got.tolist() == [0, 10, 20, 30] and got.flags.c_contiguous


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4])
def test_rows_match_the_records_and_stop_at_the_count(compression: Compression) -> None:
    records = [
        NewRecord(value=None if i % 7 == 0 else f"value-{i}".encode() * (i % 3 + 1),
                  key=None if i % 5 == 0 else f"k{i}".encode(),
                  headers=(("h", f"{i}".encode()), ("n", None)) if i % 4 == 0 else (),
                  timestamp_ms=1_700_000_000_000 + i)
        for i in range(40)
    ]
    view = parse_batch(build_batch(records, base_offset=1000, compression=compression))
    builder = ArrowRowBuilder("clicks", 2)
    builder.add(view, 30)
    batch = builder.build()
    assert batch is not None and batch.schema.equals(source_arrow_schema())
    rows = batch.to_pylist()
    assert len(rows) == 30
    for index, row in enumerate(rows):
        record = records[index]
        assert row["key"] == record.key and row["value"] == record.value
        assert (row["topic"], row["partition"], row["offset"]) == ("clicks", 2, 1000 + index)
        assert row["timestamp"] == datetime.fromtimestamp(
            (1_700_000_000_000 + index) / 1000, UTC)
        assert row["timestampType"] == 0
        assert [(h["key"], h["value"]) for h in row["headers"]] == list(record.headers)
    assert builder.build() is None, "build starts afresh"


def test_fixed_size_values_from_several_batches_make_one_arrow_batch() -> None:
    builder = ArrowRowBuilder("t", 0)
    for base in (0, 100):
        values = np.full((100, 16), base // 100 + 1, np.uint8)
        builder.add(parse_batch(build_batch_from_values(values, timestamp_ms=5)), 100)
    batch = builder.build()
    assert batch is not None and batch.num_rows == 200
    assert batch.column("value").to_pylist() == [b"\x01" * 16] * 100 + [b"\x02" * 16] * 100
    assert batch.column("key").null_count == 200
