"""A kafka-python group member that is always inside poll(), as an application's poll loop is.

kafka-python 3.0 runs a member's JoinGroup and SyncGroup round in its I/O thread. When that
round finishes while no poll() is waiting on it, the next poll() drops the result and joins
again, which starts the group's next rebalance. Two members polled in turn by one thread each
wait in turn while the other's round finishes, so under load they rebalance each other without
end. A member polled by a thread of its own, with no pause between polls, finishes its rounds
inside a poll(), as it does in a real consumer process.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from kafka import KafkaConsumer

T = TypeVar("T")
POLL_TIMEOUT_MS = 100
CALL_TIMEOUT_S = 60.0

Records = dict[Any, list[Any]]


class PolledMember:
    """Polls `consumer` from its own thread; `call` runs work on that thread between polls
    (a KafkaConsumer is used by one thread at a time)."""

    def __init__(self, consumer: KafkaConsumer,
                 on_records: Callable[[KafkaConsumer, Records], None] | None = None) -> None:
        self.consumer = consumer
        self._on_records = on_records
        self._calls: queue.SimpleQueue[tuple[Callable[[KafkaConsumer], Any], Future[Any]]] = (
            queue.SimpleQueue())
        self._stopping = threading.Event()
        self._failure: BaseException | None = None
        self._partitions: frozenset[int] = frozenset()
        self._thread = threading.Thread(target=self._run, name="polled-member", daemon=True)
        self._thread.start()

    @property
    def partitions(self) -> frozenset[int]:
        """The partitions assigned as of the last poll; a failed poll loop fails the caller."""
        if self._failure is not None:
            raise AssertionError("the member's poll loop failed") from self._failure
        return self._partitions

    def call(self, work: Callable[[KafkaConsumer], T]) -> T:
        """Run `work(consumer)` on the polling thread and return (or raise) what it did."""
        done: Future[T] = Future()
        self._calls.put((work, done))
        return done.result(CALL_TIMEOUT_S)

    def close(self) -> None:
        self._stopping.set()
        self._thread.join(CALL_TIMEOUT_S)
        self.consumer.close()

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                polled = self.consumer.poll(timeout_ms=POLL_TIMEOUT_MS)
                if polled and self._on_records is not None:
                    self._on_records(self.consumer, polled)
                self._partitions = frozenset(tp.partition for tp in self.consumer.assignment())
                self._run_calls()
        except BaseException as failure:  # reported to the test through `partitions`
            self._failure = failure
        finally:
            self._run_calls(failure=self._failure)

    def _run_calls(self, failure: BaseException | None = None) -> None:
        while True:
            try:
                work, done = self._calls.get_nowait()
            except queue.Empty:
                return
            if failure is not None:
                done.set_exception(failure)
                continue
            try:
                done.set_result(work(self.consumer))
            except Exception as error:  # handed to the caller of `call`
                done.set_exception(error)
