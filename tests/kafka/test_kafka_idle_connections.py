"""Ten thousand idle connections to a worker's Kafka port leave it serving: it accepts them
a bounded number per loop turn, watches them in one epoll set that the loop polls as one
file descriptor, and produces and fetches for another client meanwhile."""

from __future__ import annotations

import resource
import socket
from collections.abc import Iterator

import pytest

from tests.kafka.kafka_wire import KafkaWire, kafka_python_batch, kafka_python_records
from tests.kafka.test_gateway_bad_input import _connected
from tests.kafka.test_kafka_data_path import (
    PRODUCE,
    RECORDS,
    fetch_all,
    kafka_address,
    new_topic,
    produce_values,
)
from zlog_testbed.broker_process import BrokerProcess, broker_process

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    # A broker of its own: ten thousand connections are a burden no other test should share.
    with broker_process(workers=2) as instance:
        yield instance


IDLE_CONNECTIONS = 10_000


def test_ten_thousand_idle_connections_leave_a_worker_serving(broker: BrokerProcess) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < IDLE_CONNECTIONS + 1_000:
        pytest.skip(f"this process may open only {hard} files")
    topic = new_topic(broker)
    address = kafka_address(broker, topic)
    host, port = address.rsplit(":", 1)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    idle: list[socket.socket] = []
    try:
        for _ in range(IDLE_CONNECTIONS):
            connection = socket.socket()
            connection.setblocking(False)
            connection.connect_ex((host, int(port)))
            idle.append(connection)
        assert _connected(idle, timeout_s=120) == IDLE_CONNECTIONS
        with KafkaWire(address) as wire:
            wire.call(PRODUCE, 9, produce_values(topic, 0, kafka_python_batch(RECORDS)))
            assert len(kafka_python_records(fetch_all(wire, topic))) == len(RECORDS)
    finally:
        for connection in idle:
            connection.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    with KafkaWire(address) as wire:
        assert len(kafka_python_records(fetch_all(wire, topic))) == len(RECORDS)
