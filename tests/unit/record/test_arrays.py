"""The array codec, held to the general codec: same bytes out, same records back, every path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.record.batch_edits import reseal
from zlog.record import arrays, starts
from zlog.record.arrays import BatchView, build_batch_from_values, parse_batch
from zlog.record.header import Compression, validate_batch
from zlog.record.records import NewRecord, build_batch, read_records

CODECS = [Compression.NONE, Compression.LZ4]


def general_equivalent(
    values: list[bytes], keys: list[bytes | None] | None, timestamps_ms: list[int]
) -> list[NewRecord]:
    keys = keys if keys is not None else [None] * len(values)
    return [
        NewRecord(value, key=key, timestamp_ms=stamp_ms)
        for value, key, stamp_ms in zip(values, keys, timestamps_ms, strict=True)
    ]


def assert_view_matches(view: BatchView, batch: bytes) -> None:
    """Every accessor of the view agrees with the general reader."""
    records = read_records(batch)
    assert view.to_records() == records
    assert len(view) == len(records)
    assert view.offsets.tolist() == [record.offset for record in records]
    assert view.timestamps_ms.tolist() == [record.timestamp_ms for record in records]
    assert view.values() == [record.value for record in records]
    assert view.keys() == [record.key for record in records]
    packed, bounds = view.values_concatenated()
    assert packed.tobytes() == b"".join(record.value or b"" for record in records)
    assert bounds[0] == 0 and bounds[-1] == packed.size and bounds.size == len(records) + 1
    for index in (0, len(records) - 1):
        value = view.value(index)
        assert (None if value is None else bytes(value)) == records[index].value
        key = view.key(index)
        assert (None if key is None else bytes(key)) == records[index].key
        assert view.headers(index) == records[index].headers


# ---------------------------------------------------------------------------------------------
# Building: the same bytes as the general codec
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", CODECS)
@pytest.mark.parametrize("count", [1, 63, 64, 1_000, 20_000])
def test_fast_build_equals_general_build(compression: Compression, count: int) -> None:
    """Counts straddle the 1-byte to 2-byte offset-delta varint boundary at 64."""
    rng = np.random.default_rng(count)
    values = [rng.bytes(100) for _ in range(count)]
    fast = build_batch_from_values(values, timestamp_ms=1_700_000_000_000, compression=compression)
    general = build_batch(general_equivalent(values, None, [1_700_000_000_000] * count))
    if compression == Compression.NONE:
        assert fast == general
    assert read_records(fast) == read_records(general)
    assert validate_batch(fast).compression == compression
    assert_view_matches(parse_batch(fast), fast)


@pytest.mark.parametrize("compression", CODECS)
def test_fast_build_with_keys_timestamps_and_odd_sizes(compression: Compression) -> None:
    rng = np.random.default_rng(7)
    sizes = [0, 1, 63, 64, 127, 128, 8191, 8192, 70_000, 100, 0, 5]  # 1, 2 and 3-byte lengths
    values = [rng.bytes(size) for size in sizes]
    keys: list[bytes | None] = [None, b"", b"k" * 200, *[rng.bytes(4)] * 8, None]
    timestamps_ms = [1_000, -5, 10**12, 0, *range(8)]
    fast = build_batch_from_values(
        values,
        keys=keys,
        timestamp_ms=np.array(timestamps_ms, np.int64),
        base_offset=9,
        compression=compression,
        producer_id=3,
        producer_epoch=1,
        base_sequence=10,
    )
    general = build_batch(
        general_equivalent(values, keys, timestamps_ms),
        base_offset=9,
        compression=compression,
        producer_id=3,
        producer_epoch=1,
        base_sequence=10,
    )
    assert fast == general
    assert_view_matches(parse_batch(fast), fast)


def test_fast_build_from_a_2d_array_equals_a_list_of_rows() -> None:
    rows = np.random.default_rng(3).integers(0, 256, (500, 40), dtype=np.uint8)
    from_array = build_batch_from_values(rows, timestamp_ms=5)
    from_list = build_batch_from_values([row.tobytes() for row in rows], timestamp_ms=5)
    assert from_array == from_list
    packed, bounds = parse_batch(from_array).values_concatenated()
    assert np.array_equal(packed.reshape(500, 40), rows)
    assert np.array_equal(bounds, np.arange(501) * 40)


# ---------------------------------------------------------------------------------------------
# Parsing: every strategy for finding record starts gives the general reader's answer
# ---------------------------------------------------------------------------------------------


def spy_on(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Count calls to a module-level function of the array decoder's search for record starts.

    Small batches are walked one record at a time (`small`); these tests are about the
    array passes, so the walk is switched off while they run.
    """
    monkeypatch.setattr(arrays, "WALK_BELOW_RECORDS", 0)
    calls: list[int] = []
    original = getattr(starts, name)

    def counting(*args: object) -> object:
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(starts, name, counting)
    return calls


@pytest.mark.parametrize("compression", CODECS)
def test_general_batches_parse_to_the_same_records(compression: Compression) -> None:
    records = [
        NewRecord(b"v" * (index % 7) if index % 5 else None, key=b"k" if index % 3 else None)
        for index in range(300)
    ]
    records[10] = NewRecord(b"h", headers=(("a", b"1"), ("b", None)))
    records[299] = NewRecord(b"last", headers=(("z", b""),))
    batch = build_batch(records, base_offset=5, compression=compression)
    assert_view_matches(parse_batch(batch), batch)


def test_regular_batches_are_found_by_speculation(monkeypatch: pytest.MonkeyPatch) -> None:
    doubling = spy_on(monkeypatch, "_chain_by_doubling")
    batch = build_batch_from_values([b"x" * 100] * 10_000, timestamp_ms=1)
    assert_view_matches(parse_batch(batch), batch)
    assert doubling == []


def test_irregular_batches_are_found_by_pointer_doubling(monkeypatch: pytest.MonkeyPatch) -> None:
    doubling = spy_on(monkeypatch, "_chain_by_doubling")
    serial = spy_on(monkeypatch, "_chain_serially")
    rng = np.random.default_rng(11)
    values = [rng.bytes(int(size)) for size in rng.integers(0, 300, 2_000)]
    batch = build_batch_from_values(values, timestamp_ms=rng.integers(0, 10**6, 2_000))
    assert_view_matches(parse_batch(batch), batch)
    assert doubling and serial == []


def test_runs_of_sizes_use_speculation_then_doubling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Speculation re-predicts a few times, then pointer doubling finds the rest."""
    doubling = spy_on(monkeypatch, "_chain_by_doubling")
    values = [bytes([65 + size]) * size for size in range(10, 16) for _ in range(50)]
    batch = build_batch_from_values(values, timestamp_ms=0)
    assert_view_matches(parse_batch(batch), batch)
    assert doubling == [1]


def test_values_with_many_zero_bytes_still_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Zero bytes look like attributes bytes, so each one makes a few false candidates."""
    serial = spy_on(monkeypatch, "_chain_serially")
    rng = np.random.default_rng(5)
    values = [(rng.bytes(int(size)) + bytes(8)) for size in rng.integers(0, 100, 500)]
    batch = build_batch_from_values(values, timestamp_ms=0)
    assert_view_matches(parse_batch(batch), batch)
    assert serial == []


def test_zero_filled_values_parse_by_the_serial_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Indexing every zero byte would cost eight bytes each; walking the lengths costs less."""
    serial = spy_on(monkeypatch, "_chain_serially")
    values = [bytes(int(size)) for size in np.random.default_rng(5).integers(0, 200, 500)]
    batch = build_batch_from_values(values, timestamp_ms=0)
    assert_view_matches(parse_batch(batch), batch)
    assert serial == [1]


def test_nonzero_record_attributes_fall_back_to_the_serial_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka ignores record attributes; the candidate filter assumes zero, the walk does not."""
    serial = spy_on(monkeypatch, "_chain_serially")
    values = [b"a" * size for size in (10, 20, 30, 40, 50)]
    batch = bytearray(build_batch_from_values(values, timestamp_ms=0))
    # Record 2: attributes, then 1-byte timestamp delta, offset delta and key length.
    attributes_at = 61 + int(parse_batch(batch).key_starts[2]) - 4
    assert batch[attributes_at] == 0
    batch[attributes_at] = 0x40
    sealed = reseal(batch)
    assert_view_matches(parse_batch(sealed), sealed)
    assert serial == [1]


def test_uncompressed_views_share_the_callers_buffer() -> None:
    batch = bytearray(build_batch_from_values([b"abc", b"def"], timestamp_ms=0))
    view = parse_batch(batch)
    position = 61 + int(view.value_starts[1])
    batch[position] = ord("X")
    assert bytes(view.value(1) or b"") == b"Xef"


def test_parse_without_crc_check_trusts_the_crc() -> None:
    batch = bytearray(build_batch_from_values([b"abc"], timestamp_ms=0))
    batch[17] ^= 0xFF
    assert parse_batch(bytes(batch), check_crc=False).values() == [b"abc"]


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

header_strategy = st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5))
record_strategy = st.builds(
    NewRecord,
    value=st.none() | st.binary(max_size=200),
    key=st.none() | st.binary(max_size=10),
    headers=st.lists(header_strategy, max_size=2).map(tuple),
    timestamp_ms=st.none() | st.integers(min_value=0, max_value=2**41),
)


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(record_strategy, min_size=1, max_size=40),
    compression=st.sampled_from(CODECS),
)
def test_any_general_batch_parses_like_the_general_reader(
    records: list[NewRecord], compression: Compression
) -> None:
    batch = build_batch(records, base_offset=77, compression=compression)
    assert_view_matches(parse_batch(batch), batch)


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    count=st.integers(min_value=1, max_value=100),
    value_bytes_max=st.sampled_from([0, 3, 200]),
)
def test_any_values_build_like_the_general_builder(
    data: st.DataObject, count: int, value_bytes_max: int
) -> None:
    values = data.draw(
        st.lists(st.binary(max_size=value_bytes_max), min_size=count, max_size=count)
    )
    keys = data.draw(
        st.none() | st.lists(st.none() | st.binary(max_size=5), min_size=count, max_size=count)
    )
    stamps_ms = data.draw(
        st.lists(st.integers(min_value=0, max_value=2**40), min_size=count, max_size=count)
    )
    fast = build_batch_from_values(values, keys=keys, timestamp_ms=np.array(stamps_ms, np.int64))
    assert fast == build_batch(general_equivalent(values, keys, stamps_ms))
    assert_view_matches(parse_batch(fast), fast)
