"""kill -9 during acks=1 production: nothing acknowledged is lost, nothing is written twice.

Spec: DESIGN.md section 5 ("Worker crash: supervisor restarts it; ring contents recovered;
nothing acknowledged is lost"; startup recovery of the ring and the active segment) and the
producer's delivery contract (zlog/client/producer.py: retries, idempotence by default).

A background thread produces unique values (`<seed>-<index>`) with acks=1 to two partitions,
keeping a window of unacknowledged records so that many batches are in flight when the kill
lands, at a moment chosen by the seed. Afterwards every partition is read from the start:
offsets must be contiguous, no value may appear twice, and every record whose future resolved
successfully must sit exactly at the offset its future reported. Rerun one case with
`pytest --seed N`.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Final

import pytest

from tests.broker_fixtures import BrokerProcess, broker_process
from tests.waiting import wait_until
from zlog.broker.config import KEYS as BROKER_CONFIG_KEYS
from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from zlog.client.records import RecordMetadata

pytestmark = pytest.mark.slow

TOPIC: Final = "crash"
PARTITIONS: Final = 2
RECORDS: Final = 12_000
UNACKED_WINDOW: Final = 1_500  # records sent but not yet answered, at most
REQUEST_TIMEOUT_MS: Final = 1_500  # requests to a dead worker time out and are retried
DELIVERY_TIMEOUT_MS: Final = 60_000
DEADLINE_S: Final = 60.0
RING_FLUSH_KEY: Final = "ring_flush_bytes"


@pytest.fixture
def seed(seed_option: int | None) -> Iterator[int]:
    value = seed_option if seed_option is not None else random.SystemRandom().randrange(2**31)
    print(f"\nseed {value} (rerun with: pytest --seed {value})")
    yield value


class Production:
    """Produces RECORDS unique values on a thread, at most UNACKED_WINDOW unanswered at once."""

    def __init__(self, producer: Producer, seed: int) -> None:
        self.producer = producer
        self.values = [f"{seed}-{index:06d}".encode() for index in range(RECORDS)]
        self.futures: list[Future[RecordMetadata]] = []
        self.failure: BaseException | None = None  # the thread's own failure (a send raised)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="production", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(DEADLINE_S)

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"production not finished in {timeout_s}s"
        assert self.failure is None, repr(self.failure)

    def _run(self) -> None:
        try:
            for index, value in enumerate(self.values):
                if self._stop.is_set():
                    return
                self.futures.append(self.producer.send(TOPIC, value,
                                                       partition=index % PARTITIONS))
                if index >= UNACKED_WINDOW:
                    self._await(self.futures[index - UNACKED_WINDOW])
        except BaseException as error:
            self.failure = error

    def _await(self, future: Future[RecordMetadata]) -> None:
        deadline = time.monotonic() + DEADLINE_S
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


def _producer(broker: BrokerProcess) -> Producer:
    return Producer(broker.endpoint, acks=1, linger_ms=1, batch_size=1024,
                    request_timeout_ms=REQUEST_TIMEOUT_MS, delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
                    retry_backoff_ms=50, max_block_ms=int(DEADLINE_S * 1000))


def _create_topic(broker: BrokerProcess) -> None:
    with Admin(broker.endpoint, request_timeout_ms=10_000) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS)])
    endpoints = {broker.data_endpoint(TOPIC, p) for p in range(PARTITIONS)}
    assert len(endpoints) == PARTITIONS, "one partition per worker"


def _log_ends(broker: BrokerProcess) -> dict[int, int]:
    with Admin(broker.endpoint, request_timeout_ms=10_000) as admin:
        found = admin.list_offsets({TopicPartition(TOPIC, p): -1 for p in range(PARTITIONS)})
    return {tp.partition: answer.offset for tp, answer in found.items()}


def _read_log(broker: BrokerProcess, ends: dict[int, int]) -> dict[int, dict[int, bytes]]:
    """partition -> {offset: value}, everything below each partition's end."""
    log: dict[int, dict[int, bytes]] = {p: {} for p in range(PARTITIONS)}
    with Consumer(broker.endpoint, auto_offset_reset="earliest", fetch_max_wait_ms=100) as reader:
        reader.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])

        def complete() -> bool:
            for tp, view in reader.poll_batches(100):
                for offset, value in zip(view.offsets.tolist(), view.values(), strict=True):
                    assert offset not in log[tp.partition], f"offset {offset} read twice"
                    assert value is not None
                    log[tp.partition][offset] = value
            return all(len(log[p]) >= ends[p] for p in range(PARTITIONS))

        wait_until(complete, DEADLINE_S, interval_s=0, what="reading the whole log")
    return log


def _check(broker: BrokerProcess, production: Production, seed: int,
           must_survive: set[int]) -> dict[int, int]:
    """The log holds every acknowledged record at its offset; returns the log ends."""
    failures = production.failed()
    assert not failures, (
        f"seed {seed}: {len(failures)} sends failed, e.g. {next(iter(failures.items()))}")
    acknowledged = production.acknowledged()
    assert len(acknowledged) == RECORDS, f"seed {seed}"
    ends = _log_ends(broker)
    log = _read_log(broker, ends)
    seen: dict[bytes, tuple[int, int]] = {}
    for partition, records in log.items():
        assert sorted(records) == list(range(ends[partition])), (
            f"seed {seed}: partition {partition} has gaps")
        for offset, value in records.items():
            assert value not in seen, (
                f"seed {seed}: {value!r} stored twice, at {seen[value]} and "
                f"{(partition, offset)}")
            seen[value] = (partition, offset)
    for index, landed in acknowledged.items():
        value = production.values[index]
        assert landed.partition == index % PARTITIONS
        assert log[landed.partition].get(landed.offset) == value, (
            f"seed {seed}: record {index} was acknowledged at {landed.partition}/"
            f"{landed.offset} but the log holds {log[landed.partition].get(landed.offset)!r}")
    assert must_survive <= set(acknowledged)
    assert sum(ends.values()) == RECORDS, f"seed {seed}: {ends}"  # each record exactly once
    return ends


def _served_by_another_worker(broker: BrokerProcess, victim: int) -> bool:
    endpoint = broker.served_endpoints(TOPIC).get(0)
    if endpoint is None:
        return False
    try:
        return broker.worker_pid_for(endpoint) != victim
    except AssertionError:  # the metadata still names the dead worker's endpoint
        return False


def _kill_point(seed: int) -> int:
    """How many acknowledged records to wait for before the kill."""
    return random.Random(seed).randrange(RECORDS // 10, RECORDS // 3)


def test_a_worker_killed_during_production_loses_no_acknowledged_record(
    tmp_path: Path, seed: int,
) -> None:
    with broker_process(tmp_path, workers=2) as broker:
        _create_topic(broker)
        endpoint = broker.data_endpoint(TOPIC, 0)
        victim = broker.worker_pid_for(endpoint)
        kill_after = _kill_point(seed)
        producer = _producer(broker)
        production = Production(producer, seed)
        try:
            production.start()
            wait_until(lambda: len(production.acknowledged()) >= kill_after, DEADLINE_S,
                       interval_s=0.02, what=f"{kill_after} acknowledged records")
            in_flight = len(production.futures) - len(production.acknowledged())
            broker.kill_worker(victim)
            acknowledged_at_kill = set(production.acknowledged())
            print(f"killed worker {victim} after {len(acknowledged_at_kill)} acknowledged "
                  f"records, {in_flight} sent and unanswered")
            wait_until(lambda: victim not in broker.worker_pids()
                       and len(broker.worker_pids()) == 2, DEADLINE_S,
                       what="the supervisor to start a new worker")
            wait_until(lambda: _served_by_another_worker(broker, victim), DEADLINE_S,
                       interval_s=0.02, what="partition 0 served again")
            production.join(DEADLINE_S)
            producer.flush(timeout_ms=int(DEADLINE_S * 1000))
        finally:
            production.stop()
            producer.close(timeout_ms=5_000)
        assert "restarting worker" in broker.log_text()
        assert len(acknowledged_at_kill) < RECORDS, "the kill came after production ended"
        _check(broker, production, seed, acknowledged_at_kill)
        assert broker.worker_pids() and victim not in broker.worker_pids()


def _whole_broker_killed(tmp_path: Path, seed: int, extra_args: list[str]) -> None:
    with broker_process(tmp_path, workers=2, extra_args=extra_args) as broker:
        _create_topic(broker)
        kill_after = _kill_point(seed)
        producer = _producer(broker)
        production = Production(producer, seed)
        try:
            production.start()
            wait_until(lambda: len(production.acknowledged()) >= kill_after, DEADLINE_S,
                       interval_s=0.02, what=f"{kill_after} acknowledged records")
            broker.kill_all()
            acknowledged_at_kill = set(production.acknowledged())
            print(f"killed the broker after {len(acknowledged_at_kill)} acknowledged records")
            broker.start()  # the same data dir, ring dir and control endpoint
            production.join(DEADLINE_S)  # the same producer carries on after the restart
            producer.flush(timeout_ms=int(DEADLINE_S * 1000))
        finally:
            production.stop()
            producer.close(timeout_ms=5_000)
        assert len(acknowledged_at_kill) < RECORDS, "the kill came after production ended"
        ends = _check(broker, production, seed, acknowledged_at_kill)
        # The log continues where it ended, for a new producer too.
        with Producer(broker.endpoint, acks=1, linger_ms=0) as late:
            for partition in range(PARTITIONS):
                landed = late.send(TOPIC, b"after", partition=partition).result(DEADLINE_S)
                assert landed.offset == ends[partition], f"seed {seed}"


def test_the_whole_broker_killed_during_production_loses_no_acknowledged_record(
    tmp_path: Path, seed: int,
) -> None:
    _whole_broker_killed(tmp_path, seed, [])


def test_the_whole_broker_killed_with_a_raised_ring_flush_threshold(
    tmp_path: Path, seed: int,
) -> None:
    """Acknowledged batches then live only in the shared-memory ring until a flush."""
    if RING_FLUSH_KEY not in BROKER_CONFIG_KEYS:
        pytest.skip("zlog serve exposes no ring flush threshold (no ring_flush_bytes setting: "
                    "the supervisor starts its workers with the write-through default)")
    _whole_broker_killed(tmp_path, seed, ["--ring-flush-bytes", str(4 * 1024 * 1024)])
