"""With security on, the Kafka listener speaks SASL_SSL only (docs/security.md).

One real broker with CURVE on its ZeroMQ sockets and a TLS certificate for its Kafka listener
(made in the test by a throwaway CA); users alice (SCRAM-SHA-256 and SCRAM-SHA-512) and bob
(SCRAM-SHA-256) in its metadata log; alice may read and write `orders` and read the group
`billing`, bob may do nothing. kcat and confluent-kafka log in with PLAIN and SCRAM over TLS;
a wrong password, a request before logging in and a client speaking plaintext to the TLS port
are refused, and the broker goes on serving the others.
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from typing import Any, Final

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from tests.kafka.kafka_clients import kcat
from tests.kafka.raw_kafka import api_versions_frame, read_frame, request_frame
from tests.secure_broker import make_keys, secure_broker, speaking_as
from zlog.client import Admin
from zlog.client.scram import scram_user
from zlog.errors import ErrorCode
from zlog.transport.messages.security import AclEntry, AlterSecurityRequestV0, QuotaEntry
from zlog_testbed.broker_process import BrokerProcess
from zlog_testbed.tls_certs import TlsFiles, make_tls_files, openssl_installed
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

ALICE_PASSWORD: Final = "alice-secret"
BOB_PASSWORD: Final = "bob-secret"
ORDERS: Final = "orders"
PAYROLL: Final = "payroll"
GROUP: Final = "billing"
TIMEOUT_S: Final = 30.0
CAROL_PASSWORD: Final = "carol-secret"
CAROL_PRODUCE_BYTES_PER_S: Final = 20_000
DAVE_PASSWORD: Final = "dave-secret"
ALICE_ACLS: Final = (
    AclEntry("alice", "topic", ORDERS, "read"),
    AclEntry("alice", "topic", ORDERS, "write"),
    AclEntry("alice", "group", GROUP, "read"),
    AclEntry("carol", "topic", ORDERS, "write"),
    AclEntry("dave", "topic", ORDERS, "describe"),
)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    if not openssl_installed():
        pytest.skip("the openssl command line is not installed")
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory,
           tls_files: TlsFiles) -> Iterator[BrokerProcess]:
    directory = tmp_path_factory.mktemp("sasl")
    keys = make_keys(directory / "keys", ["admin"])
    with secure_broker(keys, directory, topics=(ORDERS, PAYROLL), acls=ALICE_ACLS,
                       extra_args=("--kafka-tls-cert-file", str(tls_files.cert_file),
                                   "--kafka-tls-key-file", str(tls_files.key_file))) as running:
        users = (scram_user("alice", ALICE_PASSWORD, "SCRAM-SHA-256", iterations=4096),
                 scram_user("alice", ALICE_PASSWORD, "SCRAM-SHA-512", iterations=4096),
                 scram_user("bob", BOB_PASSWORD, "SCRAM-SHA-256", iterations=4096),
                 scram_user("carol", CAROL_PASSWORD, "SCRAM-SHA-256", iterations=4096),
                 scram_user("dave", DAVE_PASSWORD, "SCRAM-SHA-256", iterations=4096))
        quotas = (QuotaEntry("principal", "carol", produce_bytes_per_s=CAROL_PRODUCE_BYTES_PER_S),
                  QuotaEntry("principal", "dave", requests_per_s=1))
        with speaking_as(keys), Admin(running.endpoint) as admin:
            admin.alter_security(AlterSecurityRequestV0(users_set=users, quotas_set=quotas))
        wait_until(lambda: _can_log_in(running.kafka_bootstrap, tls_files), TIMEOUT_S,
                   interval_s=0.1, what="alice logging in at the Kafka gateway")
        yield running


def _sasl_options(broker: BrokerProcess, tls: TlsFiles, mechanism: str, user: str,
                  password: str) -> list[str]:
    return ["-b", broker.kafka_bootstrap, "-X", "security.protocol=SASL_SSL",
            "-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}",
            "-X", f"sasl.password={password}", "-X", f"ssl.ca.location={tls.ca_file}"]


def _kcat_metadata(broker: BrokerProcess, tls: TlsFiles, mechanism: str, user: str,
                   password: str) -> dict[str, Any]:
    options = _sasl_options(broker, tls, mechanism, user, password)
    metadata: dict[str, Any] = json.loads(kcat("-L", "-J", "-m", "10", *options))
    return metadata


def _topic_names(metadata: dict[str, Any]) -> set[str]:
    return {topic["topic"] for topic in metadata["topics"] if not topic.get("error")}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kcat_logs_in_over_sasl_ssl_and_sees_only_its_topics(
        broker: BrokerProcess, tls_files: TlsFiles, mechanism: str) -> None:
    metadata = _kcat_metadata(broker, tls_files, mechanism, "alice", ALICE_PASSWORD)
    assert metadata is not None
    assert _topic_names(metadata) == {ORDERS}


def test_a_user_without_acls_sees_no_topic(broker: BrokerProcess, tls_files: TlsFiles) -> None:
    metadata = _kcat_metadata(broker, tls_files, "SCRAM-SHA-256", "bob", BOB_PASSWORD)
    assert metadata is not None
    assert _topic_names(metadata) == set()


# -- raw connections: what no client library would send --------------------------------------


def _tls_connection(broker: BrokerProcess, tls: TlsFiles) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(tls.ca_file))
    host, port = broker.kafka_bootstrap.rsplit(":", 1)
    raw = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
    return context.wrap_socket(raw, server_hostname=host)


def _answer(connection: socket.socket, frame: bytes) -> bytes | None:
    connection.sendall(frame)
    return read_frame(connection)


def _error_code(answer: bytes) -> int:
    """The error code that follows the correlation id (SaslHandshake, SaslAuthenticate v1)."""
    return int(struct.unpack_from(">h", answer, 4)[0])


def test_a_wrong_password_gets_58_with_a_sentence_and_the_connection_closes(
        broker: BrokerProcess, tls_files: TlsFiles) -> None:
    with _tls_connection(broker, tls_files) as connection:
        assert _answer(connection, api_versions_frame(1)) is not None
        handshake = _answer(connection, request_frame(SaslHandshakeRequest(mechanism="PLAIN"),
                                                      1, 2))
        assert handshake is not None and _error_code(handshake) == ErrorCode.NONE
        refused = _answer(connection, request_frame(
            SaslAuthenticateRequest(auth_bytes=b"\0alice\0guess"), 1, 3))
        assert refused is not None
        assert _error_code(refused) == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert b"invalid user name or password" in refused
        assert read_frame(connection) is None, "the connection stays open after a failure"
    with pytest.raises(AssertionError, match=r"(?i)authentication failed"):
        _kcat_metadata(broker, tls_files, "SCRAM-SHA-512", "alice", "guess")


def test_a_request_before_logging_in_is_refused_and_closed(
        broker: BrokerProcess, tls_files: TlsFiles) -> None:
    with _tls_connection(broker, tls_files) as connection:
        refused = _answer(connection, request_frame(MetadataRequest(topics=None), 1, 7))
        assert refused is not None
        assert struct.unpack_from(">i", refused)[0] == 7
        assert read_frame(connection) is None, "the connection stays open after a refusal"
        assert ORDERS.encode() not in refused


def _assert_plaintext_refused(address: str) -> None:
    """A Kafka request in the clear gets no Kafka answer (a TLS alert, or a closed socket)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as connection:
        connection.sendall(api_versions_frame(1))
        try:
            answer = connection.recv(65536)
        except ConnectionResetError:
            answer = b""
        assert not answer.startswith(b"\x00\x00"), answer  # a frame's size would


def test_a_plaintext_client_on_the_tls_port_is_refused_and_the_broker_serves_on(
        broker: BrokerProcess, tls_files: TlsFiles) -> None:
    _assert_plaintext_refused(broker.kafka_bootstrap)
    metadata = _kcat_metadata(broker, tls_files, "PLAIN", "alice", ALICE_PASSWORD)
    assert metadata is not None and _topic_names(metadata) == {ORDERS}
    assert "Traceback" not in broker.log_text()


# -- the data path: the workers' Kafka ports --------------------------------------------------


def _confluent_config(broker: BrokerProcess, tls: TlsFiles, mechanism: str, user: str,
                      password: str) -> dict[str, Any]:
    return {"bootstrap.servers": broker.kafka_bootstrap, "security.protocol": "SASL_SSL",
            "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": str(tls.ca_file)}


def _consume_all(config: dict[str, Any], prefix: bytes, count: int) -> list[bytes]:
    """The values starting with `prefix` read from `orders` by a member of `billing`, until
    `count` of them came (or the deadline)."""
    consumer = Consumer({**config, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([ORDERS])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            value = message.value()
            if value is not None and value.startswith(prefix):
                values.append(value)
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_produces_and_consumes_over_sasl_ssl(
        broker: BrokerProcess, tls_files: TlsFiles, mechanism: str) -> None:
    config = _confluent_config(broker, tls_files, mechanism, "alice", ALICE_PASSWORD)
    prefix = f"{mechanism}-".encode()
    sent = [prefix + str(index).encode() for index in range(200)]
    producer = Producer({**config, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    failures: list[Any] = []
    for value in sent:
        producer.produce(ORDERS, value, partition=0,
                         on_delivery=lambda error, _m: failures.append(error) if error else None)
    assert producer.flush(TIMEOUT_S) == 0
    assert failures == []
    assert _consume_all(config, prefix, len(sent)) == sent


def test_kcat_produces_and_consumes_over_sasl_ssl(broker: BrokerProcess,
                                                   tls_files: TlsFiles) -> None:
    options = _sasl_options(broker, tls_files, "SCRAM-SHA-256", "alice", ALICE_PASSWORD)
    lines = [f"kcat-{index}" for index in range(50)]
    kcat("-P", "-t", ORDERS, "-p", "0", *options, stdin="\n".join(lines).encode() + b"\n")
    read = kcat("-C", "-t", ORDERS, "-p", "0", "-o", "beginning", "-e", *options)
    assert [line for line in read.splitlines() if line.startswith("kcat-")] == lines


def test_a_user_without_acls_cannot_produce_or_fetch(broker: BrokerProcess,
                                                     tls_files: TlsFiles) -> None:
    config = _confluent_config(broker, tls_files, "SCRAM-SHA-256", "bob", BOB_PASSWORD)
    producer = Producer({**config, "message.timeout.ms": 10_000})
    errors: list[Any] = []
    producer.produce(ORDERS, b"bob", partition=0, on_delivery=lambda error, _m: errors.append(
        error))
    producer.flush(TIMEOUT_S)
    assert [error.code() for error in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    consumer = Consumer({**config, "group.id": "bobs", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(ORDERS, 0, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        code = None
        while code is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            assert error is not None, "bob read a record"
            code = error.code()
        assert code in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                        KafkaError.GROUP_AUTHORIZATION_FAILED)
    finally:
        consumer.close()


def _worker_port(broker: BrokerProcess, tls: TlsFiles) -> str:
    """host:port of the worker leading orders-0, as Metadata names it."""
    metadata = _kcat_metadata(broker, tls, "PLAIN", "alice", ALICE_PASSWORD)
    assert metadata is not None
    leader = next(topic["partitions"][0]["leader"] for topic in metadata["topics"]
                  if topic["topic"] == ORDERS)
    return str(next(node["name"] for node in metadata["brokers"] if node["id"] == leader))


def test_a_workers_port_refuses_plaintext_and_requests_before_logging_in(
        broker: BrokerProcess, tls_files: TlsFiles) -> None:
    address = _worker_port(broker, tls_files)
    assert address != broker.kafka_bootstrap
    _assert_plaintext_refused(address)
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(tls_files.ca_file))
    with context.wrap_socket(socket.create_connection((host, int(port)), timeout=TIMEOUT_S),
                             server_hostname=host) as connection:
        refused = _answer(connection, request_frame(MetadataRequest(topics=None), 1, 9))
        assert refused is not None and struct.unpack_from(">i", refused)[0] == 9
        assert ORDERS.encode() not in refused
        assert read_frame(connection) is None, "the connection stays open after a refusal"
    assert "Traceback" not in broker.log_text()


def test_a_throttled_producer_is_told_its_throttle_time(broker: BrokerProcess,
                                                        tls_files: TlsFiles) -> None:
    """carol may produce 20 kB/s: past her burst, her answers are held and say for how long
    (librdkafka reports throttle_time_ms through its throttle callback)."""
    throttles: list[int] = []
    config = _confluent_config(broker, tls_files, "SCRAM-SHA-256", "carol", CAROL_PASSWORD)
    producer = Producer({**config, "linger.ms": 0, "batch.size": 4_000,
                         "throttle_cb": lambda event: throttles.append(
                             int(event.throttle_time * 1000))})
    failures: list[Any] = []
    for _ in range(20):  # 80 kB: three times the burst and the quota's second
        producer.produce(ORDERS, b"c" * 4_000, partition=0,
                         on_delivery=lambda error, _m: failures.append(error) if error else None)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S * 2) == 0
    assert failures == []
    assert any(throttle > 0 for throttle in throttles), throttles


def _can_log_in(address: str, tls: TlsFiles) -> bool:
    """Whether alice logs in at `address` now (the gateway reads the users once a second)."""
    try:
        _logged_in(address, tls, "alice", ALICE_PASSWORD).close()
    except (AssertionError, OSError):
        return False
    return True


def _logged_in(address: str, tls: TlsFiles, user: str, password: str) -> ssl.SSLSocket:
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(tls.ca_file))
    raw = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
    try:
        connection = context.wrap_socket(raw, server_hostname=host)
    except BaseException:
        raw.close()
        raise
    try:
        handshake = _answer(connection, request_frame(SaslHandshakeRequest(mechanism="PLAIN"),
                                                      1, 1))
        assert handshake is not None and _error_code(handshake) == ErrorCode.NONE
        login = _answer(connection, request_frame(
            SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), 1, 2))
        assert login is not None and _error_code(login) == ErrorCode.NONE
    except BaseException:
        connection.close()
        raise
    return connection


@pytest.mark.parametrize(("user", "password", "seen"), [
    ("alice", ALICE_PASSWORD, True), ("bob", BOB_PASSWORD, False)])
def test_metadata_asked_of_a_worker_is_answered_for_the_principal_logged_in_there(
        broker: BrokerProcess, tls_files: TlsFiles, user: str, password: str,
        seen: bool) -> None:
    """A worker relays Metadata to its gateway with its client's principal: bob, who may
    describe nothing, is not answered as the broker (a super-user) would be."""
    address = _worker_port(broker, tls_files)
    with _logged_in(address, tls_files, user, password) as connection:
        answer = _answer(connection, request_frame(MetadataRequest(topics=None), 1, 3))
    assert answer is not None and struct.unpack_from(">i", answer)[0] == 3
    assert (ORDERS.encode() in answer) == seen
    assert PAYROLL.encode() not in answer


def test_the_gateway_holds_and_reports_a_request_quota(broker: BrokerProcess,
                                                       tls_files: TlsFiles) -> None:
    """dave may make one request a second: the gateway's Metadata answers past that are held
    and say so in throttle_time_ms, which librdkafka reports."""
    throttles: list[int] = []
    config = _confluent_config(broker, tls_files, "SCRAM-SHA-256", "dave", DAVE_PASSWORD)
    config["throttle_cb"] = lambda event: throttles.append(int(event.throttle_time * 1000))
    admin = AdminClient(config)
    for _ in range(4):
        assert ORDERS in admin.list_topics(timeout=TIMEOUT_S).topics
    admin.poll(1.0)  # the throttle callbacks
    assert any(throttle > 0 for throttle in throttles), throttles
