"""The producer's record accumulator: per-partition batches, bounded by bytes, sent on time.

Kafka's design (RecordAccumulator): `send` appends a record to the open batch of its partition;
a batch is ready when it reaches `batch_size_bytes`, when it has waited `linger_ms`, or on
flush. The sender thread takes ready batches, oldest first per partition, so records of one
partition leave in the order they were sent. `send_many` appends whole pre-cut batches after
closing the open one, so its values never pass through Python one record at a time; a 2-D
array chunk that finds the partition's last queued batch to be an unsent, unkeyed chunk of the
same row width joins it (up to the bulk batch size), so calls that queue while the sender is
busy travel as one RecordBatch and a 1,000-row call costs per row what a 10,000-row one does.

Memory is bounded: every queued record reserves its estimated size out of
`buffer_memory_bytes` until its batch completes; the producer blocks senders when full.

Batches keep their *records* until the sender first takes them, and are encoded then, because
the RecordBatch header (covered by the CRC) carries the producer id and base sequence that are
only assigned at that moment. A retry resends the same bytes, so the sequence never changes.

The module is pure: time comes in as `now_ms`; the caller holds the producer's lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Final, TypeAlias

import numpy as np
import numpy.typing as npt

from zlog.client.delivery_future import DeliveryFuture
from zlog.client.records import BatchMetadata, RecordMetadata
from zlog.errors import ZlogError
from zlog.record.arrays import build_batch_from_values
from zlog.record.header import BATCH_HEADER_BYTES, Compression
from zlog.record.records import NewRecord, RecordHeaders, build_batch
from zlog.record.small import PLAIN_BATCH_BYTES_MAX, PLAIN_TIMESTAMP_MS_MAX, build_plain_batch
from zlog.types import TopicPartition

UInt8Rows: TypeAlias = npt.NDArray[np.uint8]

# Estimated bytes a record adds to a batch beyond its key and value: the record's varints and
# attribute byte. An estimate only: it decides when a batch is full and what memory it holds.
RECORD_OVERHEAD_BYTES: Final = 16
BATCH_OVERHEAD_BYTES: Final = BATCH_HEADER_BYTES
# Below this many records a batch is encoded one record at a time: the array codec's fixed
# cost per batch is more than the general codec's cost per record for small batches
# (zlog/record/small.py has the figures). Small batches are what a producer at a low rate
# sends, so this is the latency path.
ARRAY_CODEC_RECORDS_MIN: Final = 24


class BulkCompletion:
    """Completes one `send_many` call's future once every batch it was cut into is answered."""

    def __init__(self, batch_count: int,
                 future: Future[list[BatchMetadata]] | None = None) -> None:
        assert batch_count > 0
        self.future: Future[list[BatchMetadata]] = future or DeliveryFuture()
        self._results: list[BatchMetadata | None] = [None] * batch_count
        self._remaining = batch_count

    def batch_done(self, index: int, metadata: BatchMetadata) -> None:
        assert self._results[index] is None, "each batch completes once"
        self._results[index] = metadata
        self._remaining -= 1
        if self._remaining == 0 and not self.future.done():
            self.future.set_result([m for m in self._results if m is not None])

    def batch_failed(self, error: ZlogError) -> None:
        if not self.future.done():
            self.future.set_exception(error)


@dataclass(slots=True, eq=False)
class JoinedChunk:
    """A later `send_many` chunk that travels in an earlier chunk's batch, after its records."""

    values: UInt8Rows
    timestamp_ms: int
    completion: BulkCompletion
    completion_index: int


@dataclass(slots=True, eq=False)
class PendingBatch:
    """Records bound for one partition that will travel as one RecordBatch."""

    tp: TopicPartition
    created_ms: int
    values: list[bytes | None] | UInt8Rows
    keys: list[bytes | None] | None
    timestamps_ms: list[int] | int  # one per record (send) or one for all (send_many)
    headers: list[RecordHeaders] | None
    futures: list[Future[RecordMetadata]] | None  # one per record (send)
    completion: BulkCompletion | None  # the send_many call this batch belongs to
    completion_index: int
    size_bytes: int  # estimate, also what it holds of buffer_memory
    record_count: int
    is_open: bool
    # Set by the sender when it first takes the batch; kept across retries.
    encoded: bytes | None = None
    base_sequence: int = -1
    attempts: int = 0
    retry_at_ms: int = 0
    finished: bool = False  # completed or failed; flush waits for this
    last_error: ZlogError | None = None  # why the last attempt failed (named if it expires)
    # The first failed attempt whose records the broker may still have appended (a timeout,
    # a lost connection): a later definite refusal no longer proves the batch was not written.
    maybe_appended: ZlogError | None = None
    failed: bool = False  # finished with an error
    joined: list[JoinedChunk] | None = None  # chunks of later send_many calls, in order

    def first_timestamp_ms(self) -> int:
        stamps = self.timestamps_ms
        return stamps if isinstance(stamps, int) else stamps[0]

    def encode(self, compression: Compression, producer_id: int, producer_epoch: int,
               base_sequence: int) -> bytes:
        """The RecordBatch v2 bytes; array codec when the records allow it and are many."""
        if self.joined:
            return self._encode_joined(compression, producer_id, producer_epoch, base_sequence)
        if self.record_count >= ARRAY_CODEC_RECORDS_MIN and (
            isinstance(self.values, np.ndarray)
            or (self.headers is None and all(v is not None for v in self.values))
        ):
            stamps = self.timestamps_ms
            keys = self.keys
            if keys is not None and all(k is None for k in keys):
                keys = None
            return build_batch_from_values(
                self.values,  # type: ignore[arg-type]  # no None values on this path
                keys=keys,
                timestamp_ms=stamps if isinstance(stamps, int) else np.array(stamps, np.int64),
                compression=compression,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=base_sequence,
            )
        stamps_ms = self.timestamps_ms
        if isinstance(stamps_ms, int):
            stamps_ms = [stamps_ms] * self.record_count
        if self._is_plain(stamps_ms):
            assert isinstance(self.values, list)
            return build_plain_batch(
                self.values,
                self.keys,
                stamps_ms,
                compression=compression,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=base_sequence,
            )
        values: list[bytes | None] = (
            [row.tobytes() for row in self.values] if isinstance(self.values, np.ndarray)
            else self.values
        )
        headers = self.headers or [()] * self.record_count
        keys_or_none = self.keys or [None] * self.record_count
        records = [
            NewRecord(value, key=key, headers=h, timestamp_ms=stamp_ms)
            for value, key, h, stamp_ms in zip(
                values, keys_or_none, headers, stamps_ms, strict=True
            )
        ]
        return build_batch(
            records,
            compression=compression,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )

    def can_join(self, values: list[bytes | None] | UInt8Rows,
                 keys: list[bytes | None] | None) -> bool:
        """Whether a chunk of `values` may travel in this batch: both unkeyed 2-D uint8 arrays of
        one row width, this one a queued `send_many` chunk (never a batch the sender took)."""
        own = self.values
        return (self.completion is not None and self.encoded is None and keys is None
                and self.keys is None and isinstance(own, np.ndarray)
                and isinstance(values, np.ndarray) and own.ndim == values.ndim == 2
                and own.dtype == values.dtype == np.uint8 and own.shape[1] == values.shape[1])

    def _encode_joined(self, compression: Compression, producer_id: int, producer_epoch: int,
                       base_sequence: int) -> bytes:
        assert self.joined and isinstance(self.values, np.ndarray)
        assert isinstance(self.timestamps_ms, int)
        parts = [self.values, *(chunk.values for chunk in self.joined)]
        stamps = [self.timestamps_ms, *(chunk.timestamp_ms for chunk in self.joined)]
        timestamp_ms: int | npt.NDArray[np.int64] = stamps[0]
        if len(set(stamps)) > 1:
            timestamp_ms = np.repeat(np.array(stamps, np.int64), [len(p) for p in parts])
        return build_batch_from_values(
            np.concatenate(parts), timestamp_ms=timestamp_ms, compression=compression,
            producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence)

    def _is_plain(self, stamps_ms: list[int]) -> bool:
        """Whether `build_plain_batch` may write this batch: small, no headers, usual timestamps."""
        return (
            self.headers is None
            and isinstance(self.values, list)
            and self.size_bytes <= PLAIN_BATCH_BYTES_MAX
            and min(stamps_ms) >= 0
            and max(stamps_ms) <= PLAIN_TIMESTAMP_MS_MAX
        )

    def complete(self, base_offset: int, log_append_time_ms: int) -> None:
        """Resolve every future of this batch with where its records landed."""
        topic, partition = self.tp
        if self.futures is not None:
            stamps = self.timestamps_ms
            assert isinstance(stamps, list)
            for index, future in enumerate(self.futures):
                offset = -1 if base_offset < 0 else base_offset + index
                stamp_ms = stamps[index] if log_append_time_ms < 0 else log_append_time_ms
                if not future.done():
                    future.set_result(RecordMetadata(topic, partition, offset, stamp_ms))
        if self.completion is not None:
            stamp_ms = self.first_timestamp_ms() if log_append_time_ms < 0 else log_append_time_ms
            own_count = len(self.values) if self.joined else self.record_count
            self.completion.batch_done(
                self.completion_index,
                BatchMetadata(topic, partition, base_offset, own_count, stamp_ms),
            )
            start = base_offset + own_count
            for chunk in self.joined or ():
                stamp_ms = chunk.timestamp_ms if log_append_time_ms < 0 else log_append_time_ms
                chunk.completion.batch_done(chunk.completion_index, BatchMetadata(
                    topic, partition, -1 if base_offset < 0 else start, len(chunk.values),
                    stamp_ms))
                start += len(chunk.values)

    def fail(self, error: ZlogError) -> None:
        self.failed = True
        if self.futures is not None:
            for future in self.futures:
                if not future.done():
                    future.set_exception(error)
        if self.completion is not None:
            self.completion.batch_failed(error)
        for chunk in self.joined or ():
            chunk.completion.batch_failed(error)


def record_size_bytes(value: bytes | None, key: bytes | None, headers: RecordHeaders) -> int:
    size = RECORD_OVERHEAD_BYTES + (len(value) if value else 0) + (len(key) if key else 0)
    for name, header_value in headers:
        size += len(name) + (len(header_value) if header_value else 0) + 4
    return size


class RecordAccumulator:
    """Per-partition queues of pending batches; at most the last one of each is open."""

    def __init__(self, *, batch_size_bytes: int, linger_ms: int, buffer_memory_bytes: int) -> None:
        assert batch_size_bytes > 0 and linger_ms >= 0 and buffer_memory_bytes > 0
        self.batch_size_bytes = batch_size_bytes
        self.linger_ms = linger_ms
        self.buffer_memory_bytes = buffer_memory_bytes
        self.used_bytes = 0
        self._queues: dict[TopicPartition, deque[PendingBatch]] = {}
        # Batches created and not yet completed or failed, queued or not: what flush waits on.
        self.unfinished: set[PendingBatch] = set()

    # -- memory ---------------------------------------------------------------------------

    def has_room(self, size_bytes: int) -> bool:
        return self.used_bytes + size_bytes <= self.buffer_memory_bytes

    def release(self, batch: PendingBatch) -> None:
        """Give back a finished batch's memory."""
        assert batch in self.unfinished, "each batch is released once"
        self.unfinished.discard(batch)
        self.used_bytes -= batch.size_bytes
        assert self.used_bytes >= 0, "released more than was reserved"

    # -- appending ------------------------------------------------------------------------

    def append(
        self,
        tp: TopicPartition,
        *,
        value: bytes | None,
        key: bytes | None,
        timestamp_ms: int,
        headers: RecordHeaders,
        future: Future[RecordMetadata],
        now_ms: int,
        size_bytes: int | None = None,
    ) -> tuple[bool, bool]:
        """Add one record; returns (opened a new batch, closed a full batch).

        The producer wakes the sender on either: a new batch starts a linger timer, a closed
        one is ready now (and moves keyless records to another sticky partition).
        `size_bytes` is `record_size_bytes` of the record, when the caller has it already.
        """
        if size_bytes is None:
            size_bytes = record_size_bytes(value, key, headers)
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        batch = queue[-1] if queue and queue[-1].is_open else None
        closed = False
        if batch is not None and batch.size_bytes + size_bytes > self.batch_size_bytes:
            batch.is_open = False
            batch = None
            closed = True
        opened = batch is None
        if batch is None:
            batch = PendingBatch(tp, now_ms, [], [], [], None, [], None, 0,
                                 BATCH_OVERHEAD_BYTES, 0, is_open=True)
            self.used_bytes += BATCH_OVERHEAD_BYTES
            queue.append(batch)
            self.unfinished.add(batch)
        assert isinstance(batch.values, list) and isinstance(batch.timestamps_ms, list)
        assert batch.keys is not None and batch.futures is not None
        if headers and batch.headers is None:
            batch.headers = [()] * batch.record_count
        batch.values.append(value)
        batch.keys.append(key)
        batch.timestamps_ms.append(timestamp_ms)
        if batch.headers is not None:
            batch.headers.append(headers)
        batch.futures.append(future)
        batch.record_count += 1
        batch.size_bytes += size_bytes
        self.used_bytes += size_bytes
        if batch.size_bytes >= self.batch_size_bytes:
            batch.is_open = False
            closed = True
        return opened, closed

    def append_chunk(
        self,
        tp: TopicPartition,
        *,
        values: list[bytes | None] | UInt8Rows,
        keys: list[bytes | None] | None,
        timestamp_ms: int,
        completion: BulkCompletion,
        completion_index: int,
        size_bytes: int,
        now_ms: int,
        join_bytes_max: int = 0,
    ) -> None:
        """Queue one pre-cut batch of `send_many` (see `cut_points`), closed and ready.

        An array chunk joins the partition's last queued batch when `PendingBatch.can_join`
        and both fit in `join_bytes_max` (0: never): it is still queued, so its bytes are not
        encoded yet, and the records stay in call order behind it.
        """
        queue = self._queues.setdefault(tp, deque())
        if queue and queue[-1].is_open:
            queue[-1].is_open = False  # what was sent before goes first
        last = queue[-1] if queue else None
        if (last is not None and isinstance(values, np.ndarray)
                and last.size_bytes + size_bytes - BATCH_OVERHEAD_BYTES <= join_bytes_max
                and last.can_join(values, keys)):
            if last.joined is None:
                last.joined = []
            last.joined.append(JoinedChunk(values, timestamp_ms, completion, completion_index))
            last.record_count += len(values)
            last.size_bytes += size_bytes
            self.used_bytes += size_bytes
            return
        batch = PendingBatch(
            tp, now_ms, values, keys, timestamp_ms, None, None, completion, completion_index,
            size_bytes, len(values), is_open=False,
        )
        queue.append(batch)
        self.unfinished.add(batch)
        self.used_bytes += size_bytes

    # -- taking ---------------------------------------------------------------------------

    def ready_partitions(self, now_ms: int, *, flushing: bool) -> list[TopicPartition]:
        """Partitions whose first batch may be sent now."""
        ready: list[TopicPartition] = []
        for tp, queue in self._queues.items():
            if queue and self._is_ready(queue[0], now_ms, flushing):
                ready.append(tp)
        return ready

    def first_is_ready(self, tp: TopicPartition, now_ms: int, *, flushing: bool) -> bool:
        queue = self._queues.get(tp)
        return bool(queue) and self._is_ready(queue[0], now_ms, flushing)  # type: ignore[index]

    def _is_ready(self, batch: PendingBatch, now_ms: int, flushing: bool) -> bool:
        return flushing or not batch.is_open or now_ms - batch.created_ms >= self.linger_ms

    def first_is_open(self, tp: TopicPartition) -> bool:
        """Whether the partition's oldest batch still takes records (not full, not closed)."""
        queue = self._queues.get(tp)
        return bool(queue) and queue[0].is_open  # type: ignore[index]

    def next_ready_ms(self, now_ms: int) -> int | None:
        """The first moment after now_ms when a lingering batch becomes ready (None: none)."""
        times = [
            q[0].created_ms + self.linger_ms for q in self._queues.values()
            if q and q[0].is_open and q[0].created_ms + self.linger_ms > now_ms
        ]
        return min(times) if times else None

    def oldest_created_ms(self) -> int | None:
        """When the oldest queued batch was created (None: nothing queued).

        Batches are created in time order under the producer's lock, so each queue's first
        batch is its oldest.
        """
        return min((q[0].created_ms for q in self._queues.values() if q), default=None)

    def pop_first(self, tp: TopicPartition) -> PendingBatch:
        queue = self._queues[tp]
        batch = queue.popleft()
        batch.is_open = False
        if not queue:
            del self._queues[tp]
        return batch

    def batches(self) -> Iterator[PendingBatch]:
        for queue in self._queues.values():
            yield from queue

    def expire(self, now_ms: int, delivery_timeout_ms: int) -> list[PendingBatch]:
        """Remove queued batches older than the delivery timeout (the caller fails them)."""
        expired: list[PendingBatch] = []
        for tp in list(self._queues):
            queue = self._queues[tp]
            while queue and now_ms - queue[0].created_ms >= delivery_timeout_ms:
                expired.append(self.pop_first(tp))
                if tp not in self._queues:
                    break
        return expired

    def drain_topic(self, topic: str) -> list[PendingBatch]:
        """Every queued batch of `topic`, removed (the topic is gone: they fail)."""
        drained: list[PendingBatch] = []
        for tp in [tp for tp in self._queues if tp.topic == topic]:
            drained.extend(self._queues.pop(tp))
        return drained

    def drain_all(self) -> list[PendingBatch]:
        """Every queued batch, removed (for close without flush)."""
        drained = list(self.batches())
        self._queues.clear()
        return drained

    @property
    def is_empty(self) -> bool:
        return not self._queues


def cut_points(
    values: Sequence[bytes] | UInt8Rows,
    keys: Sequence[bytes | None] | None,
    batch_size_bytes: int,
) -> list[tuple[int, int, int]]:
    """(start, stop, estimated bytes) runs of about batch_size_bytes, by numpy, not per record."""
    count = len(values)
    if count == 0:
        return []
    if isinstance(values, np.ndarray):
        sizes = np.full(count, values.shape[1], np.int64)
    else:
        sizes = np.fromiter(map(len, values), np.int64, count)
    if keys is not None:
        sizes += np.fromiter((0 if k is None else len(k) for k in keys), np.int64, count)
    sizes += RECORD_OVERHEAD_BYTES
    records_bytes_max = max(1, batch_size_bytes - BATCH_OVERHEAD_BYTES)
    ends = np.cumsum(sizes)
    cuts: list[tuple[int, int, int]] = []
    start = 0
    # Each pass emits one batch of at least one record, so the loop ends within count passes.
    while start < count:
        before = int(ends[start - 1]) if start else 0
        stop = int(np.searchsorted(ends, before + records_bytes_max, side="right"))
        stop = max(stop, start + 1)
        stop = min(stop, count)
        cuts.append((start, stop, int(ends[stop - 1]) - before + BATCH_OVERHEAD_BYTES))
        start = stop
    assert cuts[-1][1] == count
    return cuts
