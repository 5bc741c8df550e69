"""At-least-once across a coordinator's crash (docs/groups.md §11): three brokers, members
that commit after processing, and the broker leading the group's `__consumer_offsets`
partition killed with SIGKILL while they read, then started again. Every record is processed
by some member at least once, none is skipped, no partition has two owners at one instant,
and the group's commits end at the log end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.group_calls import find_coordinator
from tests.group_members import Members
from zlog.client import Admin, NewTopic, Producer, TopicPartition
from zlog.groups.partitioning import OFFSETS_TOPIC, partition_for
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

OFFSETS_PARTITIONS: Final = 2
PARTITIONS: Final = 4
SESSION_MS: Final = 3_000
FIRST_ROUND: Final = 30
SECOND_ROUND: Final = 20
WAIT_S: Final = 90.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    with cluster_processes(3, tmp_path / "cluster", extra_args=[
            "--offsets-topic-num-partitions", str(OFFSETS_PARTITIONS),
            "--group-initial-rebalance-delay-ms", "300",
            "--group-consumer-session-timeout-ms", str(SESSION_MS),
            "--group-consumer-heartbeat-interval-ms", "500"]) as running:
        yield running


def _produce(cluster: ClusterProcesses, topic: str, count: int) -> None:
    with Producer(cluster.bootstrap, acks=-1) as producer:
        for partition in range(PARTITIONS):
            for i in range(count):
                producer.send(topic, f"{partition}-{i}".encode(), partition=partition)
        producer.flush(timeout_ms=60_000)


def _wait(condition: Callable[[], bool], what: str) -> None:
    wait_until(condition, WAIT_S, interval_s=0.05, what=what)


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_commits_after_processing_skip_nothing_when_the_coordinator_is_killed(
        cluster: ClusterProcesses, tmp_path: Path, protocol: str) -> None:
    topic, group = f"at-least-once-{protocol}", f"careful-{protocol}"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, replication_factor=3)])
    _produce(cluster, topic, FIRST_ROUND)
    coordinator = find_coordinator([b.endpoint for b in cluster.running()], group)
    cluster.wait_isr(OFFSETS_TOPIC, partition_for(group, OFFSETS_PARTITIONS), {1, 2, 3})
    members = Members(cluster.bootstrap, tmp_path, group, topic, protocol, SESSION_MS,
                      PARTITIONS)
    try:
        members.start()
        members.start()
        _wait(members.split_evenly, "2 members with 2 partitions each")
        _wait(lambda: len(members.consumed()) >= PARTITIONS * FIRST_ROUND // 2,
              "some records processed and committed")

        killed = cluster.broker(coordinator.node_id)
        killed.kill_all()
        _produce(cluster, topic, SECOND_ROUND)  # while the coordinator moves
        moved = find_coordinator([b.endpoint for b in cluster.running()], group, WAIT_S)
        assert moved.node_id != coordinator.node_id, "another broker coordinates the group"
        killed.start()

        every = {(p, o) for p in range(PARTITIONS) for o in range(FIRST_ROUND + SECOND_ROUND)}
        _wait(lambda: every <= members.consumed(), "every record processed by some member")
        members.assert_no_overlap()
        assert members.consumed() == every, "nothing beyond what was produced"

        end = dict.fromkeys((TopicPartition(topic, p) for p in range(PARTITIONS)),
                            FIRST_ROUND + SECOND_ROUND)

        def committed_to_the_end() -> bool:
            with Admin(cluster.bootstrap) as admin:
                return admin.list_group_offsets(group) == end

        _wait(committed_to_the_end, "the group's commits at the log end")
    finally:
        members.stop()
