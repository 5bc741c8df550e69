"""Kafka's DeleteRecords against a real `zlog serve`: confluent-kafka's and kafka-python's admin
clients send it to each partition's leader (a worker's Kafka port), and what they deleted is
gone for every reader: Kafka consumers reset to the new log start, ListOffsets earliest and the
native Admin return it. Bad input gets Kafka's error and deletes nothing; the gateway, which
leads nothing, answers NOT_LEADER_OR_FOLLOWER. One broker for the module."""

from __future__ import annotations

import time
from typing import Final

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import OffsetOutOfRangeError

from tests.kafka.kafka_clients import confluent_first_offset, needs_worker_ports
from tests.kafka.kafka_wire import KafkaWire
from zlog import Admin
from zlog.client.producer import Producer
from zlog.client.records import NewTopic
from zlog.errors import ErrorCode
from zlog.types import EARLIEST_TIMESTAMP, TopicPartition
from zlog_testbed.broker_process import BrokerProcess

pytestmark = [pytest.mark.slow, needs_worker_ports]

DELETE_RECORDS: Final = 21
TIMEOUT_S: Final = 30
RECORDS: Final = 10


def _topic(broker: BrokerProcess, name: str) -> str:
    """A two-partition topic with RECORDS records in partition 0."""
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic(name, 2)])
    with Producer(broker.endpoint, acks="all", linger_ms=0) as producer:
        for i in range(RECORDS):
            producer.send(name, b"%d" % i, partition=0).result(timeout=TIMEOUT_S)
    return name


def _native_earliest(broker: BrokerProcess, topic: str, partition: int = 0) -> int:
    tp = TopicPartition(topic, partition)
    with Admin(broker.endpoint) as admin:
        return admin.list_offsets({tp: EARLIEST_TIMESTAMP})[tp].offset


def test_confluent_kafka_delete_records_moves_the_log_start(kafka_broker: BrokerProcess) -> None:
    topic = _topic(kafka_broker, "dr-confluent")
    admin = AdminClient({"bootstrap.servers": kafka_broker.kafka_bootstrap})
    futures = admin.delete_records([confluent_kafka.TopicPartition(topic, 0, 4)])
    (deleted,) = [future.result(TIMEOUT_S) for future in futures.values()]
    assert deleted.low_watermark == 4
    assert _native_earliest(kafka_broker, topic) == 4
    consumer = confluent_kafka.Consumer({"bootstrap.servers": kafka_broker.kafka_bootstrap,
                                         "group.id": "dr-watermarks"})
    try:
        low_high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0),
                                                  timeout=TIMEOUT_S)
    finally:
        consumer.close()
    assert low_high == (4, RECORDS)
    # Offset 1 is out of range: auto.offset.reset=earliest starts at the log start.
    assert confluent_first_offset(kafka_broker.kafka_bootstrap, topic, 1) == 4

    futures = admin.delete_records([confluent_kafka.TopicPartition(topic, 0, RECORDS + 1)])
    (refused,) = futures.values()
    with pytest.raises(confluent_kafka.KafkaException) as caught:
        refused.result(TIMEOUT_S)
    assert caught.value.args[0].code() == confluent_kafka.KafkaError.OFFSET_OUT_OF_RANGE
    assert _native_earliest(kafka_broker, topic) == 4

    futures = admin.delete_records([confluent_kafka.TopicPartition(topic, 0, -1)])
    (deleted,) = [future.result(TIMEOUT_S) for future in futures.values()]
    assert deleted.low_watermark == RECORDS == _native_earliest(kafka_broker, topic)


def test_kafka_python_delete_records_moves_the_log_start(kafka_broker: BrokerProcess) -> None:
    topic = _topic(kafka_broker, "dr-kafka-python")
    tp = KpTopicPartition(topic, 0)
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.kafka_bootstrap)
    try:
        result = admin.delete_records({tp: 6}, timeout_ms=TIMEOUT_S * 1000)
        assert result[tp]["low_watermark"] == 6
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({tp: -2}, timeout_ms=TIMEOUT_S * 1000)
    finally:
        admin.close()
    assert _native_earliest(kafka_broker, topic) == 6

    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.kafka_bootstrap,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             fetch_max_wait_ms=100)
    try:
        consumer.assign([tp])
        assert consumer.beginning_offsets([tp]) == {tp: 6}
        consumer.seek(tp, 2)
        found: list[int] = []
        deadline = time.monotonic() + TIMEOUT_S
        while not found and time.monotonic() < deadline:
            found = [m.offset for batch in consumer.poll(500).values() for m in batch]
        assert found[0] == 6
    finally:
        consumer.close()


def test_the_gateway_leads_nothing_and_says_so(kafka_broker: BrokerProcess) -> None:
    """A client that sends DeleteRecords to the bootstrap node (kafka-python with a
    partition_leader_id, a raw client) hears NOT_LEADER_OR_FOLLOWER per partition, as a Kafka
    broker that is not the leader answers; nothing is deleted."""
    topic = _topic(kafka_broker, "dr-gateway")
    with KafkaWire(kafka_broker.kafka_bootstrap) as wire:
        for version in (0, 1, 2):
            answer = wire.call(DELETE_RECORDS, version, {
                "timeout_ms": 1000,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": 0, "offset": 5}]}]})
            (answered,) = answer.topics
            (partition,) = answered.partitions
            assert (partition.partition_index, partition.error_code) == (
                0, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert _native_earliest(kafka_broker, topic) == 0
