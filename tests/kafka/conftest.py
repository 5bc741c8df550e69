"""Fixtures of the Kafka listener's tests: one broker per module, as real clients see it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from zlog_testbed.broker_process import BrokerProcess, broker_process


@pytest.fixture(scope="module")
def kafka_broker() -> Iterator[BrokerProcess]:
    """A single broker with two workers, three offsets partitions (quick to create) and no
    initial rebalance delay; its Kafka gateway at `kafka_bootstrap`."""
    with broker_process(workers=2, extra_args=[
            "--offsets-topic-num-partitions", "3", "--group-initial-rebalance-delay-ms", "0",
            "--group-min-session-timeout-ms", "1000",
    ]) as started:
        yield started
