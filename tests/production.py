"""Production under faults, and the check that nothing acknowledged was lost or doubled.

A `Production` sends unique values (`<seed>-<index>`) round-robin over a topic's partitions on
a thread, keeping at most `window` records unanswered, so that many batches are in flight when
a fault lands. `check_log` then reads every partition from the start and asserts: offsets
contiguous, no value twice, every acknowledged record exactly where its future said, and (when
every send was acknowledged) each record once. A production runs through all its records, or until
`stop`. The fault tests (one broker) and the cluster tests (leaders moving between brokers)
share it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from zlog.client import Admin, Consumer, Producer, TopicPartition
from zlog.client.records import RecordMetadata
from zlog_testbed.waiting import wait_until


class Production:
    """Produces `records` unique values on a thread, at most `window` unanswered at once."""

    def __init__(self, producer: Producer, seed: int, *, topic: str, partitions: int,
                 records: int, window: int, deadline_s: float,
                 records_per_s: float | None = None) -> None:
        self.producer = producer
        self.topic = topic
        self.partitions = partitions
        self.window = window
        self.deadline_s = deadline_s
        self.values = [f"{seed}-{index:06d}".encode() for index in range(records)]
        self.records_per_s = records_per_s  # a pace to keep, or as fast as answers come
        self.futures: list[Future[RecordMetadata]] = []
        self._acked_count = 0
        self._count_lock = threading.Lock()
        self.failure: BaseException | None = None  # the thread's own failure (a send raised)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="production", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """No more sends (those sent still get their answers; `flush` waits for them)."""
        self._stop.set()
        self._thread.join(self.deadline_s)

    @property
    def sent(self) -> int:
        return len(self.futures)

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"production not finished in {timeout_s}s"
        assert self.failure is None, repr(self.failure)

    def _run(self) -> None:
        started = time.monotonic()
        try:
            for index, value in enumerate(self.values):
                if self._stop.is_set():
                    return
                if self.records_per_s is not None:
                    ahead_s = started + index / self.records_per_s - time.monotonic()
                    if ahead_s > 0:
                        self._stop.wait(ahead_s)
                future = self.producer.send(self.topic, value, partition=index % self.partitions)
                future.add_done_callback(self._count)
                self.futures.append(future)
                if index >= self.window:
                    self._await(self.futures[index - self.window])
        except BaseException as error:
            self.failure = error

    def _count(self, future: Future[RecordMetadata]) -> None:
        if future.exception() is None:
            with self._count_lock:
                self._acked_count += 1

    @property
    def acknowledged_count(self) -> int:
        """How many sends succeeded so far (cheap: counted as they resolve)."""
        return self._acked_count

    def await_more_acks(self, count: int) -> None:
        """Until `count` more sends than now have succeeded (within `deadline_s`)."""
        target = self._acked_count + count
        wait_until(lambda: self._acked_count >= target, self.deadline_s, interval_s=0.02,
                   what=f"{target} acknowledged records")

    def _await(self, future: Future[RecordMetadata]) -> None:
        deadline = time.monotonic() + self.deadline_s
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                future.exception(timeout=0.1)
            except FutureTimeout:
                continue
            return

    def acknowledged(self) -> dict[int, RecordMetadata]:
        """index -> where the record landed, for every future that resolved successfully."""
        return {index: future.result() for index, future in enumerate(list(self.futures))
                if future.done() and future.exception() is None}

    def failed(self) -> dict[int, BaseException]:
        failures: dict[int, BaseException] = {}
        for index, future in enumerate(list(self.futures)):
            error = future.exception() if future.done() else None
            if error is not None:
                failures[index] = error
        return failures


def acks_all_production(bootstrap: str, seed: int, *, topic: str, partitions: int,
                        records: int, window: int, deadline_s: float, records_per_s: float,
                        request_timeout_ms: int, max_block_ms: int = 60_000) -> Production:
    """A `Production` through an idempotent acks=all producer that retries through leader
    changes: a request to a leader gone silent times out after `request_timeout_ms` and is
    sent again; a record fails only after `deadline_s`."""
    producer = Producer(bootstrap, acks="all", linger_ms=1, batch_size=4096,
                        request_timeout_ms=request_timeout_ms,
                        delivery_timeout_ms=int(deadline_s * 1000), retry_backoff_ms=50,
                        max_block_ms=max_block_ms)
    return Production(producer, seed, topic=topic, partitions=partitions, records=records,
                      window=window, deadline_s=deadline_s, records_per_s=records_per_s)


@contextlib.contextmanager
def producing(production: Production) -> Iterator[Production]:
    """`production` running for the block; then stopped, every send answered (a flush), its
    producer closed, and the failure of its thread, if any, reported."""
    try:
        production.start()
        yield production
        production.stop()
        production.producer.flush(timeout_ms=int(production.deadline_s * 1000))
    finally:
        production.stop()
        production.producer.close(timeout_ms=5_000)
    assert production.failure is None, repr(production.failure)


def log_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    with Admin(bootstrap, request_timeout_ms=10_000) as admin:
        found = admin.list_offsets({TopicPartition(topic, p): -1 for p in range(partitions)})
    return {tp.partition: answer.offset for tp, answer in found.items()}


def read_log(bootstrap: str, topic: str, ends: dict[int, int],
             deadline_s: float) -> dict[int, dict[int, bytes]]:
    """partition -> {offset: value}, everything below each partition's end."""
    log: dict[int, dict[int, bytes]] = {p: {} for p in ends}
    with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as reader:
        reader.assign([TopicPartition(topic, p) for p in ends])

        def complete() -> bool:
            for tp, view in reader.poll_batches(100):
                for offset, value in zip(view.offsets.tolist(), view.values(), strict=True):
                    assert offset not in log[tp.partition], f"offset {offset} read twice"
                    assert value is not None
                    log[tp.partition][offset] = value
            return all(len(log[p]) >= ends[p] for p in ends)

        wait_until(complete, deadline_s, interval_s=0, what="reading the whole log")
    return log


def check_log(bootstrap: str, production: Production, seed: int, must_survive: set[int],
              unacknowledged: frozenset[bytes] = frozenset()) -> dict[int, dict[int, bytes]]:
    """The log holds every acknowledged record at its offset, each once, and nothing else but
    for `unacknowledged`: values the test wrote besides the production whose writes were not
    acknowledged, which a log may or may not keep (a write that timed out on its way to the
    replicas may have reached them); returns the log (partition -> offset -> value)."""
    failures = production.failed()
    assert not failures, (
        f"seed {seed}: {len(failures)} sends failed, e.g. {next(iter(failures.items()))}")
    acknowledged = production.acknowledged()
    records = production.sent  # all of them, or those sent before `stop`
    assert len(acknowledged) == records, f"seed {seed}"
    ends = log_ends(bootstrap, production.topic, production.partitions)
    log = read_log(bootstrap, production.topic, ends, production.deadline_s)
    seen: dict[bytes, tuple[int, int]] = {}
    for partition, stored in log.items():
        assert sorted(stored) == list(range(ends[partition])), (
            f"seed {seed}: partition {partition} has gaps")
        for offset, value in stored.items():
            assert value not in seen, (
                f"seed {seed}: {value!r} stored twice, at {seen[value]} and "
                f"{(partition, offset)}")
            seen[value] = (partition, offset)
    for index, landed in acknowledged.items():
        value = production.values[index]
        assert landed.partition == index % production.partitions
        assert log[landed.partition].get(landed.offset) == value, (
            f"seed {seed}: record {index} was acknowledged at {landed.partition}/"
            f"{landed.offset} but the log holds {log[landed.partition].get(landed.offset)!r}")
    assert must_survive <= set(acknowledged)
    sent = set(production.values[:records])
    strangers = {(partition, offset): value for partition, stored in log.items()
                 for offset, value in stored.items() if value not in sent}
    assert set(strangers.values()) <= unacknowledged, (
        f"seed {seed}: records no send of this test made: {strangers}")
    # each record exactly once
    assert sum(ends.values()) == records + len(strangers), f"seed {seed}: {ends}"
    return log


class Tailing:
    """A consumer thread that reads every partition from the start while faults happen: it
    must never raise (a leader moving is retried inside the consumer), and what it reads must
    be each partition's log in order, from offset 0 with no gap and no repeat (it reads only
    below the high watermark, which never moves back over committed batches)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int,
                 **consumer_options: Any) -> None:
        self.consumer = Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                                 **consumer_options)
        self.consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        self.read: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tailing", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for tp, view in self.consumer.poll_batches(100):
                    values = view.values()
                    self.read[tp.partition] += [
                        (offset, value or b"")
                        for offset, value in zip(view.offsets.tolist(), values, strict=True)]
        except BaseException as error:
            self.failure = error

    def stop_and_check(self, log: dict[int, dict[int, bytes]], deadline_s: float) -> None:
        """Once it has read up to the ends of `log` (the whole log as stored): stop, close,
        and compare."""
        ends = {p: len(stored) for p, stored in log.items()}
        wait_until(lambda: self.failure is not None or all(
            len(self.read[p]) >= ends[p] for p in ends), deadline_s, interval_s=0.05,
            what="the tailing consumer to read the whole log")
        self._stop.set()
        self._thread.join(deadline_s)
        self.consumer.close()
        assert self.failure is None, f"the consumer raised {self.failure!r}"
        for partition, read in self.read.items():
            offsets = [offset for offset, _ in read]
            assert offsets == list(range(len(offsets))), (
                f"partition {partition}: read offsets are not 0, 1, 2, ...")
            assert all(log[partition][offset] == value for offset, value in read), (
                f"partition {partition}: read a value the log does not hold there")
