"""A group member follows metadata on a real broker: a pattern subscription takes a topic
created after `subscribe`, and partitions added to a subscribed topic are assigned, for both
protocols (classic: the leader's look at metadata makes it rejoin; server-side: the
coordinator notices the count). One member, polled on this thread, each wait with a deadline
(docs/groups.md §11)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from zlog.client import Admin, Consumer, NewTopic, TopicPartition
from zlog_testbed.broker_process import BrokerProcess, broker_process

WAIT_S = 30.0
METADATA_MAX_AGE_MS = 300


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with broker_process(workers=1, extra_args=[
            "--offsets-topic-num-partitions", "1",
            "--group-initial-rebalance-delay-ms", "0"]) as instance:
        yield instance


def _poll_until(consumer: Consumer, done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, \
            f"timed out waiting for {what}: assignment {sorted(consumer.assignment())}"
        consumer.poll(50)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_pattern_takes_new_topics_and_added_partitions_are_assigned(
        broker: BrokerProcess, protocol: str) -> None:
    prefix = f"watch-{protocol}"
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic(f"{prefix}-a", 1)])
        consumer = Consumer(broker.endpoint, group_id=f"{prefix}-group", group_protocol=protocol,
                            metadata_max_age_ms=METADATA_MAX_AGE_MS, session_timeout_ms=6_000,
                            heartbeat_interval_ms=500)
        try:
            consumer.subscribe(pattern=rf"{prefix}-.*")
            first = TopicPartition(f"{prefix}-a", 0)
            _poll_until(consumer, lambda: consumer.assignment() == {first}, "the first topic")
            admin.create_topics([NewTopic(f"{prefix}-b", 1)])
            created = TopicPartition(f"{prefix}-b", 0)
            _poll_until(consumer, lambda: consumer.assignment() == {first, created},
                        "the topic created after subscribe")
            admin.create_partitions({f"{prefix}-a": 2})
            added = TopicPartition(f"{prefix}-a", 1)
            _poll_until(consumer, lambda: consumer.assignment() == {first, created, added},
                        "the partition added to a subscribed topic")
        finally:
            consumer.close()
