"""Kafka consumers of KIP-848's protocol (librdkafka's `group.protocol=consumer`) against a
real `zlog serve`: ConsumerGroupHeartbeat reaches zlog's server-side coordinator, so they
share a group's partitions with each other and with native consumers, commit with their
member epochs, and a group the other protocol holds is a clear error, never a wait."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from tests.kafka.kafka_clients import needs_worker_ports
from zlog import Admin, Consumer, Producer
from zlog.client.records import NewTopic
from zlog.types import TopicPartition
from zlog_testbed.broker_process import BrokerProcess, broker_process
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

SESSION_MS = 3_000
POLL_S = 0.05


@pytest.fixture(scope="module")
def consumer_broker() -> Iterator[BrokerProcess]:
    """A broker whose server-side groups let a silent member go after 3 s."""
    with broker_process(workers=2, extra_args=[
            "--offsets-topic-num-partitions", "3", "--group-initial-rebalance-delay-ms", "0",
            "--group-min-session-timeout-ms", "1000",
            "--group-consumer-session-timeout-ms", str(SESSION_MS),
            "--group-consumer-heartbeat-interval-ms", "500",
    ]) as started:
        yield started


def _topic(broker: BrokerProcess, name: str, partitions: int) -> str:
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic(name, partitions)])
    return name


def _produce(broker: BrokerProcess, topic: str, count_each: int, partitions: int) -> None:
    with Producer(broker.endpoint) as producer:
        for index in range(count_each * partitions):
            producer.send(topic, b"v%d" % index, partition=index % partitions)
        producer.flush()


def _member(broker: BrokerProcess, group: str, topic: str, **settings: str) -> ConfluentConsumer:
    consumer = ConfluentConsumer({"bootstrap.servers": broker.kafka_bootstrap,
                                  "group.id": group, "group.protocol": "consumer",
                                  "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", **settings})
    consumer.subscribe([topic])
    return consumer


class Polled:
    """A confluent-kafka member polled by the test: the first offset it read per partition."""

    def __init__(self, consumer: ConfluentConsumer) -> None:
        self.consumer = consumer
        self.first_read: dict[int, int] = {}

    def poll(self) -> None:
        message = self.consumer.poll(POLL_S)
        if message is None:
            return
        if message.error() is not None:
            raise KafkaException(message.error())
        self.first_read.setdefault(message.partition(), message.offset())

    @property
    def partitions(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())


def _spread(members: Sequence[Polled], partitions: int) -> bool:
    """Every member polled once; each partition held by exactly one, as evenly as can be."""
    for member in members:
        member.poll()
    held = [member.partitions for member in members]
    each = partitions // len(members)
    return (all(len(h) == each for h in held)
            and frozenset().union(*held) == frozenset(range(partitions)))


@needs_worker_ports
def test_three_members_share_six_partitions_a_closed_ones_move_and_a_new_one_reads_on_from_commits(
        consumer_broker: BrokerProcess) -> None:
    topic = _topic(consumer_broker, "kip848-three", 6)
    _produce(consumer_broker, topic, 10, 6)
    members = [Polled(_member(consumer_broker, "kip848-three", topic)) for _ in range(3)]
    closed: list[Polled] = []
    try:
        wait_until(lambda: _spread(members, 6), 60, what="six partitions two to each member")
        for member in members:  # each commits offset 4 of the partitions it holds
            member.consumer.commit(offsets=[ConfluentTopicPartition(topic, p, 4)
                                            for p in sorted(member.partitions)],
                                   asynchronous=False)
        with Admin(consumer_broker.endpoint) as admin:
            assert admin.list_group_offsets("kip848-three") == {
                TopicPartition(topic, p): 4 for p in range(6)}

        leaving = members.pop()
        leaving.consumer.close()
        closed.append(leaving)
        wait_until(lambda: _spread(members, 6), 60,
                   what="the two members left taking the closed one's partitions")

        newcomer = Polled(_member(consumer_broker, "kip848-three", topic))
        members.append(newcomer)
        wait_until(lambda: _spread(members, 6), 60, what="a new member given two partitions")
        wait_until(lambda: _spread(members, 6) and set(newcomer.first_read) == set(
            newcomer.partitions), 60, what="the new member reading its partitions")
        assert newcomer.first_read == dict.fromkeys(newcomer.partitions, 4)
    finally:
        for member in members:
            member.consumer.close()


def test_a_kafka_member_and_a_native_server_side_member_share_one_group(
        consumer_broker: BrokerProcess) -> None:
    topic = _topic(consumer_broker, "kip848-mixed", 4)
    kafka_member = Polled(_member(consumer_broker, "kip848-mixed", topic))
    native_member = Consumer(consumer_broker.endpoint, group_id="kip848-mixed",
                             group_protocol="consumer", enable_auto_commit=False)
    native_member.subscribe([topic])
    try:
        def shared() -> bool:
            kafka_member.poll()
            native_member.poll(timeout_ms=50)
            return len(kafka_member.partitions) == 2 and len(native_member.assignment()) == 2

        wait_until(shared, 60, what="the four partitions shared two and two")
        kafka_side = kafka_member.partitions
        native_side = frozenset(tp.partition for tp in native_member.assignment())
        assert kafka_side | native_side == frozenset(range(4)) and not kafka_side & native_side

        # Each commits what it holds, with its member epoch; each reads both sides' commits.
        kafka_member.consumer.commit(offsets=[ConfluentTopicPartition(topic, p, 100 + p)
                                              for p in sorted(kafka_side)], asynchronous=False)
        native_member.commit({TopicPartition(topic, p): 200 + p for p in native_side})
        expected = {p: (100 if p in kafka_side else 200) + p for p in range(4)}
        read_natively = native_member.committed([TopicPartition(topic, p) for p in range(4)])
        assert {tp.partition: offset for tp, offset in read_natively.items()} == expected
        read_by_kafka = kafka_member.consumer.committed(
            [ConfluentTopicPartition(topic, p) for p in range(4)], timeout=30)
        assert {tp.partition: tp.offset for tp in read_by_kafka} == expected
    finally:
        kafka_member.consumer.close()
        native_member.close()


def _fatal_error(consumer: ConfluentConsumer) -> str:
    """What librdkafka says of the fatal error a heartbeat's answer raised: the broker's code
    as its own words (it does not pass the broker's sentence on)."""
    found: list[KafkaError] = []

    def failed() -> bool:
        message = consumer.poll(POLL_S)
        if message is not None and message.error() is not None:
            found.append(message.error())
        return bool(found)

    wait_until(failed, 30, what="the member failing with an error")
    assert found[0].code() == KafkaError._FATAL, found[0]
    return str(found[0].str())


def test_a_kafka_member_of_a_live_classic_group_fails_with_inconsistent_group_protocol(
        consumer_broker: BrokerProcess) -> None:
    topic = _topic(consumer_broker, "kip848-classic", 2)
    classic = Consumer(consumer_broker.endpoint, group_id="kip848-classic",
                       group_protocol="classic", enable_auto_commit=False)
    classic.subscribe([topic])
    refused = _member(consumer_broker, "kip848-classic", topic)
    try:
        def holding() -> bool:
            classic.poll(timeout_ms=50)
            return bool(classic.assignment())

        wait_until(holding, 60, what="the classic member holding the group")
        assert "ConsumerGroupHeartbeat fatal error: Broker: Inconsistent group protocol" in (
            _fatal_error(refused))
    finally:
        refused.close()
        classic.close()


def test_a_regex_subscription_fails_with_a_sentence(consumer_broker: BrokerProcess) -> None:
    _topic(consumer_broker, "kip848-regex", 1)
    refused = _member(consumer_broker, "kip848-regex", "^kip848-re.*")
    try:
        assert "ConsumerGroupHeartbeat fatal error: Broker: Invalid request" in _fatal_error(
            refused)
    finally:
        refused.close()
