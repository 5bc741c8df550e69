"""Kafka consumer groups against a real `zlog serve`: Kafka clients' groups are zlog's groups,
sharing partitions and committed offsets with native consumers, and seen by Kafka's admin
calls (what lag exporters read)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import struct
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import CommitFailedError, RebalanceInProgressError
from kafka.protocol.consumer import JoinGroupRequest, JoinGroupResponse
from kafka.structs import OffsetAndMetadata

from tests.kafka.kafka_clients import kafkajs, kcat, needs_worker_ports
from tests.kafka.polled_member import PolledMember, Records
from zlog import Admin, Consumer, Producer
from zlog.client.records import NewTopic
from zlog.errors import ErrorCode
from zlog.types import TopicPartition
from zlog_testbed.broker_process import BrokerProcess
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

MEMBER_MAIN = Path(__file__).with_name("kafka_python_member_main.py")
SESSION_MS = 3_000
# A member's rebalance timeout (kafka-python's max.poll.interval.ms, 5 minutes by default): as
# in Kafka, a member killed while its JoinGroup waits at the coordinator is let go only when
# the rebalance timeout ends, not its session, so the members here keep it short.
REBALANCE_MS = 10_000


def _topic(broker: BrokerProcess, name: str, partitions: int) -> str:
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic(name, partitions)])
    return name


def _kafka_python_member(broker: BrokerProcess, group: str, topic: str) -> KafkaConsumer:
    return KafkaConsumer(topic, bootstrap_servers=broker.kafka_bootstrap, group_id=group,
                         enable_auto_commit=False, session_timeout_ms=SESSION_MS,
                         heartbeat_interval_ms=500, max_poll_interval_ms=REBALANCE_MS)


def _native_offsets(broker: BrokerProcess, group: str) -> dict[TopicPartition, int]:
    with Admin(broker.endpoint) as admin:
        return admin.list_group_offsets(group)


def _spread(members: Sequence[PolledMember], partitions_each: int) -> bool:
    return all(len(member.partitions) == partitions_each for member in members)


def _held(members: Sequence[PolledMember]) -> set[int]:
    return {partition for member in members for partition in member.partitions}


def test_three_kafka_members_share_six_partitions_and_the_survivors_take_a_killed_ones(
        kafka_broker: BrokerProcess) -> None:
    topic = _topic(kafka_broker, "group-of-three", 6)
    killed = subprocess.Popen([sys.executable, str(MEMBER_MAIN), kafka_broker.kafka_bootstrap,
                               "three", topic], stdout=subprocess.DEVNULL)
    members = [PolledMember(_kafka_python_member(kafka_broker, "three", topic))
               for _ in range(2)]
    try:
        wait_until(lambda: _spread(members, 2), 120,
                   what="six partitions spread over three members")
        assert len(_held(members)) == 4  # and the member in its own process the other two
        killed.kill()
        killed.wait()
        wait_until(lambda: _spread(members, 3), 120,
                   what="the survivors taking the killed one's two")
        assert _held(members) == set(range(6))

        committed: dict[KpTopicPartition, OffsetAndMetadata] = {}

        def commit_once_stable() -> bool:
            """A commit made during a rebalance is refused: poll (rejoin) and try again."""
            if not _spread(members, 3):
                return False
            committed.clear()
            committed.update({KpTopicPartition(topic, p): OffsetAndMetadata(10 + p, "", -1)
                              for p in members[0].partitions})
            try:
                members[0].call(lambda consumer: consumer.commit(committed))
            except (RebalanceInProgressError, CommitFailedError):
                return False
            return True

        wait_until(commit_once_stable, 60, what="a commit in a stable generation")
        assert _native_offsets(kafka_broker, "three") == {
            TopicPartition(topic, tp.partition): meta.offset for tp, meta in committed.items()}
    finally:
        killed.kill()
        for member in members:
            member.close()
    successor = _kafka_python_member(kafka_broker, "three", topic)
    try:
        assert {tp: successor.committed(tp) for tp in committed} == {
            tp: meta.offset for tp, meta in committed.items()}
    finally:
        successor.close()


def test_a_kafka_consumer_and_a_native_consumer_share_one_group(
        kafka_broker: BrokerProcess) -> None:
    topic = _topic(kafka_broker, "mixed-group", 4)
    kafka_member = PolledMember(_kafka_python_member(kafka_broker, "mixed", topic))
    native_member = Consumer(kafka_broker.endpoint, group_id="mixed", group_protocol="classic",
                             partition_assignment_strategy=("range",), enable_auto_commit=False,
                             session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
    native_member.subscribe([topic])
    try:
        def shared() -> bool:
            native_member.poll(timeout_ms=50)
            return len(kafka_member.partitions) == 2 and len(native_member.assignment()) == 2

        wait_until(shared, 60, what="the four partitions shared two and two")
        kafka_side = set(kafka_member.partitions)
        native_side = {tp.partition for tp in native_member.assignment()}
        assert kafka_side | native_side == {0, 1, 2, 3} and not kafka_side & native_side

        kafka_member.call(lambda consumer: consumer.commit(
            {KpTopicPartition(topic, p): OffsetAndMetadata(100 + p, "", -1)
             for p in kafka_side}))
        native_member.commit({TopicPartition(topic, p): 200 + p for p in native_side})
        everything = [TopicPartition(topic, p) for p in range(4)]
        expected = {TopicPartition(topic, p): (100 if p in kafka_side else 200) + p
                    for p in range(4)}
        assert native_member.committed(everything) == expected
        assert kafka_member.call(lambda consumer: {
            TopicPartition(topic, p): consumer.committed(KpTopicPartition(topic, p))
            for p in range(4)}) == expected
    finally:
        kafka_member.close()
        native_member.close()


def test_confluent_and_aiokafka_members_commit_where_kafka_admin_and_native_read(
        kafka_broker: BrokerProcess) -> None:
    topic = _topic(kafka_broker, "commits", 2)
    confluent = ConfluentConsumer({"bootstrap.servers": kafka_broker.kafka_bootstrap,
                                   "group.id": "cf-group", "enable.auto.commit": False,
                                   "session.timeout.ms": SESSION_MS})
    confluent.subscribe([topic])
    try:
        def assigned() -> bool:
            confluent.poll(0.05)
            return len(confluent.assignment()) == 2

        wait_until(assigned, 60, what="confluent-kafka's member assigned both partitions")
        confluent.commit(offsets=[ConfluentTopicPartition(topic, 0, 5),
                                  ConfluentTopicPartition(topic, 1, 7)], asynchronous=False)
    finally:
        confluent.close()

    async def aiokafka_commits() -> None:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka_broker.kafka_bootstrap,
                                    group_id="aio-group", enable_auto_commit=False,
                                    session_timeout_ms=6_000)
        await consumer.start()
        try:
            for _ in range(600):
                if len(consumer.assignment()) == 2:
                    break
                await asyncio.sleep(0.05)
            assert len(consumer.assignment()) == 2
            await consumer.commit({AioTopicPartition(topic, 0): 3})
        finally:
            await consumer.stop()

    asyncio.run(aiokafka_commits())

    assert _native_offsets(kafka_broker, "cf-group") == {
        TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 7}
    assert _native_offsets(kafka_broker, "aio-group") == {TopicPartition(topic, 0): 3}
    admin = AdminClient({"bootstrap.servers": kafka_broker.kafka_bootstrap})
    listed = admin.list_consumer_groups().result(30)
    assert {"cf-group", "aio-group"} <= {group.group_id for group in listed.valid}
    [described] = admin.describe_consumer_groups(["cf-group"]).values()
    assert described.result(30).state.name == "EMPTY"
    [offsets] = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("cf-group")]).values()
    assert {(tp.partition, tp.offset) for tp in offsets.result(30).topic_partitions} == {
        (0, 5), (1, 7)}


def _join(broker: BrokerProcess, version: int, member_id: str) -> JoinGroupResponse:
    request = JoinGroupRequest(group_id="raw-join", session_timeout_ms=SESSION_MS,
                               rebalance_timeout_ms=SESSION_MS, member_id=member_id,
                               protocol_type="consumer", protocols=[
                                   JoinGroupRequest.JoinGroupRequestProtocol(
                                       name="range", metadata=b"\0\0\0\0\0\0\0\0\0\0")])
    request.with_header(correlation_id=1, client_id="raw")
    host, port = broker.kafka_bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(bytes(request.encode(version=version, header=True, framed=True)))
        size = struct.unpack(">i", _read(connection, 4))[0]
        return JoinGroupResponse.decode(_read(connection, size), version=version, header=True)


def _read(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        assert chunk, "the gateway closed the connection"
        data += chunk
    return data


def test_member_id_required_is_answered_from_join_group_v4_only(
        kafka_broker: BrokerProcess) -> None:
    """KIP-394: a client of JoinGroup v3 never learns of the two-step join."""
    old = _join(kafka_broker, 3, "")
    assert old.error_code == ErrorCode.NONE and old.member_id
    new = _join(kafka_broker, 4, "")
    assert new.error_code == ErrorCode.MEMBER_ID_REQUIRED and new.member_id


def _produce(broker: BrokerProcess, topic: str, values: Sequence[bytes], partitions: int) -> None:
    """Uncompressed: kafkajs reads no LZ4 without a codec plugged in."""
    with Producer(broker.endpoint, compression=None) as producer:
        for index, value in enumerate(values):
            producer.send(topic, value, partition=index % partitions)
        producer.flush()


def _consume_and_commit(into: list[bytes]) -> Callable[[KafkaConsumer, Records], None]:
    """What a poll returned is committed before the next (at least once)."""
    def on_records(member: KafkaConsumer, polled: Records) -> None:
        into.extend(record.value for records in polled.values() for record in records)
        with contextlib.suppress(RebalanceInProgressError, CommitFailedError):
            member.commit()  # refused during a rebalance: the next owner reads those again
    return on_records


@needs_worker_ports
def test_a_kafka_group_reads_everything_across_a_kill_and_a_restart_goes_on_from_its_commits(
        kafka_broker: BrokerProcess) -> None:
    topic = _topic(kafka_broker, "kill-and-restart", 6)
    first = [b"first-%d" % i for i in range(600)]
    _produce(kafka_broker, topic, first, 6)
    killed = subprocess.Popen([sys.executable, str(MEMBER_MAIN), kafka_broker.kafka_bootstrap,
                               "restarted", topic], stdout=subprocess.DEVNULL)
    consumed: list[bytes] = []
    members = [PolledMember(KafkaConsumer(
        topic, bootstrap_servers=kafka_broker.kafka_bootstrap, group_id="restarted",
        enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500, max_poll_interval_ms=REBALANCE_MS),
        _consume_and_commit(consumed)) for _ in range(2)]
    try:
        wait_until(lambda: _spread(members, 2), 120,
                   what="three members holding two partitions each")
        killed.kill()  # it commits nothing: its partitions are read again from the start
        killed.wait()
        wait_until(lambda: _spread(members, 3) and set(consumed) == set(first), 90,
                   what="the survivors reading every record, the killed member's too")
        for member in members:
            wait_until(functools.partial(_committed_all, member), 30,
                       what="a last commit in a stable generation")
    finally:
        killed.kill()
        for member in members:
            member.close()

    second = [b"second-%d" % i for i in range(300)]
    _produce(kafka_broker, topic, second, 6)
    restarted = ConfluentConsumer({"bootstrap.servers": kafka_broker.kafka_bootstrap,
                                   "group.id": "restarted", "auto.offset.reset": "earliest",
                                   "enable.auto.commit": False,
                                   "session.timeout.ms": SESSION_MS})
    restarted.subscribe([topic])
    after: list[bytes] = []

    def read_all() -> bool:
        message = restarted.poll(0.1)
        if message is not None and message.error() is None:
            after.append(message.value())
        return len(after) >= len(second)

    try:
        wait_until(read_all, 120, what="the restarted member reading the new records")
        assert sorted(after) == sorted(second)  # from the commits on: nothing read twice
    finally:
        restarted.close()


def _committed_all(member: PolledMember) -> bool:
    try:
        member.call(lambda consumer: consumer.commit())
    except (RebalanceInProgressError, CommitFailedError):
        return False
    return True


@needs_worker_ports
def test_kcat_and_kafkajs_groups_read_and_commit_where_native_readers_see_it(
        kafka_broker: BrokerProcess) -> None:
    topic = _topic(kafka_broker, "cli-groups", 2)
    values = [b"v%d" % i for i in range(10)]
    _produce(kafka_broker, topic, values, 2)
    read = kcat("-b", kafka_broker.kafka_bootstrap, "-G", "kcat-group", "-X",
                "auto.offset.reset=earliest", "-X", "enable.auto.commit=false", "-e",
                "-f", "%s\n", topic)
    assert sorted(read.split()) == sorted(v.decode() for v in values)
    seen = kafkajs("group", kafka_broker.kafka_bootstrap, "js-group", topic, "10")
    assert sorted(seen["values"]) == sorted(v.decode() for v in values)
    assert _native_offsets(kafka_broker, "js-group") == {
        TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 5}
    # kcat -G commits what it read as it leaves (its commit on close)
    assert _native_offsets(kafka_broker, "kcat-group") == {
        TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 5}
