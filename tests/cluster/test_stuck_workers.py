"""A broker whose workers stop answering: its supervisor goes on, and so does the cluster.

Three brokers, one topic of three partitions (three replicas each, min.insync.replicas=2),
each broker leading one. The workers and the worker fork server of one broker are frozen as a
disk stuck in I/O would freeze them, its supervisor left running. That supervisor must never
wait on them: it keeps answering, keeps heartbeating the controller (and, when it is the
controller, keeps deciding), kills the stalled workers and serves their partitions again
from new ones, or has their leadership moved when they cannot be killed. Writes with
acks=all go on everywhere within a deadline; once thawed, the broker rejoins every ISR and
no acknowledged record is lost.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Final

import psutil
import pytest

from tests.cluster_fixtures import ClusterProcesses, cluster_processes
from tests.production import log_ends, read_log
from tests.waiting import wait_until
from zlog.client import Admin, NewTopic, Producer
from zlog.client.records import RecordMetadata
from zlog.errors import ZlogError

pytestmark = pytest.mark.slow

TOPIC: Final = "stuck"
PARTITIONS: Final = 3
METADATA_TIMEOUT_MS: Final = 3_000  # a broker whose loop turns answers in milliseconds
METADATA_ROUNDS: Final = 25  # requests to each other broker while the workers are frozen
LED_ELSEWHERE_S: Final = 30.0  # replica.lag.time.max.ms (10 s) takes the frozen one out
ANYWHERE_S: Final = 60.0  # plus the worker stall timeout and a restart, or an election
RECOVERY_S: Final = 60.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    with cluster_processes(3, tmp_path) as running:
        yield running


def _topic_led_by_each_broker(cluster: ClusterProcesses) -> dict[int, int]:
    """partition -> its leader, once every partition is fully in sync."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, replication_factor=3,
                                      configs={"min.insync.replicas": "2"})])
    for partition in range(PARTITIONS):
        cluster.wait_isr(TOPIC, partition, {1, 2, 3})
    return {p: cluster.partition(TOPIC, p).leader for p in range(PARTITIONS)}


def _freeze_workers(cluster: ClusterProcesses, node: int) -> list[int]:
    """SIGSTOP the fork server and every worker of broker `node`, not its supervisor."""
    supervisor = psutil.Process(cluster.broker(node).supervisor_pid)
    frozen = [child.pid for child in supervisor.children(recursive=True)]
    assert frozen, "the broker has workers"
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    return frozen


def _thaw(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def _metadata_answered_by_the_others(cluster: ClusterProcesses, frozen: int) -> None:
    """Every Metadata request to the other brokers is answered, none times out."""
    others = [broker for node, broker in cluster.brokers.items() if node != frozen]
    failures = []
    for round_index in range(METADATA_ROUNDS):
        for broker in others:
            try:
                broker.metadata([TOPIC], timeout_ms=METADATA_TIMEOUT_MS)
            except (ZlogError, AssertionError) as error:
                failures.append(f"round {round_index}, {broker.endpoint}: {error}")
        time.sleep(0.2)  # spread the rounds over the stall (a pace, not a wait for a state)
    assert not failures, f"{len(failures)} Metadata requests failed: {failures[:3]}"


def _acknowledged(futures: dict[bytes, Future[RecordMetadata]], within_s: float,
                  what: str) -> dict[bytes, RecordMetadata]:
    deadline = time.monotonic() + within_s
    landed: dict[bytes, RecordMetadata] = {}
    for value, future in futures.items():
        try:
            landed[value] = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except Exception as error:  # a timeout or the record's own failure
            raise AssertionError(f"{what}: {value!r} not acknowledged in {within_s}s: "
                                 f"{error!r}") from None
    return landed


def _send(producer: Producer, partition: int, label: str) -> dict[bytes, Future[RecordMetadata]]:
    values = [f"{label}-{partition}-{index}".encode() for index in range(20)]
    return {value: producer.send(TOPIC, value, partition=partition) for value in values}


def _nothing_acknowledged_lost(cluster: ClusterProcesses,
                               acknowledged: dict[bytes, RecordMetadata]) -> None:
    ends = log_ends(cluster.bootstrap, TOPIC, PARTITIONS)
    log = read_log(cluster.bootstrap, TOPIC, ends, RECOVERY_S)
    for value, landed in acknowledged.items():
        assert log[landed.partition].get(landed.offset) == value, (
            f"{value!r} was acknowledged at {landed.partition}/{landed.offset}, the log holds "
            f"{log[landed.partition].get(landed.offset)!r}")


def test_the_controllers_workers_frozen_stop_neither_its_supervisor_nor_the_cluster(
        cluster: ClusterProcesses) -> None:
    leaders = _topic_led_by_each_broker(cluster)
    controller = cluster.metadata().controller_id
    assert controller in leaders.values()
    producer = Producer(cluster.bootstrap, acks="all", linger_ms=1, request_timeout_ms=1_500,
                        delivery_timeout_ms=int(ANYWHERE_S * 1000), retry_backoff_ms=50)
    acknowledged: dict[bytes, RecordMetadata] = {}
    try:
        for partition in range(PARTITIONS):
            acknowledged |= _acknowledged(_send(producer, partition, "before"), 30.0, "before")
        frozen = _freeze_workers(cluster, controller)
        try:
            elsewhere = {p for p, leader in leaders.items() if leader != controller}
            sent = {p: _send(producer, p, "frozen") for p in range(PARTITIONS)}
            _metadata_answered_by_the_others(cluster, controller)
            for partition in sorted(elsewhere):
                acknowledged |= _acknowledged(sent[partition], LED_ELSEWHERE_S,
                                              f"{TOPIC}-{partition}, led elsewhere")
            for partition in sorted(set(range(PARTITIONS)) - elsewhere):
                acknowledged |= _acknowledged(sent[partition], ANYWHERE_S,
                                              f"{TOPIC}-{partition}, led by the frozen broker")
            assert cluster.broker(controller).metadata([TOPIC], timeout_ms=METADATA_TIMEOUT_MS)
        finally:
            _thaw(frozen)
        for partition in range(PARTITIONS):
            cluster.wait_isr(TOPIC, partition, {1, 2, 3})
        for partition in range(PARTITIONS):
            acknowledged |= _acknowledged(_send(producer, partition, "after"), 30.0, "after")
    finally:
        producer.close()
    _nothing_acknowledged_lost(cluster, acknowledged)
    wait_until(lambda: len(cluster.broker(controller).worker_pids()) == 1, RECOVERY_S,
               what="the broker's worker serving again")
