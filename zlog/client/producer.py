"""zlog.Producer: Kafka's producer model over zlog's transport.

Threading (Kafka's design): `send`, `send_many`, `flush` and `close` may be called from any
number of threads; they append to the record accumulator under one lock. A background I/O
thread (`sender.Sender`) sends ready batches to partition leaders, retries, refreshes metadata
and completes the futures. One shortcut: a batch that is ready the moment it is queued
(linger_ms=0, or a batch that just filled up) is sent by the caller's own thread when no other
thread is using the sockets, which saves a thread hand-over per request at low rates. Futures
always complete on the I/O thread, so a callback added with `add_done_callback` must be quick
and must not call back into the producer in a blocking way.

Batching without a timer: `linger_ms` defaults to 0, and a batch that is not full never leaves
while an earlier batch of its partition waits for its answer; it gathers the records sent in
the meantime and leaves with that answer (a full batch leaves at once). So a record sent to an
idle partition goes at once, with no linger to wait out, and under load batches grow to what
arrives in one round trip, which is where a timer's batching would have put them (Nagle's
algorithm, per partition). A `linger_ms` above 0 still holds a batch that long at most, to
gather more when the partition is idle, as Kafka's linger.ms does.

Delivery: a future resolves once the broker acknowledged the record per `acks` (0: when it was
sent, offset -1; 1: the leader appended it; "all"/-1, the default as in Kafka 3: every in-sync
replica has it, which on a partition of one replica costs nothing over 1). Retriable
errors are retried with `retry_backoff_ms` between attempts until `retries` attempts or
`delivery_timeout_ms` after the record was sent, whichever comes first. With
`enable_idempotence` (the default, as in Kafka 3) the broker discards retried duplicates, so
each record is appended exactly once and in order per partition. Idempotence needs acks != 0;
with acks=0 it is silently off, as in Kafka when not set explicitly.

Local: with `local=True`, requests to a leader whose worker runs on this host go through a
shared-memory queue instead of a socket (local_produce.py, docs/local-path.md), with the same
delivery guarantees; leaders elsewhere are reached over the network as usual.

Memory: queued records hold at most `buffer_memory` bytes; `send` blocks up to `max_block_ms`
for room and then raises REQUEST_TIMED_OUT.

Metadata: `send` never waits for it. A record for a topic whose partitions are not known yet
waits in the producer (and in `buffer_memory`) while the I/O thread asks; it is partitioned
and queued as soon as the answer comes, in the order it was sent, or its future fails after
`max_block_ms` with the last reason the cluster gave (an unknown topic fails at once). So a
caller's own `future.result(timeout=...)` always applies, as with librdkafka.

Exit: a producer still open when the interpreter exits is closed by an `atexit` hook, which
waits up to ATEXIT_CLOSE_TIMEOUT_MS for what is queued and logs how many records it had to
leave unsent, so records are not lost without a word.
"""

from __future__ import annotations

import atexit
import functools
import logging
import random
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Final, Literal

import numpy as np
import numpy.typing as npt

from zlog import limits
from zlog.client.accumulator import (
    BATCH_OVERHEAD_BYTES,
    BulkCompletion,
    PendingBatch,
    RecordAccumulator,
    cut_points,
    record_size_bytes,
)
from zlog.client.cluster import Connections
from zlog.client.delivery_future import DeliveryFuture
from zlog.client.local_produce import LocalChannels
from zlog.client.partitioner import StickyPartitioner, partition_for_key, partitions_for_keys
from zlog.client.records import BatchMetadata, RecordMetadata
from zlog.client.sender import DeferredSend, Sender, SenderConfig, SharedState
from zlog.clock import Clock, SystemClock
from zlog.errors import ErrorCode, ZlogError
from zlog.record.header import Compression
from zlog.record.records import RecordHeaders
from zlog.types import ACKS_ALL, DEFAULT_BOOTSTRAP, TopicPartition

Acks = Literal[0, 1, -1, "all"]
BytesLike = bytes | bytearray | memoryview

RETRIES_DEFAULT: Final = 2**31 - 1  # Kafka's: in practice bounded by delivery_timeout_ms
ATEXIT_CLOSE_TIMEOUT_MS: Final = 5_000  # how long exit waits for a producer left open

log = logging.getLogger("zlog.client.producer")
_OPEN_PRODUCERS: weakref.WeakSet[Producer] = weakref.WeakSet()


@atexit.register
def _close_open_producers() -> None:
    """Interpreter exit: deliver what open producers still queue, within a bound, or say so."""
    for producer in list(_OPEN_PRODUCERS):
        producer._close_at_exit(ATEXIT_CLOSE_TIMEOUT_MS)
HeadersArgument = Sequence[tuple[str, BytesLike | None]] | Mapping[str, BytesLike | None]


def _config_error(message: str) -> ZlogError:
    return ZlogError(ErrorCode.INVALID_CONFIG, message)


def parse_acks(acks: int | str) -> int:
    """0, 1 or -1 from the forms Kafka users write: 0, 1, -1, "all", "1"."""
    text = str(acks).strip().lower()
    table = {"0": 0, "1": 1, "-1": ACKS_ALL, "all": ACKS_ALL}
    if text not in table:
        raise _config_error(f"acks must be 0, 1, -1 or 'all', not {acks!r}")
    return table[text]


def parse_compression(compression: str | None) -> Compression:
    text = "none" if compression is None else compression.strip().lower()
    table = {"none": Compression.NONE, "lz4": Compression.LZ4}
    if text not in table:
        raise _config_error(f"compression must be 'lz4' or None, not {compression!r}")
    return table[text]


def _as_bytes(data: BytesLike | None, what: str) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)  # a private copy: the caller may reuse its buffer
    raise TypeError(f"{what} must be bytes or None, not {type(data).__name__}")


def _check_timestamp(timestamp_ms: int | None) -> None:
    """A timestamp is milliseconds since the epoch (Kafka refuses negative ones too)."""
    if timestamp_ms is not None and timestamp_ms < 0:
        raise ZlogError(ErrorCode.INVALID_TIMESTAMP,
                        f"timestamp_ms must be >= 0 (milliseconds since the epoch), "
                        f"not {timestamp_ms}")


def _as_headers(headers: HeadersArgument | None) -> RecordHeaders:
    if not headers:
        return ()
    items = headers.items() if isinstance(headers, Mapping) else headers
    return tuple((str(name), _as_bytes(value, "a header value")) for name, value in items)


def _estimated_bytes(
    values: Sequence[bytes] | npt.NDArray[np.uint8], keys: Sequence[bytes | None] | None
) -> int:
    """What a `send_many` call will hold of buffer_memory, before it is cut into batches."""
    value_bytes = int(values.nbytes) if isinstance(values, np.ndarray) else sum(map(len, values))
    key_bytes = 0 if keys is None else sum(len(key) for key in keys if key is not None)
    return value_bytes + key_bytes + BATCH_OVERHEAD_BYTES


BULK_BATCH_SIZE_DEFAULT: Final = 1_000_000
"""send_many's batch size: librdkafka's batch.size default. `send` keeps Kafka's 16 KiB, batched
by round trip (`linger_ms` 0), which suits records that come one at a time; a bulk call
already holds its records, so the bigger its batches the less the producer and the broker spend
per record."""


class Producer:
    """Sends records to zlog topics; see the module docstring for threading and delivery."""

    def __init__(
        self,
        bootstrap: str | Sequence[str] = DEFAULT_BOOTSTRAP,
        *,
        acks: Acks | int | str = "all",
        linger_ms: int = 0,
        batch_size: int = 16384,
        bulk_batch_size: int = BULK_BATCH_SIZE_DEFAULT,
        compression: str | None = "lz4",
        enable_idempotence: bool = True,
        retries: int = RETRIES_DEFAULT,
        retry_backoff_ms: int = 100,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: int = 60_000,
        request_timeout_ms: int = 30_000,
        delivery_timeout_ms: int = 120_000,
        max_in_flight: int = 5,
        metadata_max_age_ms: int = 300_000,
        clock: Clock | None = None,
        local: bool = False,
    ) -> None:
        acks_value = parse_acks(acks)
        for name, value in (("linger_ms", linger_ms), ("retries", retries),
                            ("retry_backoff_ms", retry_backoff_ms), ("max_block_ms", max_block_ms)):
            if value < 0:
                raise _config_error(f"{name} must not be negative, not {value}")
        for name, value in (("batch_size", batch_size), ("bulk_batch_size", bulk_batch_size),
                            ("buffer_memory", buffer_memory),
                            ("request_timeout_ms", request_timeout_ms),
                            ("delivery_timeout_ms", delivery_timeout_ms),
                            ("max_in_flight", max_in_flight),
                            ("metadata_max_age_ms", metadata_max_age_ms)):
            if value <= 0:
                raise _config_error(f"{name} must be positive, not {value}")
        self.batch_size_bytes = min(batch_size, limits.BATCH_SIZE_BYTES_MAX)
        self.bulk_batch_size_bytes = min(bulk_batch_size, limits.BATCH_SIZE_BYTES_MAX,
                                         buffer_memory)
        self.max_block_ms = max_block_ms
        # What one record or batch may take: the batch size limit, or all of buffer_memory.
        self._size_bytes_bound = min(limits.BATCH_SIZE_BYTES_MAX, buffer_memory)
        self._clock = clock or SystemClock()
        self._sticky = StickyPartitioner(random.Random())
        accumulator = RecordAccumulator(batch_size_bytes=self.batch_size_bytes,
                                        linger_ms=linger_ms, buffer_memory_bytes=buffer_memory)
        self._shared = SharedState(threading.Condition(), accumulator)
        self.config = SenderConfig(
            acks=acks_value,
            compression=parse_compression(compression),
            idempotent=enable_idempotence and acks_value != 0,
            retries=retries,
            retry_backoff_ms=retry_backoff_ms,
            request_timeout_ms=request_timeout_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            metadata_max_age_ms=metadata_max_age_ms,
        )
        connections = Connections(bootstrap, max_in_flight=max_in_flight,
                                  local=LocalChannels() if local else None)
        self._sender = Sender(self.config, self._shared, connections, self._clock.monotonic_ms)
        self._thread = threading.Thread(target=self._sender.run, name="zlog-producer-io",
                                        daemon=True)
        self._closed = False
        self._thread.start()
        _OPEN_PRODUCERS.add(self)

    # -- sending --------------------------------------------------------------------------

    def send(  # noqa: PLR0917  (Kafka's argument order, kept positional)
        self,
        topic: str,
        value: BytesLike | None,
        key: BytesLike | None = None,
        partition: int | None = None,
        headers: HeadersArgument | None = None,
        timestamp_ms: int | None = None,
    ) -> Future[RecordMetadata]:
        """Queue one record; the future resolves to where it landed, or to a ZlogError.

        Never waits for metadata (see the module docstring); waits up to `max_block_ms` only
        when `buffer_memory` is full.
        """
        value_bytes = _as_bytes(value, "value")
        key_bytes = _as_bytes(key, "key")
        record_headers = _as_headers(headers)
        _check_timestamp(timestamp_ms)
        size_bytes = record_size_bytes(value_bytes, key_bytes, record_headers)
        self._check_size(size_bytes)
        stamp_ms = self._clock.wall_ms() if timestamp_ms is None else timestamp_ms
        deadline_ms = self._clock.monotonic_ms() + self.max_block_ms
        future: DeliveryFuture[RecordMetadata] = DeliveryFuture()
        future.on_wait = self._sender.caller_waits
        place = functools.partial(self._place_record, topic, value_bytes, key_bytes, partition,
                                  record_headers, stamp_ms, size_bytes, future)
        shared = self._shared
        with shared.lock:
            self._wait_for_room(size_bytes + BATCH_OVERHEAD_BYTES, deadline_ms)
            count = shared.partition_counts.get(topic)
            if count is None:
                self._defer(topic, size_bytes + BATCH_OVERHEAD_BYTES, deadline_ms,
                            place, future.set_exception)
                return future
            opened, closed = place(count)
        if closed or (opened and self._shared.accumulator.linger_ms == 0):
            self._sender.send_now_or_wake()  # ready now: sent from this thread if it can be
        elif opened:
            self._sender.wake()  # a linger timer starts
        elif self._shared.accumulator.linger_ms == 0:
            self._sender.pump()
        return future

    def _place_record(  # noqa: PLR0917  (bound with functools.partial, then given the count)
        self, topic: str, value: bytes | None, key: bytes | None, partition: int | None,
        headers: RecordHeaders, stamp_ms: int, size_bytes: int,
        future: Future[RecordMetadata], count: int,
    ) -> tuple[bool, bool]:
        """Choose the partition and queue the record (lock held); (opened, closed) a batch."""
        if partition is not None:
            chosen = self._checked_partition(topic, partition, count)
        elif key is not None:
            chosen = partition_for_key(key, count)
        else:
            chosen = self._sticky.partition(topic, count)
        opened, closed = self._shared.accumulator.append(
            TopicPartition(topic, chosen), value=value, key=key, timestamp_ms=stamp_ms,
            headers=headers, future=future, now_ms=self._clock.monotonic_ms(),
            size_bytes=size_bytes,
        )
        if closed and key is None and partition is None:
            self._sticky.on_batch_full(topic, chosen, count)
        return opened, closed

    def _defer(self, topic: str, size_bytes: int, deadline_ms: int,
               place: Callable[[int], object], fail: Callable[[BaseException], None]) -> None:
        """Keep a send until its topic's partitions are known (lock held, room reserved)."""
        shared = self._shared
        shared.deferred.setdefault(topic, []).append(
            DeferredSend(size_bytes, deadline_ms, place, fail))
        shared.deferred_bytes += size_bytes
        shared.wanted_topics.add(topic)
        self._sender.wake()

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes] | npt.NDArray[np.uint8],
        keys: Sequence[bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Future[list[BatchMetadata]]:
        """The fast path: many values (bytes, or a 2-D uint8 array, one row each) at once.

        Values are cut into batches of about `bulk_batch_size` (1 MB by default, librdkafka's
        batch.size: big batches are what make bulk sending cheap) by numpy and encoded by the
        array codec: no Python call per record. Keyed values are spread by Kafka's partitioner
        (hashed by numpy too); keyless ones go to one sticky partition. Keyless 2-D arrays of
        calls that queue while the I/O thread is busy travel together, up to `bulk_batch_size`,
        so small calls cost per row what large ones do. The future resolves to one
        BatchMetadata per batch the call was cut into (its own rows' offsets) once all are
        acknowledged, or to the first error.
        """
        count = len(values)
        future: DeliveryFuture[list[BatchMetadata]] = DeliveryFuture()
        future.on_wait = self._sender.caller_waits
        if count == 0:
            future.set_result([])
            return future
        if keys is not None and len(keys) != count:
            raise ZlogError(ErrorCode.INVALID_REQUEST, f"{len(keys)} keys for {count} values")
        _check_timestamp(timestamp_ms)
        stamp_ms = self._clock.wall_ms() if timestamp_ms is None else timestamp_ms
        deadline_ms = self._clock.monotonic_ms() + self.max_block_ms
        place = functools.partial(self._place_many, topic, values, keys, partition, stamp_ms,
                                  future, deadline_ms)
        shared = self._shared
        with shared.lock:
            self._check_open()
            partition_count = shared.partition_counts.get(topic)
            if partition_count is not None:
                place(partition_count)
                return future
            size_bytes = _estimated_bytes(values, keys)
            self._check_size(min(size_bytes, self.bulk_batch_size_bytes))
            self._wait_for_room(size_bytes, deadline_ms)
            self._defer(topic, size_bytes, deadline_ms,
                        functools.partial(place, wait_for_room=False), future.set_exception)
        return future

    def _place_many(  # noqa: PLR0917  (bound with functools.partial, then given the count)
        self, topic: str, values: Sequence[bytes] | npt.NDArray[np.uint8],
        keys: Sequence[bytes | None] | None, partition: int | None, stamp_ms: int,
        future: Future[list[BatchMetadata]], deadline_ms: int, partition_count: int,
        *, wait_for_room: bool = True,
    ) -> None:
        """Cut `values` into batches per partition and queue them (lock held).

        A deferred call placed by the I/O thread reserved its room already and must not wait
        (the I/O thread is what frees room).
        """
        shared = self._shared
        groups = self._group_by_partition(topic, values, keys, partition, partition_count)
        plans = [
            (chosen, group_values, group_keys, cut)
            for chosen, group_values, group_keys in groups
            for cut in cut_points(group_values, group_keys, self.bulk_batch_size_bytes)
        ]
        completion = BulkCompletion(len(plans), future)
        for index, (chosen, group_values, group_keys, (start, stop, size_bytes)) in enumerate(
            plans
        ):
            self._check_size(size_bytes)
            if wait_for_room:
                self._wait_for_room(size_bytes, deadline_ms)
            chunk: list[bytes | None] | npt.NDArray[np.uint8] = (
                group_values[start:stop] if isinstance(group_values, np.ndarray)
                else list(group_values[start:stop])
            )
            shared.accumulator.append_chunk(
                TopicPartition(topic, chosen), values=chunk,
                keys=None if group_keys is None else list(group_keys[start:stop]),
                timestamp_ms=stamp_ms, completion=completion, completion_index=index,
                size_bytes=size_bytes, now_ms=self._clock.monotonic_ms(),
                join_bytes_max=self.bulk_batch_size_bytes,
            )
            self._sender.wake()
        if keys is None and partition is None:
            self._sticky.on_batch_full(topic, groups[0][0], partition_count)

    def _group_by_partition(
        self,
        topic: str,
        values: Sequence[bytes] | npt.NDArray[np.uint8],
        keys: Sequence[bytes | None] | None,
        partition: int | None,
        partition_count: int,
    ) -> list[tuple[int, Sequence[bytes] | npt.NDArray[np.uint8], Sequence[bytes | None] | None]]:
        """(partition, values, keys) groups, in first-appearance order of each partition."""
        if partition is not None:
            return [(self._checked_partition(topic, partition, partition_count), values, keys)]
        if keys is None:
            return [(self._sticky.partition(topic, partition_count), values, None)]
        hashed = partitions_for_keys([k or b"" for k in keys], partition_count)
        null_keys = np.fromiter((k is None for k in keys), bool, len(keys))
        if null_keys.any():
            hashed[null_keys] = self._sticky.partition(topic, partition_count)
        order = np.argsort(hashed, kind="stable")
        sorted_partitions = hashed[order]
        bounds = np.flatnonzero(np.diff(sorted_partitions)) + 1
        key_array = np.empty(len(keys), object)
        key_array[:] = list(keys)
        value_array: npt.NDArray[np.uint8] | npt.NDArray[np.object_]
        if isinstance(values, np.ndarray):
            value_array = values
        else:
            value_array = np.empty(len(values), object)
            value_array[:] = list(values)
        groups: list[tuple[int, Sequence[bytes] | npt.NDArray[np.uint8],
                           Sequence[bytes | None] | None]] = []
        for members in np.split(order, bounds):
            rows = value_array[members]
            group_values: Sequence[bytes] | npt.NDArray[np.uint8] = (
                rows if isinstance(values, np.ndarray) else rows.tolist()  # type: ignore[assignment]
            )
            group_keys: list[bytes | None] = key_array[members].tolist()
            groups.append((int(hashed[members[0]]), group_values, group_keys))
        return groups

    # -- waiting (lock held) --------------------------------------------------------------

    def _check_open(self) -> None:
        if self._shared.closing:
            raise ZlogError(ErrorCode.INVALID_REQUEST, "the producer is closed")
        if self._shared.sender_failure is not None:
            raise ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR,
                            f"the producer's I/O thread failed: {self._shared.sender_failure!r}")

    def _remaining_s(self, deadline_ms: int) -> float:
        return max(0, deadline_ms - self._clock.monotonic_ms()) / 1000

    def _wait_for_partition_count(self, topic: str, deadline_ms: int) -> int:
        shared = self._shared
        while True:
            self._check_open()
            count = shared.partition_counts.get(topic)
            if count is not None:
                return count
            error = shared.topic_errors.get(topic)
            if error is not None and topic not in shared.wanted_topics:
                del shared.topic_errors[topic]  # the next send asks again
                raise error
            if topic not in shared.wanted_topics:
                shared.wanted_topics.add(topic)
                self._sender.wake()
            if self._clock.monotonic_ms() >= deadline_ms:
                shared.wanted_topics.discard(topic)
                reason = f" (last error: {error.message})" if error is not None else ""
                raise ZlogError(ErrorCode.REQUEST_TIMED_OUT,
                                f"no metadata for topic {topic!r} within max_block_ms="
                                f"{self.max_block_ms}{reason}")
            shared.lock.wait(self._remaining_s(deadline_ms))

    def _checked_partition(self, topic: str, partition: int, count: int) -> int:
        if not 0 <= partition < count:
            raise ZlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            f"topic {topic!r} has partitions 0..{count - 1}, not {partition}")
        return partition

    def _check_size(self, size_bytes: int) -> None:
        bound_bytes = self._size_bytes_bound
        if size_bytes + BATCH_OVERHEAD_BYTES > bound_bytes:
            raise ZlogError(ErrorCode.MESSAGE_TOO_LARGE,
                            f"a record or batch of about {size_bytes} bytes exceeds "
                            f"{bound_bytes} bytes (batch size limit or buffer_memory)")

    def _wait_for_room(self, size_bytes: int, deadline_ms: int) -> None:
        """Until `size_bytes` more fit in buffer_memory (queued batches and deferred sends)."""
        shared = self._shared
        self._check_open()
        while not shared.accumulator.has_room(size_bytes + shared.deferred_bytes):
            self._check_open()
            if self._clock.monotonic_ms() >= deadline_ms:
                raise ZlogError(ErrorCode.REQUEST_TIMED_OUT,
                                f"buffer_memory={shared.accumulator.buffer_memory_bytes} bytes "
                                f"stayed full for max_block_ms={self.max_block_ms}")
            shared.lock.wait(self._remaining_s(deadline_ms))
        self._check_open()

    # -- flush and close ------------------------------------------------------------------

    def flush(self, timeout_ms: int | None = None) -> None:
        """Send everything queued now at once, and wait until all of it is answered.

        Sends still waiting for their topic's metadata are waited for first: once placed they
        are queued batches like the rest (or they failed).
        """
        shared = self._shared
        deadline_ms = None if timeout_ms is None else self._clock.monotonic_ms() + timeout_ms
        with shared.lock:
            shared.flushes_waiting += 1
            try:
                self._sender.wake()
                snapshot: list[PendingBatch] | None = None
                while snapshot is None or not all(batch.finished for batch in snapshot):
                    if snapshot is None and not shared.deferred:
                        snapshot = list(shared.accumulator.unfinished)
                        continue
                    if shared.sender_failure is not None:
                        raise ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                        "flush cannot finish: the producer's I/O thread failed: "
                                        f"{shared.sender_failure!r}")
                    if deadline_ms is not None and self._clock.monotonic_ms() >= deadline_ms:
                        raise ZlogError(ErrorCode.REQUEST_TIMED_OUT,
                                        f"flush did not finish within {timeout_ms} ms")
                    shared.lock.wait(0.1 if deadline_ms is None else
                                     min(0.1, self._remaining_s(deadline_ms)))
            finally:
                shared.flushes_waiting -= 1

    def close(self, timeout_ms: int | None = None) -> None:
        """Send what is queued (waiting up to timeout_ms), then stop; later sends raise.

        An idle producer closes at once, whatever its I/O thread was doing (a metadata
        request to an unreachable cluster is cancelled).
        """
        if self._closed:
            return
        self._closed = True
        _OPEN_PRODUCERS.discard(self)
        with self._shared.lock:
            self._shared.closing = True
        timed_out = False
        try:
            self.flush(timeout_ms)
        except ZlogError:
            timed_out = True
        self._sender.stop(abandon=timed_out)
        self._thread.join()
        self._sender.dispose()

    def _close_at_exit(self, timeout_ms: int) -> None:
        """The atexit close: bounded, and loud about records it could not deliver."""
        with self._shared.lock:
            batches = list(self._shared.accumulator.unfinished)
            deferred = [send for sends in self._shared.deferred.values() for send in sends]
        self.close(timeout_ms)
        queued = sum(batch.record_count for batch in batches) + len(deferred)
        lost = sum(batch.record_count for batch in batches if batch.failed) + sum(
            1 for send in deferred if send.failed)
        if lost:
            log.warning("the producer was still open at exit: %d of the %d records it held "
                        "were not delivered within %d ms (flush() or close() it before exit)",
                        lost, queued, timeout_ms)

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition numbers (fetches metadata if need be)."""
        with self._shared.lock:
            count = self._wait_for_partition_count(
                topic, self._clock.monotonic_ms() + self.max_block_ms)
        return list(range(count))

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
