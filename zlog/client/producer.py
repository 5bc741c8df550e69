"""zlog.Producer: Kafka's producer model over zlog's transport.

Threading (Kafka's design): `send`, `send_many`, `flush` and `close` may be called from any
number of threads; they append to the record accumulator under one lock. A background I/O
thread (`sender.Sender`) sends ready batches to partition leaders, retries, refreshes metadata
and completes the futures. One shortcut: a batch that is ready the moment it is queued
(linger_ms=0, or a batch that just filled up) is sent by the caller's own thread when no other
thread is using the sockets, which saves a thread hand-over per request at low rates. Futures
always complete on the I/O thread, so a callback added with `add_done_callback` must be quick
and must not call back into the producer in a blocking way.

Delivery: a future resolves once the broker acknowledged the record per `acks` (0: when it was
sent, offset -1; 1: the leader appended it; "all"/-1: every in-sync replica has it). Retriable
errors are retried with `retry_backoff_ms` between attempts until `retries` attempts or
`delivery_timeout_ms` after the record was sent, whichever comes first. With
`enable_idempotence` (the default, as in Kafka 3) the broker discards retried duplicates, so
each record is appended exactly once and in order per partition. Idempotence needs acks != 0;
with acks=0 it is silently off, as in Kafka when not set explicitly.

Memory: queued records hold at most `buffer_memory` bytes; `send` blocks up to `max_block_ms`
for room (or for a topic's metadata) and then raises REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Final, Literal

import numpy as np
import numpy.typing as npt

from zlog import limits
from zlog.client.accumulator import (
    BATCH_OVERHEAD_BYTES,
    BulkCompletion,
    RecordAccumulator,
    RecordHeaders,
    cut_points,
    record_size_bytes,
)
from zlog.client.cluster import DEFAULT_BOOTSTRAP, Connections
from zlog.client.partitioner import StickyPartitioner, partition_for_key, partitions_for_keys
from zlog.client.records import BatchMetadata, RecordMetadata, TopicPartition
from zlog.client.sender import Sender, SenderConfig, SharedState
from zlog.clock import Clock, SystemClock
from zlog.errors import ErrorCode, ZlogError
from zlog.shm_segments.batch import Compression

Acks = Literal[0, 1, -1, "all"]
BytesLike = bytes | bytearray | memoryview

RETRIES_DEFAULT: Final = 2**31 - 1  # Kafka's: in practice bounded by delivery_timeout_ms
HeadersArgument = Sequence[tuple[str, BytesLike | None]] | Mapping[str, BytesLike | None]


def _config_error(message: str) -> ZlogError:
    return ZlogError(ErrorCode.INVALID_CONFIG, message)


def parse_acks(acks: int | str) -> int:
    """0, 1 or -1 from the forms Kafka users write: 0, 1, -1, "all", "1"."""
    text = str(acks).strip().lower()
    table = {"0": 0, "1": 1, "-1": -1, "all": -1}
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


def _as_headers(headers: HeadersArgument | None) -> RecordHeaders:
    if not headers:
        return ()
    items = headers.items() if isinstance(headers, Mapping) else headers
    return tuple((str(name), _as_bytes(value, "a header value")) for name, value in items)


class Producer:
    """Sends records to zlog topics; see the module docstring for threading and delivery."""

    def __init__(
        self,
        bootstrap: str | Sequence[str] = DEFAULT_BOOTSTRAP,
        *,
        acks: Acks | int | str = 1,
        linger_ms: int = 5,
        batch_size: int = 16384,
        compression: str | None = "lz4",
        enable_idempotence: bool = True,
        retries: int = RETRIES_DEFAULT,
        retry_backoff_ms: int = 100,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: int = 60_000,
        request_timeout_ms: int = 30_000,
        delivery_timeout_ms: int = 120_000,
        max_in_flight: int = 5,
        clock: Clock | None = None,
    ) -> None:
        acks_value = parse_acks(acks)
        for name, value in (("linger_ms", linger_ms), ("retries", retries),
                            ("retry_backoff_ms", retry_backoff_ms), ("max_block_ms", max_block_ms)):
            if value < 0:
                raise _config_error(f"{name} must not be negative, not {value}")
        for name, value in (("batch_size", batch_size), ("buffer_memory", buffer_memory),
                            ("request_timeout_ms", request_timeout_ms),
                            ("delivery_timeout_ms", delivery_timeout_ms),
                            ("max_in_flight", max_in_flight)):
            if value <= 0:
                raise _config_error(f"{name} must be positive, not {value}")
        self.batch_size_bytes = min(batch_size, limits.batch_size_bytes_max)
        self.max_block_ms = max_block_ms
        # What one record or batch may take: the batch size limit, or all of buffer_memory.
        self._size_bytes_bound = min(limits.batch_size_bytes_max, buffer_memory)
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
        )
        connections = Connections(bootstrap, max_in_flight=max_in_flight)
        self._sender = Sender(self.config, self._shared, connections, self._clock.monotonic_ms)
        self._thread = threading.Thread(target=self._sender.run, name="zlog-producer-io",
                                        daemon=True)
        self._closed = False
        self._thread.start()

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
        """Queue one record; the future resolves to where it landed, or to a ZlogError."""
        value_bytes = _as_bytes(value, "value")
        key_bytes = _as_bytes(key, "key")
        record_headers = _as_headers(headers)
        size_bytes = record_size_bytes(value_bytes, key_bytes, record_headers)
        self._check_size(size_bytes)
        stamp_ms = self._clock.wall_ms() if timestamp_ms is None else timestamp_ms
        deadline_ms = self._clock.monotonic_ms() + self.max_block_ms
        future: Future[RecordMetadata] = Future()
        shared = self._shared
        with shared.lock:
            count = self._wait_for_partition_count(topic, deadline_ms)
            if partition is not None:
                chosen = self._checked_partition(topic, partition, count)
            elif key_bytes is not None:
                chosen = partition_for_key(key_bytes, count)
            else:
                chosen = self._sticky.partition(topic, count)
            self._wait_for_room(size_bytes + BATCH_OVERHEAD_BYTES, deadline_ms)
            opened, closed = shared.accumulator.append(
                TopicPartition(topic, chosen), value=value_bytes, key=key_bytes,
                timestamp_ms=stamp_ms, headers=record_headers, future=future,
                now_ms=self._clock.monotonic_ms(), size_bytes=size_bytes,
            )
            if closed and key_bytes is None and partition is None:
                self._sticky.on_batch_full(topic, chosen, count)
        if closed or (opened and self._shared.accumulator.linger_ms == 0):
            self._sender.send_now_or_wake()  # ready now: sent from this thread if it can be
        elif opened:
            self._sender.wake()  # a linger timer starts
        return future

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes] | npt.NDArray[np.uint8],
        keys: Sequence[bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Future[list[BatchMetadata]]:
        """The fast path: many values (bytes, or a 2-D uint8 array, one row each) at once.

        Values are cut into batches of about `batch_size` by numpy and encoded by the array
        codec: no Python call per record. Keyed values are spread by Kafka's partitioner
        (hashed by numpy too); keyless ones go to one sticky partition. The future resolves to
        one BatchMetadata per batch once all are acknowledged, or to the first error.
        """
        count = len(values)
        completion_future: Future[list[BatchMetadata]]
        if count == 0:
            completion_future = Future()
            completion_future.set_result([])
            return completion_future
        if keys is not None and len(keys) != count:
            raise ZlogError(ErrorCode.INVALID_REQUEST, f"{len(keys)} keys for {count} values")
        stamp_ms = self._clock.wall_ms() if timestamp_ms is None else timestamp_ms
        deadline_ms = self._clock.monotonic_ms() + self.max_block_ms
        shared = self._shared
        with shared.lock:
            partition_count = self._wait_for_partition_count(topic, deadline_ms)
            groups = self._group_by_partition(topic, values, keys, partition, partition_count)
            plans = [
                (chosen, group_values, group_keys, cut)
                for chosen, group_values, group_keys in groups
                for cut in cut_points(group_values, group_keys, self.batch_size_bytes)
            ]
            completion = BulkCompletion(len(plans))
            for index, (chosen, group_values, group_keys, (start, stop, size_bytes)) in enumerate(
                plans
            ):
                self._check_size(size_bytes)
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
                )
                self._sender.wake()
            if keys is None and partition is None:
                self._sticky.on_batch_full(topic, groups[0][0], partition_count)
        return completion.future

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
        shared = self._shared
        while not shared.accumulator.has_room(size_bytes):
            self._check_open()
            if self._clock.monotonic_ms() >= deadline_ms:
                raise ZlogError(ErrorCode.REQUEST_TIMED_OUT,
                                f"buffer_memory={shared.accumulator.buffer_memory_bytes} bytes "
                                f"stayed full for max_block_ms={self.max_block_ms}")
            shared.lock.wait(self._remaining_s(deadline_ms))
        self._check_open()

    # -- flush and close ------------------------------------------------------------------

    def flush(self, timeout_ms: int | None = None) -> None:
        """Send everything queued now at once, and wait until all of it is answered."""
        shared = self._shared
        deadline_ms = None if timeout_ms is None else self._clock.monotonic_ms() + timeout_ms
        with shared.lock:
            snapshot = list(shared.accumulator.unfinished)
            shared.flushes_waiting += 1
            try:
                self._sender.wake()
                while not all(batch.finished for batch in snapshot):
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
        """Send what is queued (waiting up to timeout_ms), then stop; later sends raise."""
        if self._closed:
            return
        self._closed = True
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
