"""The record accumulator: batches fill to batch_size, leave after linger, memory is bounded.

Kafka's RecordAccumulator rules, driven by hand (time is a number passed in).
"""

from __future__ import annotations

import random
from concurrent.futures import Future

import numpy as np
import pytest

from zlog.client.accumulator import (
    ARRAY_CODEC_RECORDS_MIN,
    BATCH_OVERHEAD_BYTES,
    RECORD_OVERHEAD_BYTES,
    BulkCompletion,
    PendingBatch,
    RecordAccumulator,
    cut_points,
)
from zlog.client.records import RecordMetadata
from zlog.errors import ErrorCode, ZlogError
from zlog.record.header import Compression, validate_batch
from zlog.record.records import NewRecord, build_batch, read_records
from zlog.record.small import PLAIN_BATCH_BYTES_MAX
from zlog.types import TopicPartition

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)


def accumulator(batch_size_bytes: int = 1000, linger_ms: int = 5,
                buffer_memory_bytes: int = 1 << 20) -> RecordAccumulator:
    return RecordAccumulator(batch_size_bytes=batch_size_bytes, linger_ms=linger_ms,
                             buffer_memory_bytes=buffer_memory_bytes)


def append(acc: RecordAccumulator, tp: TopicPartition, value: bytes, *, now_ms: int = 0,
           key: bytes | None = None,
           headers: tuple[tuple[str, bytes | None], ...] = ()) -> tuple[
        Future[RecordMetadata], bool, bool]:
    future: Future[RecordMetadata] = Future()
    opened, closed = acc.append(tp, value=value, key=key, timestamp_ms=1000 + now_ms,
                                headers=headers, future=future, now_ms=now_ms)
    return future, opened, closed


def test_batch_waits_for_linger_then_is_ready() -> None:
    acc = accumulator(linger_ms=5)
    _, opened, closed = append(acc, TP, b"v")
    assert (opened, closed) == (True, False)
    assert acc.ready_partitions(4, flushing=False) == []
    assert acc.ready_partitions(4, flushing=True) == [TP]
    assert acc.ready_partitions(5, flushing=False) == [TP]
    assert acc.next_ready_ms(0) == 5
    assert acc.next_ready_ms(5) is None  # ready already: no longer a future deadline


def test_batch_closes_when_full_and_the_next_record_opens_another() -> None:
    acc = accumulator(batch_size_bytes=BATCH_OVERHEAD_BYTES + 3 * (RECORD_OVERHEAD_BYTES + 10))
    results = [append(acc, TP, b"x" * 10)[1:] for _ in range(4)]
    assert results == [(True, False), (False, False), (False, True), (True, False)]
    assert acc.ready_partitions(0, flushing=False) == [TP]  # the full one needs no linger
    first = acc.pop_first(TP)
    assert first.record_count == 3
    assert acc.ready_partitions(0, flushing=False) == []  # the open one lingers


def test_memory_is_reserved_until_release() -> None:
    acc = accumulator(buffer_memory_bytes=200)
    append(acc, TP, b"x" * 50)
    used = acc.used_bytes
    assert used == BATCH_OVERHEAD_BYTES + RECORD_OVERHEAD_BYTES + 50
    assert not acc.has_room(200 - used + 1)
    batch = acc.pop_first(TP)
    assert acc.used_bytes == used  # still held while in flight
    acc.release(batch)
    assert acc.used_bytes == 0
    assert not acc.unfinished


def test_records_of_a_partition_leave_in_order_and_send_many_goes_after_open_batch() -> None:
    acc = accumulator()
    append(acc, TP, b"first")
    completion = BulkCompletion(1)
    acc.append_chunk(TP, values=[b"bulk"], keys=None, timestamp_ms=5, completion=completion,
                     completion_index=0, size_bytes=100, now_ms=0)
    append(acc, TP, b"last")
    order = []
    while acc.ready_partitions(0, flushing=True):
        batch = acc.pop_first(TP)
        order.append(list(batch.values))
    assert order == [[b"first"], [b"bulk"], [b"last"]]


def test_encoded_batch_carries_producer_fields_and_records() -> None:
    acc = accumulator()
    future, _, _ = append(acc, TP, b"v1", key=b"k1")
    append(acc, TP, b"v2", now_ms=1)
    batch = acc.pop_first(TP)
    for compression in (Compression.NONE, Compression.LZ4):
        encoded = batch.encode(compression, 7, 2, 40)
        header = validate_batch(encoded)
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 40)
        assert header.compression == compression
        records = read_records(encoded)
        assert [(r.key, r.value, r.timestamp_ms) for r in records] == [
            (b"k1", b"v1", 1000), (None, b"v2", 1001)]
    batch.complete(base_offset=100, log_append_time_ms=-1)
    assert future.result() == RecordMetadata("t", 0, 100, 1000)
    assert batch.futures is not None and batch.futures[1].result().offset == 101


def test_headers_and_null_values_take_the_general_codec() -> None:
    acc = accumulator()
    append(acc, TP, b"plain")
    append(acc, TP, b"with", headers=(("h", b"1"),))
    future: Future[RecordMetadata] = Future()
    acc.append(TP, value=None, key=b"tombstone", timestamp_ms=3, headers=(), future=future,
               now_ms=0)
    records = read_records(acc.pop_first(TP).encode(Compression.NONE, -1, -1, -1))
    assert [(r.value, r.headers) for r in records] == [
        (b"plain", ()), (b"with", (("h", b"1"),)), (None, ())]


def test_failure_reaches_every_future() -> None:
    acc = accumulator()
    futures = [append(acc, TP, b"v")[0] for _ in range(3)]
    acc.pop_first(TP).fail(ZlogError(ErrorCode.NOT_ENOUGH_REPLICAS, "two replicas are down"))
    for future in futures:
        error = future.exception()
        assert isinstance(error, ZlogError) and error.code == ErrorCode.NOT_ENOUGH_REPLICAS


def test_expire_removes_only_old_batches() -> None:
    acc = accumulator(batch_size_bytes=1)  # every record its own batch
    append(acc, TP, b"old", now_ms=0)
    append(acc, TP, b"new", now_ms=50)
    expired = acc.expire(now_ms=100, delivery_timeout_ms=60)
    assert [list(b.values) for b in expired] == [[b"old"]]
    assert [list(b.values) for b in acc.batches()] == [[b"new"]]


def test_cut_points_bound_batches_by_bytes() -> None:
    values = [b"x" * 84] * 25  # 100 bytes each with the record overhead
    batch_size_bytes = 1000 + BATCH_OVERHEAD_BYTES  # the batch header counts against the size
    cuts = cut_points(values, None, batch_size_bytes)
    assert [(start, stop) for start, stop, _ in cuts] == [(0, 10), (10, 20), (20, 25)]
    assert cuts[0][2] == batch_size_bytes
    rows = np.zeros((7, 84), np.uint8)
    assert [(a, b) for a, b, _ in cut_points(rows, None, 300 + BATCH_OVERHEAD_BYTES)] == [
        (0, 3), (3, 6), (6, 7)]
    huge = [b"y" * 5000, b"z"]
    assert [(a, b) for a, b, _ in cut_points(huge, None, 1000)] == [(0, 1), (1, 2)]
    assert cut_points([], None, 1000) == []


def test_bulk_completion_resolves_after_every_batch() -> None:
    completion = BulkCompletion(2)
    acc = accumulator()
    for index in range(2):
        acc.append_chunk(OTHER, values=[b"a", b"b"], keys=None, timestamp_ms=9,
                         completion=completion, completion_index=index, size_bytes=100, now_ms=0)
    second, first = acc.pop_first(OTHER), acc.pop_first(OTHER)
    first.complete(base_offset=10, log_append_time_ms=-1)
    assert not completion.future.done()
    second.complete(base_offset=12, log_append_time_ms=-1)
    result = completion.future.result()
    assert [(m.base_offset, m.record_count) for m in result] == [(12, 2), (10, 2)]


@pytest.mark.parametrize("failing_index", [0, 1])
def test_bulk_completion_fails_on_the_first_error(failing_index: int) -> None:
    completion = BulkCompletion(2)
    error = ZlogError(ErrorCode.MESSAGE_TOO_LARGE, "too big")
    completion.batch_failed(error)
    assert completion.future.exception() is error
    completion.batch_failed(ZlogError(ErrorCode.CORRUPT_MESSAGE, "second"))  # ignored
    assert completion.future.exception() is error


@pytest.mark.parametrize("count", [1, ARRAY_CODEC_RECORDS_MIN - 1, ARRAY_CODEC_RECORDS_MIN])
def test_small_and_large_chunks_encode_the_same_records(count: int) -> None:
    """Few records take the general codec, many the array codec; readers see no difference."""
    rows = np.arange(count * 4, dtype=np.uint8).reshape(count, 4)
    for values in (rows, [bytes(row) for row in rows]):
        acc = accumulator(batch_size_bytes=1 << 20)
        acc.append_chunk(TP, values=values, keys=None, timestamp_ms=77,
                         completion=BulkCompletion(1), completion_index=0, size_bytes=100,
                         now_ms=0)
        encoded = acc.pop_first(TP).encode(Compression.NONE, 7, 2, 40)
        header = validate_batch(encoded)
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 40)
        assert [(r.offset, r.value, r.timestamp_ms) for r in read_records(encoded)] == [
            (i, bytes(row), 77) for i, row in enumerate(rows)]


def _sent_batch(records: list[tuple[bytes | None, bytes | None, int]]) -> PendingBatch:
    """A batch filled the way `send` fills one: (value, key, timestamp) per record."""
    acc = accumulator(batch_size_bytes=1 << 20)
    for value, key, stamp_ms in records:
        acc.append(TP, value=value, key=key, timestamp_ms=stamp_ms, headers=(),
                   future=Future(), now_ms=0)
    return acc.pop_first(TP)


def test_small_plain_batches_encode_as_the_general_builder_does() -> None:
    """Batches without headers take a shorter encoder; its bytes are build_batch's, exactly."""
    rng = random.Random(5)
    for _ in range(500):
        records = [
            (None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 1, 127, 128, 3000])),
             None if rng.random() < 0.5 else rng.randbytes(rng.choice([0, 9, 200])),
             rng.choice([0, 1_700_000_000_000 + rng.randint(-10**6, 10**6), 2**62 - 1]))
            for _ in range(rng.randint(1, ARRAY_CODEC_RECORDS_MIN - 1))
        ]
        batch = _sent_batch(records)
        assert batch._is_plain([stamp_ms for _, _, stamp_ms in records])
        compression = rng.choice([Compression.NONE, Compression.LZ4])
        producer = rng.choice([(-1, -1, -1), (7, 2, rng.randint(0, 2**31 - 1))])
        expected = build_batch(
            [NewRecord(value, key=key, timestamp_ms=stamp_ms) for value, key, stamp_ms in records],
            compression=compression, producer_id=producer[0], producer_epoch=producer[1],
            base_sequence=producer[2],
        )
        assert batch.encode(compression, *producer) == expected


def test_unusual_batches_take_the_general_builder() -> None:
    assert not _sent_batch([(b"v", None, -5)])._is_plain([-5]), "a negative timestamp"
    assert not _sent_batch([(b"v", None, 2**62)])._is_plain([2**62])
    big = _sent_batch([(bytes(PLAIN_BATCH_BYTES_MAX), None, 1)])
    assert not big._is_plain([1]), "a large batch"
    assert big.encode(Compression.NONE, -1, -1, -1) == build_batch(
        [NewRecord(bytes(PLAIN_BATCH_BYTES_MAX), timestamp_ms=1)])


def _chunk(acc: RecordAccumulator, rows: np.ndarray, stamp_ms: int, *,
           keys: list[bytes | None] | None = None) -> BulkCompletion:
    """One `send_many` call of `rows`, cut as the producer cuts it, joining up to 1 MB."""
    completion = BulkCompletion(1)
    ((_, _, size_bytes),) = cut_points(rows, keys, 1 << 20)
    acc.append_chunk(TP, values=rows, keys=keys, timestamp_ms=stamp_ms, completion=completion,
                     completion_index=0, size_bytes=size_bytes, now_ms=0,
                     join_bytes_max=1 << 20)
    return completion


def test_queued_array_chunks_of_a_partition_travel_as_one_batch() -> None:
    """send_many calls that queue while the sender is busy leave as one RecordBatch: a 1,000-row
    call then costs the broker and the sender what a 10,000-row call does per row. Each call
    still learns where its own records landed."""
    acc = accumulator(batch_size_bytes=1 << 20)
    first = _chunk(acc, np.full((30, 10), 1, np.uint8), 100)
    second = _chunk(acc, np.full((40, 10), 2, np.uint8), 101)
    batch = acc.pop_first(TP)
    assert not acc.ready_partitions(0, flushing=True)
    assert batch.record_count == 70
    records = read_records(batch.encode(Compression.NONE, 7, 2, 40))
    assert [(r.offset, r.value, r.timestamp_ms) for r in records] == [
        *((i, bytes([1] * 10), 100) for i in range(30)),
        *((30 + i, bytes([2] * 10), 101) for i in range(40))]
    batch.complete(base_offset=500, log_append_time_ms=-1)
    assert [(m.base_offset, m.record_count, m.timestamp_ms) for m in first.future.result()] == [
        (500, 30, 100)]
    assert [(m.base_offset, m.record_count, m.timestamp_ms) for m in second.future.result()] == [
        (530, 40, 101)]
    acc.release(batch)
    assert acc.used_bytes == 0


def test_a_joined_batch_that_fails_fails_every_call_in_it() -> None:
    acc = accumulator(batch_size_bytes=1 << 20)
    calls = [_chunk(acc, np.zeros((30, 10), np.uint8), 5) for _ in range(3)]
    batch = acc.pop_first(TP)
    error = ZlogError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "moved")
    batch.fail(error)
    assert [call.future.exception() for call in calls] == [error] * 3


def test_a_chunk_joins_no_batch_taken_full_keyed_or_of_another_width() -> None:
    acc = accumulator(batch_size_bytes=1 << 20)
    _chunk(acc, np.zeros((30, 10), np.uint8), 5)
    acc.pop_first(TP)  # taken by the sender: its bytes may be on the wire already
    _chunk(acc, np.zeros((30, 10), np.uint8), 5)
    _chunk(acc, np.zeros((30, 11), np.uint8), 5)  # another width
    _chunk(acc, np.zeros((30, 11), np.uint8), 5, keys=[b"k"] * 30)  # keyed
    _chunk(acc, np.zeros((30, 11), np.uint8), 5)
    _chunk(acc, np.zeros((9000, 100), np.uint8), 5)  # together over 1 MB
    _chunk(acc, np.zeros((2000, 100), np.uint8), 5)
    counts = []
    while acc.ready_partitions(0, flushing=True):
        counts.append(acc.pop_first(TP).record_count)
    assert counts == [30, 30, 30, 30, 9000, 2000]
