"""With security on, the ACLs of the metadata log decide each request (docs/security.md).

A real broker with CURVE on and principals admin (a super-user), alice and bob. With no ACL,
alice is authenticated but may do nothing: her produce, fetch, topic creation and a group's
offsets get TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED, and her topic listing is empty though
topics exist. Given a prefixed ACL she sees and uses exactly the topics under the prefix; a
deny wins over an allow; removing the ACL takes the right back. The ACLs are in the metadata
log, so a restarted broker still enforces them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.secure_broker import make_keys, secure_broker, speaking_as
from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.security import AclEntry, AlterSecurityRequestV0
from zlog_testbed.broker_process import BrokerProcess

pytestmark = pytest.mark.slow

TIMEOUT_MS: Final = 5_000
WAIT_S: Final = 30.0
ORDERS: Final = ("orders-eu", "orders-us")
OTHER: Final = "payroll"


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    return make_keys(tmp_path / "keys", ["admin", "alice", "bob"])


@pytest.fixture
def broker(keys: Path, tmp_path: Path) -> Iterator[BrokerProcess]:
    with secure_broker(keys, tmp_path, topics=(*ORDERS, OTHER)) as running:
        yield running


def _alter(keys: Path, broker: BrokerProcess, change: AlterSecurityRequestV0) -> None:
    with speaking_as(keys), Admin(broker.endpoint, request_timeout_ms=TIMEOUT_MS) as admin:
        admin.alter_security(change)


def _code(call: object) -> ErrorCode:
    assert callable(call)
    with pytest.raises(ZlogError) as caught:
        call()
    return caught.value.code


def _produce(broker: BrokerProcess, topic: str) -> int:
    with Producer(broker.endpoint, acks="all", linger_ms=0, request_timeout_ms=TIMEOUT_MS,
                  delivery_timeout_ms=TIMEOUT_MS) as producer:
        return producer.send(topic, b"v", partition=0).result(timeout=WAIT_S).offset


def _fetch(broker: BrokerProcess, topic: str) -> list[bytes]:
    with Consumer(broker.endpoint, request_timeout_ms=TIMEOUT_MS) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek(TopicPartition(topic, 0), 0)
        return [record.value or b"" for record in consumer.poll(timeout_ms=TIMEOUT_MS)]


def _topics(broker: BrokerProcess) -> list[str]:
    with Admin(broker.endpoint, request_timeout_ms=TIMEOUT_MS) as admin:
        return sorted(admin.list_topics())


def _group_offsets(broker: BrokerProcess) -> dict[TopicPartition, int]:
    with Admin(broker.endpoint, request_timeout_ms=TIMEOUT_MS) as admin:
        return admin.list_group_offsets("audit")


def test_a_principal_without_acls_is_refused_everything_and_sees_no_topic(
        keys: Path, broker: BrokerProcess) -> None:
    with speaking_as(keys, "alice"):
        assert _topics(broker) == []
        assert _code(lambda: _produce(broker, ORDERS[0])) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert _code(lambda: _fetch(broker, ORDERS[0])) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        with Admin(broker.endpoint, request_timeout_ms=TIMEOUT_MS) as admin:
            assert _code(lambda: admin.create_topics([NewTopic("alices", 1)])) == (
                ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            assert _code(admin.describe_cluster) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            assert _code(lambda: admin.alter_security(AlterSecurityRequestV0(acls_add=(
                AclEntry("alice", "topic", "*", "all"),)))) == (
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    with speaking_as(keys):  # the super-user sees every topic, and nothing alice wrote
        assert _topics(broker) == sorted((*ORDERS, OTHER))
        assert all(_fetch(broker, name) == [] for name in (*ORDERS, OTHER))


def test_a_prefixed_acl_opens_exactly_its_topics_and_a_deny_wins(
        keys: Path, broker: BrokerProcess) -> None:
    grant = tuple(AclEntry("alice", "topic", "orders-", operation, "prefixed")
                  for operation in ("read", "write"))
    _alter(keys, broker, AlterSecurityRequestV0(acls_add=grant))
    with speaking_as(keys, "alice"):
        assert _topics(broker) == list(ORDERS)  # read and write imply describe
        assert _produce(broker, ORDERS[0]) == 0
        assert _fetch(broker, ORDERS[0]) == [b"v"]
        assert _code(lambda: _produce(broker, OTHER)) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert _code(lambda: _group_offsets(broker)) == ErrorCode.GROUP_AUTHORIZATION_FAILED
        with Admin(broker.endpoint, request_timeout_ms=TIMEOUT_MS) as admin:
            # reading and writing a topic is not deleting its records (Kafka's rule)
            assert _code(lambda: admin.delete_records({TopicPartition(ORDERS[0], 0): 1})) == (
                ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        assert _fetch(broker, ORDERS[0]) == [b"v"]
    with speaking_as(keys, "bob"):  # another principal: nothing
        assert _topics(broker) == []

    deny = AclEntry("alice", "topic", ORDERS[1], "write", permission="deny")
    _alter(keys, broker, AlterSecurityRequestV0(acls_add=(deny,)))
    with speaking_as(keys, "alice"):
        assert _code(lambda: _produce(broker, ORDERS[1])) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert _produce(broker, ORDERS[0]) == 1

    _alter(keys, broker, AlterSecurityRequestV0(acls_remove=grant))
    with speaking_as(keys, "alice"):
        assert _topics(broker) == []
        assert _code(lambda: _fetch(broker, ORDERS[0])) == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_acls_are_kept_in_the_metadata_log_across_a_restart(
        keys: Path, broker: BrokerProcess) -> None:
    grant = AclEntry("alice", "topic", ORDERS[0], "write")
    _alter(keys, broker, AlterSecurityRequestV0(acls_add=(grant,)))
    broker.stop()
    with speaking_as(keys):
        broker.start()
    with speaking_as(keys, "alice"):
        assert _topics(broker) == [ORDERS[0]]
        assert _produce(broker, ORDERS[0]) == 0
        assert _code(lambda: _produce(broker, ORDERS[1])) == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_a_consumer_whose_group_is_refused_hears_it_from_poll(
        keys: Path, broker: BrokerProcess) -> None:
    """Allowed to read the topic but not the group: the group's coordinator lookup is refused,
    and poll raises GROUP_AUTHORIZATION_FAILED instead of returning nothing for ever."""
    _alter(keys, broker, AlterSecurityRequestV0(acls_add=(
        AclEntry("alice", "topic", ORDERS[0], "read"),)))
    with speaking_as(keys, "alice"), Consumer(broker.endpoint, group_id="audit",
                                               request_timeout_ms=TIMEOUT_MS) as consumer:
        consumer.subscribe([ORDERS[0]])
        deadline = time.monotonic() + WAIT_S
        with pytest.raises(ZlogError) as refused:
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=500)
        assert refused.value.code == ErrorCode.GROUP_AUTHORIZATION_FAILED
