"""Kafka's view of the cluster: each worker's Kafka port a node with a stable, unique id."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from zlog.errors import ErrorCode
from zlog.kafka_gateway.topology import (
    PORTS_PER_BROKER,
    WORKER_NODE_BROKER_ID_MAX,
    KafkaNode,
    metadata_values,
    worker_node_id,
)
from zlog.transport.messages.admin import (
    BrokerMetadata,
    MetadataResponseV0,
    PartitionMetadata,
    TopicMetadata,
)

GATEWAY = KafkaNode(2, "broker2.example", 9092, "rack-b")
HAS_KAFKA_ENDPOINT = "kafka_endpoint" in {f.name for f in dataclasses.fields(PartitionMetadata)}


def _partition(index: int, leader: int, kafka_endpoint: str) -> PartitionMetadata:
    partition = PartitionMetadata(index, leader, 7, (1, 2, 3), (2, 1), "tcp://h:1")
    if HAS_KAFKA_ENDPOINT:
        endpoint: dict[str, Any] = {"kafka_endpoint": kafka_endpoint}  # builds with worker ports
        return dataclasses.replace(partition, **endpoint)
    return partition


def test_worker_node_ids_are_unique_per_broker_and_port_and_never_a_brokers() -> None:
    ids = {worker_node_id(broker, port) for broker in range(4) for port in (1, 9093, 65535)}
    assert len(ids) == 12
    assert min(i for i in ids if i is not None) >= PORTS_PER_BROKER  # above any gateway's
    highest = worker_node_id(WORKER_NODE_BROKER_ID_MAX, 65535)
    assert highest is not None and highest <= 2**31 - 1
    assert worker_node_id(WORKER_NODE_BROKER_ID_MAX + 1, 1) is None


@pytest.mark.skipif(not HAS_KAFKA_ENDPOINT, reason="the native metadata names no worker "
                    "Kafka ports in this build")
def test_a_partitions_leader_is_its_workers_kafka_node_in_every_list() -> None:
    native = MetadataResponseV0("cluster", 1, (BrokerMetadata(2, "h", "tcp://h:7400", "rack-b"),),
                                (TopicMetadata("t", 0, "", partitions=(
                                    _partition(0, 2, "broker2.example:40001"),
                                    _partition(1, 2, "broker2.example:40002"),
                                    _partition(2, 3, "")),
                                    topic_id="0123456789abcdef0123456789abcdef"),))
    values = metadata_values(native, GATEWAY)
    worker = worker_node_id(2, 40001)
    assert values["controller_id"] == 2
    assert {(b["node_id"], b["host"], b["port"], b["rack"]) for b in values["brokers"]} == {
        (2, "broker2.example", 9092, "rack-b"),
        (worker, "broker2.example", 40001, "rack-b"),
        (worker_node_id(2, 40002), "broker2.example", 40002, "rack-b")}
    first, _, leaderless = values["topics"][0]["partitions"]
    assert (first["leader_id"], first["leader_epoch"]) == (worker, 7)
    assert first["replica_nodes"] == [1, worker, 3] and first["isr_nodes"] == [worker, 1]
    assert (leaderless["leader_id"], leaderless["error_code"]) == (
        -1, ErrorCode.LEADER_NOT_AVAILABLE)


def test_a_leader_without_a_kafka_port_is_leader_not_available() -> None:
    native = MetadataResponseV0("cluster", 1, (), (TopicMetadata("t", 0, "", partitions=(
        _partition(0, 2, ""), _partition(1, -1, "")), topic_id=""),))
    values = metadata_values(native, GATEWAY)
    assert [(b["node_id"]) for b in values["brokers"]] == [2]
    assert [(p["leader_id"], p["error_code"]) for p in values["topics"][0]["partitions"]] == [
        (-1, ErrorCode.LEADER_NOT_AVAILABLE), (-1, ErrorCode.LEADER_NOT_AVAILABLE)]
    assert values["topics"][0]["topic_id"] is None  # Kafka's zero UUID on the wire
