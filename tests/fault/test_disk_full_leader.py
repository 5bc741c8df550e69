"""A leader whose disk is full hands its partition to an in-sync follower (docs/replication.md
§3), and takes its place in the ISR again once space is freed.

Three real brokers; broker 1's data dir is a small tmpfs (`small_disk`), filled with ballast
until its next appends are refused. The partition it led is served by another replica from
then on; nothing acknowledged is lost; broker 1's workers stay up throughout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fault.small_disk import small_disk
from tests.fault.tagged_batches import produce_tagged, read_tags
from zlog.client import Admin, NewTopic
from zlog.errors import ErrorCode
from zlog_testbed.cluster_processes import ClusterProcesses, running
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC = "full"
PARTITIONS = 3
FULL_NODE = 1


def test_a_leader_on_a_full_disk_resigns_and_rejoins_once_space_is_freed(tmp_path: Path) -> None:
    with small_disk(40 << 20) as disk:
        cluster = ClusterProcesses(3)
        cluster.brokers[FULL_NODE].data_dir = disk.path / "data"
        with running(cluster, tmp_path / "logs"):
            with Admin(cluster.bootstrap, request_timeout_ms=30_000) as admin:
                admin.create_topics([NewTopic(TOPIC, PARTITIONS, replication_factor=3,
                                              configs={"min.insync.replicas": "2"})])
            for each in range(PARTITIONS):
                cluster.wait_isr(TOPIC, each, {1, 2, 3})
            partition = next(p for p in range(PARTITIONS)
                             if cluster.partition(TOPIC, p).leader == FULL_NODE)
            before = cluster.partition(TOPIC, partition)
            pids = cluster.broker(FULL_NODE).worker_pids()
            disk.fill_leaving(2 << 20)

            acknowledged: list[int] = []
            refused = ErrorCode.NONE
            for tag in range(100):
                refused = ErrorCode(produce_tagged(before.endpoint, TOPIC, partition,
                                                   tag).error_code)
                if refused != ErrorCode.NONE:
                    break
                acknowledged.append(tag)
            assert refused == ErrorCode.KAFKA_STORAGE_ERROR, "the disk never filled"
            cluster.wait_for(lambda p: p.leader not in (-1, FULL_NODE)
                             and FULL_NODE not in p.isr and p.leader_epoch > before.leader_epoch
                             and bool(p.endpoint), TOPIC, partition,
                             "leadership moved off the full disk", timeout_s=20)
            moved = cluster.partition(TOPIC, partition)
            answers: list[int] = []  # NOT_LEADER_OR_FOLLOWER until the assignment reaches it
            wait_until(lambda: answers.append(produce_tagged(
                moved.endpoint, TOPIC, partition, 500).error_code) or answers[-1] in (
                    ErrorCode.NONE, ErrorCode.KAFKA_STORAGE_ERROR), 10,
                what="the new leader's answer")
            assert set(answers[:-1]) <= {ErrorCode.NOT_LEADER_OR_FOLLOWER}, answers
            assert answers[-1] == ErrorCode.NONE, answers
            assert read_tags(cluster.bootstrap, TOPIC, PARTITIONS) == [*acknowledged, 500]
            assert cluster.broker(FULL_NODE).worker_pids() == pids  # no crash, no restart

            disk.free_ballast()
            cluster.wait_isr(TOPIC, partition, {1, 2, 3})  # caught up, back in sync
