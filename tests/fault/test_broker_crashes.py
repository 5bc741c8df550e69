"""kill -9 during acks=1 production: nothing acknowledged is lost, nothing is written twice.

Spec: DESIGN.md section 5 ("Worker crash: supervisor restarts it; ring contents recovered;
nothing acknowledged is lost"; startup recovery of the ring and the active segment) and the
producer's delivery contract (zlog/client/producer.py: retries, idempotence by default).

A background thread produces unique values (`<seed>-<index>`) with acks=1 to two partitions,
keeping a window of unacknowledged records so that many batches are in flight when the kill
lands, at a moment chosen by the seed. Afterwards every partition is read from the start:
offsets must be contiguous, no value may appear twice, and every record whose future resolved
successfully must sit exactly at the offset its future reported. Rerun one case with
`pytest --seed N`. The production and the check are tests/production.py's.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Final

import pytest

from tests.production import Production, check_log
from zlog.broker.config import KEYS as BROKER_CONFIG_KEYS
from zlog.client import Admin, NewTopic, Producer
from zlog_testbed.broker_process import BrokerProcess, broker_process
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC: Final = "crash"
PARTITIONS: Final = 2
RECORDS: Final = 12_000
UNACKED_WINDOW: Final = 1_500  # records sent but not yet answered, at most
REQUEST_TIMEOUT_MS: Final = 1_500  # requests to a dead worker time out and are retried
DELIVERY_TIMEOUT_MS: Final = 60_000
DEADLINE_S: Final = 60.0
RING_FLUSH_KEY: Final = "ring_flush_bytes"


def _producer(broker: BrokerProcess) -> Producer:
    return Producer(broker.endpoint, acks=1, linger_ms=1, batch_size=1024,
                    request_timeout_ms=REQUEST_TIMEOUT_MS, delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
                    retry_backoff_ms=50, max_block_ms=int(DEADLINE_S * 1000))


def _create_topic(broker: BrokerProcess) -> None:
    with Admin(broker.endpoint, request_timeout_ms=10_000) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS)])
    endpoints = {broker.data_endpoint(TOPIC, p) for p in range(PARTITIONS)}
    assert len(endpoints) == PARTITIONS, "one partition per worker"


def _production(producer: Producer, seed: int) -> Production:
    return Production(producer, seed, topic=TOPIC, partitions=PARTITIONS, records=RECORDS,
                      window=UNACKED_WINDOW, deadline_s=DEADLINE_S)


def _check(broker: BrokerProcess, production: Production, seed: int,
           must_survive: set[int]) -> dict[int, int]:
    """The log ends, once checked."""
    log = check_log(broker.endpoint, production, seed, must_survive)
    return {partition: len(stored) for partition, stored in log.items()}


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
        production = _production(producer, seed)
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
            wait_until(lambda: broker.served_by_another_worker(TOPIC, PARTITIONS, victim),
                       DEADLINE_S, interval_s=0.02, what="partition 0 served again")
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
        production = _production(producer, seed)
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
