"""Kafka consumers of KIP-848's protocol (librdkafka's `group.protocol=consumer`) against a
real `zlog serve`: ConsumerGroupHeartbeat reaches zlog's server-side coordinator, so they
share a group's partitions with each other and with native consumers, commit with their
member epochs, and a group the other protocol holds is a clear error, never a wait."""

from __future__ import annotations

import datetime
import io
import struct
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.metadata.v12 import response as metadata_v12_answer
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32, i32Timedelta

from tests.kafka.kafka_clients import needs_worker_ports
from tests.kafka.raw_kafka import connect, read_frame
from zlog import Admin, Consumer, Producer
from zlog.client.records import NewTopic
from zlog.errors import ErrorCode
from zlog.types import TopicPartition
from zlog_testbed.broker_process import BrokerProcess, broker_process
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

MEMBER_MAIN = Path(__file__).with_name("confluent_member_main.py")
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


def _held(members: Sequence[Polled]) -> frozenset[int]:
    return frozenset().union(*(member.partitions for member in members))


def _spread(members: Sequence[Polled], partitions: int, each: int) -> bool:
    """Every member polled once, each holding `each` partitions, none held twice (and all
    `partitions` held when these are all the members)."""
    for member in members:
        member.poll()
    held = [member.partitions for member in members]
    return (all(len(h) == each for h in held) and len(_held(members)) == each * len(members)
            and _held(members) <= frozenset(range(partitions)))


@needs_worker_ports
def test_three_members_share_six_partitions_and_a_killed_ones_move_a_newcomer_reads_on_commits(
        consumer_broker: BrokerProcess) -> None:
    topic = _topic(consumer_broker, "kip848-three", 6)
    _produce(consumer_broker, topic, 10, 6)
    killed = subprocess.Popen([sys.executable, str(MEMBER_MAIN), consumer_broker.kafka_bootstrap,
                               "kip848-three", topic], stdout=subprocess.DEVNULL)
    members = [Polled(_member(consumer_broker, "kip848-three", topic)) for _ in range(2)]
    try:
        wait_until(lambda: _spread(members, 6, 2), 60, what="two partitions to each member")
        assert len(_held(members)) == 4  # and the member in its own process the other two
        killed.kill()
        killed.wait()
        wait_until(lambda: _spread(members, 6, 3), 60,
                   what="the survivors taking the killed one's two, once its session ended")
        for member in members:  # each commits offset 4 of the partitions it holds
            member.consumer.commit(offsets=[ConfluentTopicPartition(topic, p, 4)
                                            for p in sorted(member.partitions)],
                                   asynchronous=False)
        with Admin(consumer_broker.endpoint) as admin:
            assert admin.list_group_offsets("kip848-three") == {
                TopicPartition(topic, p): 4 for p in range(6)}

        newcomer = Polled(_member(consumer_broker, "kip848-three", topic))
        members.append(newcomer)
        wait_until(lambda: _spread(members, 6, 2) and set(newcomer.first_read) == set(
            newcomer.partitions), 60, what="a newcomer given two partitions and reading them")
        assert newcomer.first_read == dict.fromkeys(newcomer.partitions, 4)

        members.remove(newcomer)
        newcomer.consumer.close()  # leaves the group: its partitions move at once
        wait_until(lambda: _spread(members, 6, 3), 60,
                   what="the two others taking back the closed member's partitions")
    finally:
        killed.kill()
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

        # Kafka's admin describes the group through DescribeGroups: both members, their shares
        admin = AdminClient({"bootstrap.servers": consumer_broker.kafka_bootstrap})
        [described] = admin.describe_consumer_groups(["kip848-mixed"]).values()
        shares = [frozenset(tp.partition for tp in member.assignment.topic_partitions)
                  for member in described.result(30).members]
        assert len(shares) == 2 and set(shares) == {kafka_side, native_side}
    finally:
        kafka_member.consumer.close()
        native_member.close()


def _first_error(consumer: ConfluentConsumer) -> KafkaError:
    found: list[KafkaError] = []

    def failed() -> bool:
        message = consumer.poll(POLL_S)
        if message is not None and message.error() is not None:
            found.append(message.error())
        return bool(found)

    wait_until(failed, 30, what="the member told of an error")
    return found[0]


def _fatal_error(consumer: ConfluentConsumer) -> str:
    """What librdkafka says of the fatal error a heartbeat's answer raised: the broker's code
    in its own words (it does not pass the broker's sentence on)."""
    error = _first_error(consumer)
    assert error.code() == KafkaError._FATAL, error
    return str(error.str())


def test_a_kafka_member_of_a_live_classic_group_fails_with_inconsistent_group_protocol(
        consumer_broker: BrokerProcess) -> None:
    topic = _topic(consumer_broker, "kip848-classic", 2)
    classic = Consumer(consumer_broker.endpoint, group_id="kip848-classic",
                       group_protocol="classic", enable_auto_commit=False)
    classic.subscribe([topic])
    try:
        def holding() -> bool:
            classic.poll(timeout_ms=50)
            return bool(classic.assignment())

        wait_until(holding, 60, what="the classic member holding the group")
        refused = _member(consumer_broker, "kip848-classic", topic)
        try:
            assert "ConsumerGroupHeartbeat fatal error: Broker: Inconsistent group protocol" in (
                _fatal_error(refused))
        finally:
            refused.close()
    finally:
        classic.close()


def test_a_regex_subscription_fails_with_a_sentence(consumer_broker: BrokerProcess) -> None:
    _topic(consumer_broker, "kip848-regex", 1)
    refused = _member(consumer_broker, "kip848-regex", "^kip848-re.*")
    try:
        assert "ConsumerGroupHeartbeat fatal error: Broker: Invalid request" in _fatal_error(
            refused)
    finally:
        refused.close()


def test_a_classic_kafka_member_of_a_live_kip848_group_is_told_inconsistent_group_protocol(
        consumer_broker: BrokerProcess) -> None:
    topic = _topic(consumer_broker, "kip848-held", 2)
    holder = Polled(_member(consumer_broker, "kip848-held", topic))
    try:
        wait_until(lambda: _spread([holder], 2, 2), 60, what="the KIP-848 member holding the group")
        refused = ConfluentConsumer({"bootstrap.servers": consumer_broker.kafka_bootstrap,
                                     "group.id": "kip848-held", "group.protocol": "classic",
                                     "session.timeout.ms": SESSION_MS})
        refused.subscribe([topic])
        try:
            error = _first_error(refused)
            assert error.code() == KafkaError.INCONSISTENT_GROUP_PROTOCOL, error
            assert not refused.assignment()
        finally:
            refused.close()
        holder.poll()
        assert holder.partitions == frozenset({0, 1})
    finally:
        holder.consumer.close()


def _ask(broker: BrokerProcess, request: Any, response_class: type[Any]) -> Any:
    """One request on a bare connection (kio writes what librdkafka would not send), and its
    answer as kio reads it."""
    buffer = io.BytesIO()
    entity_writer(RequestHeader)(buffer, RequestHeader(
        request_api_key=request.__api_key__, request_api_version=request.__version__,
        correlation_id=i32(7), client_id="raw"))
    entity_writer(type(request))(buffer, request)
    with connect(broker.kafka_bootstrap) as connection:
        connection.sendall(struct.pack(">i", len(buffer.getvalue())) + buffer.getvalue())
        frame = read_frame(connection)
    assert frame is not None
    _, header_bytes = entity_reader(ResponseHeader)(frame, 0)
    answer, _ = entity_reader(response_class)(frame, header_bytes)
    return answer


def _heartbeat(broker: BrokerProcess, version: int, **fields: Any) -> Any:
    schemas = import_module(f"kio.schema.consumer_group_heartbeat.v{version}")
    body = {"member_id": "", "member_epoch": 0, "topic_partitions": (),
            "subscribed_topic_names": ("t",),
            "rebalance_timeout": i32Timedelta.parse(datetime.timedelta(seconds=10)), **fields}
    return _ask(broker, schemas.ConsumerGroupHeartbeatRequest(**body),
                schemas.ConsumerGroupHeartbeatResponse)


def test_metadata_12_names_a_topic_asked_for_by_id_and_refuses_an_id_no_topic_has(
        consumer_broker: BrokerProcess) -> None:
    """How librdkafka's KIP-848 consumer learns the name of an assigned topic."""
    topic = _topic(consumer_broker, "kip848-by-id", 1)
    with Admin(consumer_broker.endpoint) as admin:
        [known] = admin.describe_topics([topic])
    unknown = uuid.uuid4()
    answer = _ask(consumer_broker, metadata_v12.MetadataRequest(
        topics=tuple(metadata_v12.MetadataRequestTopic(topic_id=topic_id, name=None)
                     for topic_id in (uuid.UUID(hex=known.topic_id), unknown)),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False),
        metadata_v12_answer.MetadataResponse)
    found = {t.topic_id: (t.error_code, t.name, len(t.partitions)) for t in answer.topics}
    assert found == {uuid.UUID(hex=known.topic_id): (ErrorCode.NONE, topic, 1),
                     unknown: (ErrorCode.UNKNOWN_TOPIC_ID, None, 0)}


def test_what_zlogs_coordinator_lacks_is_answered_with_a_code_and_a_sentence(
        consumer_broker: BrokerProcess) -> None:
    regex = _heartbeat(consumer_broker, 1, group_id="kip848-wire", member_id="m1",
                       subscribed_topic_names=(), subscribed_topic_regex="^t.*")
    assert regex.error_code == ErrorCode.INVALID_REQUEST
    assert "not a regex" in regex.error_message
    anonymous = _heartbeat(consumer_broker, 1, group_id="kip848-wire")
    assert anonymous.error_code == ErrorCode.INVALID_REQUEST
    assert "KIP-1082" in anonymous.error_message
    assignor = _heartbeat(consumer_broker, 0, group_id="kip848-wire", server_assignor="range")
    assert assignor.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert "'uniform' only" in assignor.error_message
    joined = _heartbeat(consumer_broker, 0, group_id="kip848-wire")  # v0: zlog names it
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.NONE, 1) and joined.member_id


def _group_epoch(broker: BrokerProcess, group: str) -> int:
    with Admin(broker.endpoint) as admin:
        [described] = admin.describe_groups([group])
    return described.epoch


def test_a_static_member_back_within_its_session_gets_its_partitions_back(
        consumer_broker: BrokerProcess) -> None:
    topic = _topic(consumer_broker, "kip848-static", 4)
    members = [Polled(_member(consumer_broker, "kip848-static", topic,
                              **{"group.instance.id": name})) for name in ("a", "b")]
    try:
        wait_until(lambda: _spread(members, 4, 2), 60, what="two partitions to each member")
        before = [member.partitions for member in members]
        epoch = _group_epoch(consumer_broker, "kip848-static")
        members[0].consumer.close()  # a static member's leave keeps its partitions for it
        members[0] = Polled(_member(consumer_broker, "kip848-static", topic,
                                    **{"group.instance.id": "a"}))
        wait_until(lambda: _spread(members, 4, 2), 60, what="instance a back with two")
        assert [member.partitions for member in members] == before
        assert _group_epoch(consumer_broker, "kip848-static") == epoch  # no rebalance at all
    finally:
        for member in members:
            member.consumer.close()
