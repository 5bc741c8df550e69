"""The doorbells of a worker for the consumers on its host (zlog/broker/data/local_readers.py).

Spec: zlog/transport/local_channel.py. A reader connects to a real worker's doorbell socket and
says where it parks; the worker must ring once the partition's high watermark passes that
offset (at once if it already has), and never before. Waiting for the bell has a generous
deadline: what is asserted is that it comes (or not), not how fast.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator
from typing import Final

import pytest

from zlog.client import Admin, NewTopic, Producer
from zlog.transport import local_channel
from zlog_testbed.broker_process import BrokerProcess, broker_process

pytestmark = pytest.mark.slow

BELL_WAIT_MS: Final = 10_000
QUIET_MS: Final = 300  # a bell that has not come by then is taken as not rung


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with broker_process(workers=1) as instance:
        yield instance


_names = iter(range(1_000_000))


def new_topic(broker: BrokerProcess) -> tuple[str, str]:
    name = f"doorbell-{next(_names)}"
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic(name, 1)])
    return name, broker.data_endpoint(name, 0)


def produce(broker: BrokerProcess, topic: str, count: int) -> None:
    with Producer(broker.endpoint, linger_ms=0, acks=1) as producer:
        for index in range(count):
            producer.send(topic, b"%d" % index, partition=0).result(30)


def reader(endpoint: str) -> socket.socket:
    connection = local_channel.connect(endpoint)
    assert connection is not None, "the worker takes no local readers"
    connection.send(local_channel.READER_HELLO)
    return connection


def rung(connection: socket.socket, within_ms: int) -> bool:
    poller = select.poll()
    poller.register(connection.fileno(), select.POLLIN)
    if not poller.poll(within_ms):
        return False
    assert connection.recv(local_channel.MESSAGE_BYTES_MAX) == local_channel.BELL
    return True


def test_a_parked_reader_is_rung_by_the_append_past_its_offset(broker: BrokerProcess) -> None:
    topic, endpoint = new_topic(broker)
    produce(broker, topic, 2)
    with reader(endpoint) as connection:
        connection.send(local_channel.wait_message(topic, 0, 2))
        assert not rung(connection, QUIET_MS), "nothing past offset 2 yet"
        produce(broker, topic, 1)
        assert rung(connection, BELL_WAIT_MS)
        produce(broker, topic, 1)
        assert not rung(connection, QUIET_MS), "a wait is rung once, then forgotten"


def test_a_reader_behind_the_high_watermark_is_rung_at_once(broker: BrokerProcess) -> None:
    topic, endpoint = new_topic(broker)
    produce(broker, topic, 3)
    with reader(endpoint) as connection:
        connection.send(local_channel.wait_message(topic, 0, 1))
        assert rung(connection, BELL_WAIT_MS)


def test_waits_for_other_partitions_and_nonsense_are_harmless(broker: BrokerProcess) -> None:
    topic, endpoint = new_topic(broker)
    with reader(endpoint) as connection:
        connection.send(b"nonsense")
        connection.send(local_channel.wait_message(topic, 0, 0))
        connection.send(local_channel.wait_message("no-such-topic", 0, 0))
        assert rung(connection, BELL_WAIT_MS), "a partition it does not hold is rung"
        produce(broker, topic, 1)
        assert rung(connection, BELL_WAIT_MS)
    with reader(endpoint) as connection:  # the worker still serves after all that
        connection.send(local_channel.wait_message(topic, 0, 0))
        assert rung(connection, BELL_WAIT_MS)
