"""`zlog cluster health`'s verdict (zlog/cli_health.py) on described clusters."""

from __future__ import annotations

from zlog.cli_health import assess
from zlog.client.records import (
    BrokerDescription,
    ClusterDescription,
    PartitionDescription,
    TopicDescription,
)

BROKERS = (BrokerDescription(1, "h1", "tcp://h1:7400"), BrokerDescription(2, "h2", "tcp://h2:7400"))


def _cluster(controller_id: int) -> ClusterDescription:
    return ClusterDescription("c", controller_id, BROKERS, 1, 3, (3, 10))


def _topic(*partitions: PartitionDescription) -> TopicDescription:
    return TopicDescription("t", partitions)


def test_in_sync_with_a_controller_is_healthy() -> None:
    health = assess(_cluster(1), [_topic(PartitionDescription(0, 1, 0, (1, 2), (1, 2), "e"))],
                    {"t": 2})
    assert health.healthy
    assert health.lines() == ["healthy: controller 1; brokers 1 live, 2 live; 1 partitions, "
                              "0 offline, 0 under-replicated, 0 under min ISR"]


def test_no_controller_alone_makes_it_unhealthy() -> None:
    health = assess(_cluster(-1), [], {})
    assert not health.healthy
    assert health.lines()[1:] == ["no active controller"]


def test_each_partition_problem_is_a_line() -> None:
    health = assess(_cluster(1), [_topic(PartitionDescription(0, -1, 0, (2,), (2,), ""),
                                         PartitionDescription(1, 1, 0, (1, 2), (1,), "e"))],
                    {"t": 2})
    assert not health.healthy
    assert health.lines()[1:] == [
        "offline: t-0 replicas [2] isr [2]",
        "under-replicated: t-1 replicas [1, 2] isr [1]",
        "under min ISR: t-0 replicas [2] isr [2] min.insync.replicas 2",
        "under min ISR: t-1 replicas [1, 2] isr [1] min.insync.replicas 2"]
