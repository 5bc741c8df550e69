"""A Kafka client producing with acks=all and idempotence to a 3-broker cluster while the
partition's leader is killed with kill -9: the client recovers by itself (new metadata, the
new leader's worker Kafka port, retries of what was in flight), and every record it was told
was written is in the log exactly once, at the offset it was told."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import confluent_kafka
import pytest

from zlog.client import Admin, NewTopic
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes

pytestmark = pytest.mark.slow

TOPIC: Final = "kafka-failover"
RECORDS_PER_S: Final = 500
ACKS_BEFORE_KILL: Final = 1_000
ACKS_AFTER_KILL: Final = 1_000
DEADLINE_S: Final = 120.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    with cluster_processes(3, tmp_path) as running:
        yield running


class KafkaProduction:
    """confluent-kafka sending unique values at a steady pace until stopped; what each was
    acknowledged at, or why it failed."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": int(DEADLINE_S * 1000),
            "topic.metadata.refresh.interval.ms": 1000})
        self.acknowledged: dict[bytes, int] = {}
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: confluent_kafka.KafkaError | None,
                   message: confluent_kafka.Message) -> None:
        if error is not None:
            self.failed.append(str(error))
        else:
            self.acknowledged[message.value()] = message.offset()

    def _run(self) -> None:
        index = 0
        started = time.monotonic()
        while not self._stop.is_set():
            early_s = started + index / RECORDS_PER_S - time.monotonic()
            if early_s > 0:  # (a negative timeout would make poll wait forever)
                self.producer.poll(min(early_s, 0.01))
                continue
            self.producer.produce(TOPIC, b"record-%08d" % index, partition=0,
                                  on_delivery=self._delivered)
            index += 1
            self.producer.poll(0)

    def start(self) -> None:
        self._thread.start()

    def await_acks(self, count: int) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while len(self.acknowledged) < count:
            assert not self.failed, self.failed[:3]
            assert time.monotonic() < deadline, f"{len(self.acknowledged)} of {count} acks"
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        assert self.producer.flush(DEADLINE_S) == 0, "every record delivered or failed"


def read_all(bootstrap: str, count: int) -> list[tuple[int, bytes]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
    found: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(found) < count and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 0.5):
            assert message.error() is None, message.error()
            found.append((message.offset(), message.value()))
    consumer.close()
    return found


def test_a_kafka_producer_rides_out_a_killed_leader_and_writes_each_record_once(
        cluster: ClusterProcesses) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, replication_factor=3,
                                      configs={"min.insync.replicas": "2"})])
    cluster.wait_isr(TOPIC, 0, {1, 2, 3})
    bootstrap = ",".join(broker.kafka_bootstrap for broker in cluster.brokers.values())
    production = KafkaProduction(bootstrap)
    production.start()
    production.await_acks(ACKS_BEFORE_KILL)
    victim = cluster.partition(TOPIC, 0).leader
    cluster.broker(victim).kill_all()
    cluster.wait_for(lambda p: p.leader not in (victim, -1) and p.error_code == 0
                     and bool(p.endpoint), TOPIC, 0, f"a leader other than {victim}")
    production.await_acks(len(production.acknowledged) + ACKS_AFTER_KILL)
    cluster.broker(victim).start()
    production.stop()
    assert not production.failed, production.failed[:3]

    survivors = [b for b in cluster.brokers.values() if b.process is not None]
    log = read_all(",".join(b.kafka_bootstrap for b in survivors), len(production.acknowledged))
    offsets = [offset for offset, _ in log]
    assert offsets == list(range(len(log))), "no gap"
    values = [value for _, value in log]
    assert len(set(values)) == len(values), "no record written twice"
    where = {value: offset for offset, value in log}
    lost = [v for v in production.acknowledged if v not in where]
    assert not lost, f"{len(lost)} acknowledged records lost"
    assert all(where[v] == offset for v, offset in production.acknowledged.items()), \
        "each record at the offset its acknowledgement named"
