"""The plain encoder of small batches, held to the general builder: the same bytes exactly."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from zlog.record.header import Compression
from zlog.record.records import NewRecord, build_batch
from zlog.record.small import PLAIN_TIMESTAMP_MS_MAX, build_plain_batch

plain_record = st.tuples(
    st.none() | st.binary(max_size=300),  # value
    st.none() | st.binary(max_size=20),  # key
    st.integers(min_value=0, max_value=PLAIN_TIMESTAMP_MS_MAX),
)


@settings(max_examples=200, deadline=None)
@given(
    records=st.lists(plain_record, min_size=1, max_size=30),
    keyless=st.booleans(),
    compression=st.sampled_from([Compression.NONE, Compression.LZ4]),
    producer=st.sampled_from([(-1, -1, -1), (7, 2, 2**31 - 1)]),
)
def test_plain_batches_are_the_general_builders_bytes(
    records: list[tuple[bytes | None, bytes | None, int]],
    keyless: bool,
    compression: Compression,
    producer: tuple[int, int, int],
) -> None:
    values = [value for value, _, _ in records]
    keys = None if keyless else [key for _, key, _ in records]
    stamps_ms = [stamp_ms for _, _, stamp_ms in records]
    producer_id, producer_epoch, base_sequence = producer
    expected = build_batch(
        [
            NewRecord(value, key=None if keys is None else keys[index], timestamp_ms=stamp_ms)
            for index, (value, stamp_ms) in enumerate(zip(values, stamps_ms, strict=True))
        ],
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    assert build_plain_batch(
        values,
        keys,
        stamps_ms,
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    ) == expected
