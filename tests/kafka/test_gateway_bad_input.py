"""Bad input on the gateway's port, from a bare socket: an error answer or a closed
connection for that client alone; the broker goes on serving and nothing stored changes."""

from __future__ import annotations

import resource
import select
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from kafka.protocol.metadata import ApiVersionsResponse, MetadataRequest, MetadataResponse

from tests.kafka.raw_kafka import (
    api_versions_frame,
    connect,
    gateway_answers,
    read_frame,
    request_frame,
)
from zlog import Admin
from zlog.client.records import NewTopic
from zlog.errors import ErrorCode
from zlog.kafka.api_versions import ADVERTISED
from zlog_testbed.broker_process import BrokerProcess

pytestmark = pytest.mark.slow

IDLE_CONNECTIONS = 10_000


def _stored(broker: BrokerProcess) -> list[tuple[str, int, str]]:
    """What the cluster holds, as the native Admin sees it."""
    with Admin(broker.endpoint) as admin:
        return sorted((topic.name, len(topic.partitions), topic.topic_id)
                      for topic in admin.describe_topics())


@pytest.fixture(scope="module")
def stored_before(kafka_broker: BrokerProcess) -> Iterator[list[tuple[str, int, str]]]:
    with Admin(kafka_broker.endpoint) as admin:
        admin.create_topics([NewTopic("kept", 2)])
    before = _stored(kafka_broker)
    yield before
    assert _stored(kafka_broker) == before, "bad input changed what the broker stores"
    assert gateway_answers(kafka_broker.kafka_bootstrap)


@pytest.mark.parametrize("size", [-1, 3, 2**31 - 1, 200 * 1024 * 1024])
def test_an_absurd_frame_size_closes_that_connection_only(
        kafka_broker: BrokerProcess, stored_before: object, size: int) -> None:
    with connect(kafka_broker.kafka_bootstrap) as bystander, \
            connect(kafka_broker.kafka_bootstrap) as offender:
        offender.sendall(struct.pack(">i", size) + b"\0" * 64)
        assert read_frame(offender) is None
        bystander.sendall(api_versions_frame(5))
        answer = read_frame(bystander)
        assert answer is not None and struct.unpack_from(">ih", answer) == (5, 0)


def test_api_versions_v5_gets_error_35_and_the_table_in_a_v0_body(
        kafka_broker: BrokerProcess, stored_before: object) -> None:
    with connect(kafka_broker.kafka_bootstrap) as connection:
        connection.sendall(struct.pack(">ihhih", 10, 18, 5, 77, -1))
        answer = read_frame(connection)
        assert answer is not None
        decoded = ApiVersionsResponse.decode(answer, version=0, header=True)
        assert decoded.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert len(decoded.api_keys) == len(ADVERTISED)
        connection.sendall(api_versions_frame(78))  # the client retries lower, same connection
        assert struct.unpack_from(">ih", read_frame(connection) or b"") == (78, 0)


def test_unknown_keys_and_versions_are_answered_and_the_connection_goes_on(
        kafka_broker: BrokerProcess, stored_before: object) -> None:
    with connect(kafka_broker.kafka_bootstrap) as connection:
        for correlation_id, (key, version) in enumerate([(1000, 0), (3, 99), (0, 2), (68, 0)]):
            connection.sendall(struct.pack(">ihhih", 10, key, version, correlation_id, -1))
            answer = read_frame(connection)
            assert answer is not None, (key, version)
            assert struct.unpack_from(">i", answer) == (correlation_id,)
        metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False)
        connection.sendall(request_frame(metadata, 9, 100))
        decoded = MetadataResponse.decode(read_frame(connection) or b"", version=9, header=True)
        assert "kept" in {topic.name for topic in decoded.topics}


def test_truncated_requests_and_garbage_after_one_get_errors_not_a_hang(
        kafka_broker: BrokerProcess, stored_before: object) -> None:
    whole = request_frame(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
        name="kept")], allow_auto_topic_creation=True), 9, 7)
    with connect(kafka_broker.kafka_bootstrap) as connection:
        cut = whole[4:20]  # a frame whose body ends inside the topics
        connection.sendall(struct.pack(">i", len(cut)) + cut)
        answer = read_frame(connection)
        assert answer is not None and struct.unpack_from(">i", answer) == (7,)
        body = whole[4:] + b"\xde\xad\xbe\xef" * 4  # garbage inside the frame: ignored
        connection.sendall(struct.pack(">i", len(body)) + body)
        decoded = MetadataResponse.decode(read_frame(connection) or b"", version=9, header=True)
        assert [topic.name for topic in decoded.topics] == ["kept"]
        connection.sendall(whole + b"\x7f\xff\xff\xff garbage")  # garbage after the frame
        assert read_frame(connection) is not None  # the request is answered...
        assert read_frame(connection) is None  # ...then the stream is given up


def test_ten_thousand_idle_connections_leave_the_gateway_serving(
        kafka_broker: BrokerProcess, stored_before: object) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < IDLE_CONNECTIONS + 1_000:
        pytest.skip(f"this process may open only {hard} files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    host, port = kafka_broker.kafka_bootstrap.rsplit(":", 1)
    idle: list[socket.socket] = []
    try:
        for _ in range(IDLE_CONNECTIONS):  # connecting all at once, not one after another
            connection = socket.socket()
            connection.setblocking(False)
            connection.connect_ex((host, int(port)))
            idle.append(connection)
        connected = _connected(idle, timeout_s=120)
        assert connected == IDLE_CONNECTIONS
        assert gateway_answers(kafka_broker.kafka_bootstrap)
    finally:
        for connection in idle:
            connection.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert gateway_answers(kafka_broker.kafka_bootstrap)


def _connected(connections: list[socket.socket], timeout_s: float) -> int:
    """How many of the connections completed their handshake before the deadline."""
    poller = select.poll()
    by_fd = {connection.fileno(): connection for connection in connections}
    for fd in by_fd:
        poller.register(fd, select.POLLOUT)
    done = 0
    deadline = time.monotonic() + timeout_s
    while by_fd and time.monotonic() < deadline:
        for fd, _ in poller.poll(1_000):
            poller.unregister(fd)
            if by_fd.pop(fd).getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                done += 1
    return done
