"""Fixtures of the single-broker tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.group_calls import GROUP_TOPIC
from zlog.transport.messages.admin import (
    CreateTopicsRequestV0,
    CreateTopicsResponseV0,
    TopicSpec,
)
from zlog.transport.rpc import RpcClient
from zlog_testbed.broker_process import CALL_TIMEOUT_MS, BrokerProcess, broker_process


@pytest.fixture
def group_broker() -> Iterator[BrokerProcess]:
    """A broker with two workers, three offsets partitions (quick to create) and no initial
    rebalance delay, serving GROUP_TOPIC (six partitions, one replica)."""
    with broker_process(workers=2, extra_args=[
            "--offsets-topic-num-partitions", "3", "--group-initial-rebalance-delay-ms", "0",
    ]) as started:
        with RpcClient(started.endpoint) as admin:
            created = admin.call(CreateTopicsRequestV0((
                TopicSpec(GROUP_TOPIC, 6, 1),)), CALL_TIMEOUT_MS)
            assert isinstance(created, CreateTopicsResponseV0)
            assert created.topics[0].error_code == 0
        yield started
