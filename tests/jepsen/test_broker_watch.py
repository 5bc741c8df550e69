"""The heal's watch of what every broker answers (zlog_jepsen/broker_watch.py), on real
brokers: each is asked on its own, a broker down is skipped, and one back is asked again."""

from __future__ import annotations

from pathlib import Path

import pytest

from zlog.client import Admin, NewTopic
from zlog.transport.messages.admin import TopicMetadata
from zlog_jepsen.broker_watch import BrokerWatch
from zlog_jepsen.cluster import RunCluster
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

DEADLINE_S = 60.0


def _topics_seen(node: int, topics: tuple[TopicMetadata, ...]) -> list[tuple[int, str]]:
    return [(node, topic.name) for topic in topics]


def test_every_running_broker_is_asked_and_one_restarted_is_asked_again(
        tmp_path: Path) -> None:
    cluster = RunCluster(3, tmp_path)
    try:
        cluster.start()
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics([NewTopic("watched", 1, replication_factor=3)])
        seen: set[tuple[int, str]] = set()

        def answered_by(nodes: set[int]) -> bool:
            seen.update(watch.take())
            return {(node, "watched") for node in nodes} <= seen

        with BrokerWatch(cluster, _topics_seen) as watch:
            wait_until(lambda: answered_by({1, 2, 3}), DEADLINE_S, 0.05,
                       "every broker's answer naming the topic")
            cluster.broker(2).kill_all()  # down: the others are asked all the same
            watch.take()
            seen.clear()
            wait_until(lambda: answered_by({1, 3}), DEADLINE_S, 0.05, "brokers 1 and 3")
            assert (2, "watched") not in seen
            cluster.broker(2).start()
            wait_until(lambda: answered_by({2}), DEADLINE_S, 0.05, "broker 2 back")
    finally:
        cluster.close()
