"""Fixtures of the Kafka listener's tests: one broker per module, as real clients see it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from zlog_testbed.broker_process import KAFKA_SWITCH, BrokerProcess, broker_process


@pytest.fixture(scope="package", autouse=True)
def kafka_listeners() -> Iterator[None]:
    """The Kafka tests' brokers open their Kafka listeners: the testbed's, and a `zlog serve`
    a test starts by hand (on a free port, since another broker of this machine may hold
    9092). Only theirs: a pytest process runs other directories' modules too, before and
    after these, and their brokers start no Kafka gateway."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KAFKA_SWITCH, "1")
        patch.setenv("ZLOG_KAFKA_LISTEN", "127.0.0.1:0")
        yield


@pytest.fixture(scope="module")
def kafka_broker() -> Iterator[BrokerProcess]:
    """A single broker with two workers, three offsets partitions (quick to create) and no
    initial rebalance delay; its Kafka gateway at `kafka_bootstrap`."""
    with broker_process(workers=2, extra_args=[
            "--offsets-topic-num-partitions", "3", "--group-initial-rebalance-delay-ms", "0",
            "--group-min-session-timeout-ms", "1000",
    ]) as started:
        yield started
