"""Kafka admin clients against a real `zlog serve`: every change a Kafka client makes is read
back through zlog's native Admin, an independent view of the same cluster."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as AioNewTopic
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpConfigResourceType
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic

from tests.kafka.kafka_clients import kafkajs, kcat, needs_worker_ports
from zlog import Admin
from zlog.client.records import NewTopic as NativeNewTopic
from zlog.errors import ErrorCode
from zlog.kafka_gateway.topology import PORTS_PER_BROKER
from zlog_testbed.broker_process import BrokerProcess
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow


def _native_partitions(broker: BrokerProcess, topic: str) -> int | None:
    with Admin(broker.endpoint) as admin:
        described = {t.name: t for t in admin.describe_topics()}
    return len(described[topic].partitions) if topic in described else None


def _native_config(broker: BrokerProcess, topic: str, name: str) -> str | None:
    with Admin(broker.endpoint) as admin:
        [entry] = admin.describe_configs([topic], [name])[topic]
    return entry.value


def test_kcat_lists_the_gateway_as_broker_and_controller_and_every_topic(
        kafka_broker: BrokerProcess) -> None:
    with Admin(kafka_broker.endpoint) as admin:
        admin.create_topics([NativeNewTopic("kcat-listed", 3)])
    listing = json.loads(kcat("-b", kafka_broker.kafka_bootstrap, "-L", "-J"))
    host, port = kafka_broker.kafka_bootstrap.split(":")
    assert {"id": 1, "name": f"{host}:{port}"} in listing["brokers"]
    assert listing["controllerid"] == 1
    [topic] = [t for t in listing["topics"] if t["topic"] == "kcat-listed"]
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1, 2]


def test_confluent_kafka_admin_changes_what_zlog_holds(kafka_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_broker.kafka_bootstrap})
    futures = admin.create_topics([NewTopic("cf-admin", 2, 1, config={"retention.ms": "3600000"})])
    futures["cf-admin"].result(30)
    assert _native_partitions(kafka_broker, "cf-admin") == 2
    assert _native_config(kafka_broker, "cf-admin", "retention.ms") == "3600000"

    admin.create_partitions([NewPartitions("cf-admin", 5)])["cf-admin"].result(30)
    assert _native_partitions(kafka_broker, "cf-admin") == 5

    resource = ConfigResource("topic", "cf-admin", incremental_configs=[
        ConfigEntry("retention.ms", "7200000",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    assert _native_config(kafka_broker, "cf-admin", "retention.ms") == "7200000"
    described = admin.describe_configs([ConfigResource("topic", "cf-admin")])
    configs = next(iter(described.values())).result(30)
    assert configs["retention.ms"].value == "7200000"
    assert configs["segment.bytes"].is_default

    cluster = admin.describe_cluster().result(30)
    assert cluster.controller.id == 1
    gateway = [node for node in cluster.nodes if node.id == 1]
    assert [f"{node.host}:{node.port}" for node in gateway] == [kafka_broker.kafka_bootstrap]
    assert all(node.id >= PORTS_PER_BROKER for node in cluster.nodes if node.id != 1)

    admin.delete_topics(["cf-admin"])["cf-admin"].result(30)
    wait_until(lambda: _native_partitions(kafka_broker, "cf-admin") is None, 30,
               what="the topic deleted")


def test_confluent_kafka_admin_hears_zlogs_refusals_as_kafka_errors(
        kafka_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_broker.kafka_bootstrap})
    admin.create_topics([NewTopic("cf-twice", 1, 1)])["cf-twice"].result(30)
    refusals = {
        "exists": admin.create_topics([NewTopic("cf-twice", 1, 1)])["cf-twice"],
        "unknown": admin.delete_topics(["cf-never-created"])["cf-never-created"],
        "assigned": admin.create_topics([NewTopic("cf-placed", 1, replica_assignment=[[1]])])[
            "cf-placed"],
        "shrunk": admin.create_partitions([NewPartitions("cf-twice", 1)])["cf-twice"],
    }
    codes = {}
    for name, future in refusals.items():
        with pytest.raises(KafkaException) as caught:
            future.result(30)
        codes[name] = caught.value.args[0].code()
    assert codes == {"exists": ErrorCode.TOPIC_ALREADY_EXISTS,
                     "unknown": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     "assigned": ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                     "shrunk": ErrorCode.INVALID_PARTITIONS}


def test_kafka_python_admin_changes_what_zlog_holds(kafka_broker: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.kafka_bootstrap)
    try:
        admin.create_topics([KpNewTopic("kp-admin", 1, 1,
                                        topic_configs={"cleanup.policy": "compact"})])
        assert _native_config(kafka_broker, "kp-admin", "cleanup.policy") == "compact"
        admin.create_partitions({"kp-admin": KpNewPartitions(3)})
        assert _native_partitions(kafka_broker, "kp-admin") == 3
        described = admin.describe_configs([KpConfigResource(KpConfigResourceType.TOPIC,
                                                             "kp-admin")])
        modified = described["topic"]["kp-admin"]  # kafka-python lists set configs only
        assert modified["cleanup.policy"]["value"] == "compact"
        assert modified["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert "kp-admin" in admin.list_topics()
        admin.delete_topics(["kp-admin"])
        wait_until(lambda: _native_partitions(kafka_broker, "kp-admin") is None, 30,
                   what="the topic deleted")
    finally:
        admin.close()


def test_aiokafka_admin_changes_what_zlog_holds(kafka_broker: BrokerProcess) -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_broker.kafka_bootstrap)
        await admin.start()
        try:
            await admin.create_topics([AioNewTopic("aio-admin", 2, 1)])
            created = await admin.list_topics()
            await admin.delete_topics(["aio-admin"])
            return created, await admin.list_topics()
        finally:
            await admin.close()

    created, after = asyncio.run(scenario())
    assert "aio-admin" in created
    assert "aio-admin" not in after or _native_partitions(kafka_broker, "aio-admin") is None


@needs_worker_ports
def test_kafkajs_admin_changes_what_zlog_holds(kafka_broker: BrokerProcess) -> None:
    seen = kafkajs("admin", kafka_broker.kafka_bootstrap, "js-admin")
    assert seen["created"] is True
    assert seen["partitions"] == 4
    assert seen["retention"] == "123456"
    assert seen["controller"] == 1
    assert f"1@{kafka_broker.kafka_bootstrap}" in seen["brokers"]  # beside the workers' ports
    assert seen["listed"] and seen["deleted"]
    assert _native_partitions(kafka_broker, "js-admin") is None
