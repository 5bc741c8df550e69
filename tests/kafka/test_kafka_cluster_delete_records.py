"""Kafka's DeleteRecords on a 3-broker cluster: confluent-kafka's admin client finds the
partition's leader in Metadata and sends it there (a worker's Kafka port); once answered, every
replica's log start is at the offset (on its disk), a Kafka consumer from the beginning starts
there, and so it does again after the leader is killed with kill -9 and another one leads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient

from tests.first_read import replicated_records, stored_log_start
from tests.kafka.kafka_clients import confluent_first_offset
from zlog.client import TopicPartition
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes

pytestmark = pytest.mark.slow

TOPIC: Final = "kafka-deleted"
RECORDS: Final = 20
DELETED_BELOW: Final = 12
WAIT_S: Final = 60.0
BEGINNING: Final = confluent_kafka.OFFSET_BEGINNING


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    with cluster_processes(3, tmp_path) as running:
        yield running


def test_kafka_delete_records_reaches_every_replica_and_outlives_the_leader(
        cluster: ClusterProcesses) -> None:
    tp = TopicPartition(TOPIC, 0)
    leader = replicated_records(cluster, tp, RECORDS, timeout_s=WAIT_S)
    bootstrap = ",".join(broker.kafka_bootstrap for broker in cluster.brokers.values())

    admin_client = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin_client.delete_records(
        [confluent_kafka.TopicPartition(TOPIC, 0, DELETED_BELOW)],
        request_timeout=WAIT_S, operation_timeout=WAIT_S)
    (deleted,) = [future.result(WAIT_S) for future in futures.values()]
    assert deleted.low_watermark == DELETED_BELOW
    assert {node: stored_log_start(cluster.broker(node).data_dir, tp) for node in (1, 2, 3)
            } == dict.fromkeys((1, 2, 3), DELETED_BELOW), "a replica still holds what was deleted"
    assert confluent_first_offset(bootstrap, TOPIC, BEGINNING) == DELETED_BELOW

    cluster.broker(leader).kill_all()
    cluster.wait_for(lambda p: p.leader not in (leader, -1) and p.error_code == 0
                     and bool(p.endpoint), TOPIC, 0, f"a leader other than {leader}")
    survivors = ",".join(broker.kafka_bootstrap for node, broker in cluster.brokers.items()
                         if node != leader)
    assert confluent_first_offset(survivors, TOPIC, BEGINNING) == DELETED_BELOW
