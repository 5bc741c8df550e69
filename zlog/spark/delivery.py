"""Rows of one Spark task into one zlog topic, and proof that every record was acknowledged.

Every sink of this package ends here: the foreachPartition callable, the batch writer and the
streaming writer. One producer per task (Spark partition); rows go out with
`Producer.send_many` (values cut into batches by numpy, no Python call per record) and only rows
that need what send_many cannot express (a null value, headers) go one by one through
`Producer.send`. Rows are taken in runs of the same kind, so records of one partition keep
the order of the rows.

`close` flushes and then raises if any record was not acknowledged: Spark then fails the task
and retries it, which is what makes the sink at-least-once (see docs/spark.md).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from zlog.client import Producer
from zlog.errors import ErrorCode, ZlogError
from zlog.spark.options import SinkOptions

Headers = tuple[tuple[str, bytes | None], ...]
UInt8Rows = npt.NDArray[np.uint8]  # one value per row, all of one width


@dataclass(frozen=True, slots=True)
class RowColumns:
    """A chunk of rows as columns, already in the producer's types.

    `values` is a 2-D uint8 array when they are all of one width (then none is null and there
    are no headers); `partitions`, `keys` and `headers` are None when the DataFrame has no
    such column.
    """

    values: Sequence[bytes | None] | UInt8Rows
    keys: Sequence[bytes | None] | None = None
    partitions: Sequence[int | None] | None = None
    headers: Sequence[Headers] | None = None

    def __len__(self) -> int:
        return len(self.values)


class DeliveryTracker:
    """Counts records sent and acknowledged; remembers the first failure.

    Futures complete on the producer's I/O thread, hence the lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent = 0
        self.acknowledged = 0
        self.failed = 0
        self.first_error: BaseException | None = None

    def watch(self, future: Future[Any], record_count: int) -> None:
        with self._lock:
            self.sent += record_count

        def done(finished: Future[Any]) -> None:
            error = finished.exception()
            with self._lock:
                if error is None:
                    self.acknowledged += record_count
                else:
                    self.failed += record_count
                    if self.first_error is None:
                        self.first_error = error

        future.add_done_callback(done)

    def check(self, topic: str) -> None:
        """Raise unless every record sent was acknowledged."""
        with self._lock:
            missing = self.sent - self.acknowledged
            if missing == 0:
                return
            error = self.first_error
        code = error.code if isinstance(error, ZlogError) else ErrorCode.REQUEST_TIMED_OUT
        reason = (error.message if isinstance(error, ZlogError)
                  else repr(error) if error is not None
                  else "no acknowledgement came before the flush ended")
        raise ZlogError(code, f"{missing} of {self.sent} records for topic {topic!r} were not "
                              f"delivered (first error: {reason}); Spark retries the task")


class TopicWriter:
    """One task's producer: `write` chunks of rows, then `close` (flush and check)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        self.tracker = DeliveryTracker()
        self._producer: Producer | None = None

    @property
    def producer(self) -> Producer:
        if self._producer is None:  # opened on the first row: empty partitions cost nothing
            options = self.options
            self._producer = Producer(
                options.bootstrap,
                acks=options.acks,
                linger_ms=options.linger_ms,
                batch_size=options.batch_size_bytes,
                bulk_batch_size=options.batch_size_bytes,  # the option governs both paths
                compression=options.compression,
                delivery_timeout_ms=options.delivery_timeout_ms,
                request_timeout_ms=options.request_timeout_ms,
                max_block_ms=options.request_timeout_ms,
            )
        return self._producer

    def write(self, columns: RowColumns) -> None:
        """Queue the rows' records; a full buffer makes this wait (back-pressure)."""
        count = len(columns)
        if count == 0:
            return
        if isinstance(columns.values, np.ndarray) or (
                columns.headers is None and None not in columns.values):
            self._send_many(columns, 0, count)  # the bulk case: one run
            return
        headers = columns.headers
        slow = [
            value is None or bool(headers and headers[index])
            for index, value in enumerate(columns.values)
        ]
        start = 0
        while start < count:
            stop = start + 1
            while stop < count and slow[stop] == slow[start]:
                stop += 1
            if slow[start]:
                self._send_each(columns, start, stop)
            else:
                self._send_many(columns, start, stop)
            start = stop

    def _send_many(self, columns: RowColumns, start: int, stop: int) -> None:
        topic = self.options.topic
        values = columns.values[start:stop]
        keys = None if columns.keys is None else columns.keys[start:stop]
        if keys is not None and all(k is None for k in keys):
            keys = None
        if columns.partitions is None:
            groups: dict[int | None, list[int]] = {None: list(range(stop - start))}
        else:
            groups = {}
            for index, partition in enumerate(columns.partitions[start:stop]):
                groups.setdefault(partition, []).append(index)
        for partition, members in groups.items():
            if len(groups) == 1:
                group_values, group_keys = values, keys
            elif isinstance(values, np.ndarray):
                group_values = values[members]
            else:
                group_values = [values[i] for i in members]
                group_keys = None if keys is None else [keys[i] for i in members]
            future = self.producer.send_many(
                topic, group_values,  # type: ignore[arg-type]  # no None on this path
                keys=group_keys, partition=partition)
            self.tracker.watch(future, len(members))

    def _send_each(self, columns: RowColumns, start: int, stop: int) -> None:
        topic = self.options.topic
        producer = self.producer
        for index in range(start, stop):
            future = producer.send(
                topic, columns.values[index],
                key=None if columns.keys is None else columns.keys[index],
                partition=None if columns.partitions is None else columns.partitions[index],
                headers=None if columns.headers is None else columns.headers[index],
            )
            self.tracker.watch(future, 1)

    def close(self) -> int:
        """Flush, close and raise if any record is unacknowledged; the records delivered."""
        producer = self._producer
        if producer is None:
            return 0
        self._producer = None
        try:
            producer.flush(self.options.delivery_timeout_ms + self.options.request_timeout_ms)
        finally:
            producer.close(timeout_ms=0)
        self.tracker.check(self.options.topic)
        return self.tracker.acknowledged

    def abandon(self) -> None:
        """Close without waiting, after a failure (the task fails anyway)."""
        if self._producer is not None:
            self._producer.close(timeout_ms=0)
            self._producer = None
