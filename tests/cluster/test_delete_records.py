"""DeleteRecords on a 3-broker cluster: once the leader answered, every in-sync replica's log
start is at the offset too (on its disk), so the leader that follows a kill -9 serves nothing
below it, and ListOffsets earliest keeps returning it (docs/replication.md §2.3).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.first_read import first_offset_read
from zlog.client import EARLIEST, Admin, NewTopic, Producer, TopicPartition
from zlog.shm_segments.log import LOG_START_FILE, partition_dir_name
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes

pytestmark = pytest.mark.slow

TOPIC: Final = "deleted"
RECORDS: Final = 20
DELETED_BELOW: Final = 12
WAIT_S: Final = 60.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    with cluster_processes(3, tmp_path) as running:
        yield running


def _stored_log_start(cluster: ClusterProcesses, node: int) -> int:
    """The log start a replica keeps on its disk."""
    path = (cluster.broker(node).data_dir / partition_dir_name(TOPIC, 0) / LOG_START_FILE)
    try:
        return int(path.read_text().strip() or 0)
    except FileNotFoundError:
        return 0


def test_deleted_records_stay_deleted_after_the_leader_is_killed(
        cluster: ClusterProcesses) -> None:
    tp = TopicPartition(TOPIC, 0)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, replication_factor=3,
                                      configs={"min.insync.replicas": "2"})])
    cluster.wait_isr(TOPIC, 0, {1, 2, 3})
    with Producer(cluster.bootstrap, acks="all", linger_ms=0) as producer:
        for i in range(RECORDS):
            producer.send(TOPIC, b"%d" % i, partition=0).result(timeout=WAIT_S)
    leader = cluster.partition(TOPIC, 0).leader
    with Admin(cluster.bootstrap) as admin:
        assert admin.delete_records({tp: DELETED_BELOW}) == {tp: DELETED_BELOW}
    followers = sorted({1, 2, 3} - {leader})
    assert {node: _stored_log_start(cluster, node) for node in followers} == dict.fromkeys(
        followers, DELETED_BELOW), "an in-sync replica still holds what was deleted"

    cluster.broker(leader).kill_all()
    cluster.wait_for(lambda p: p.leader not in (leader, -1) and bool(p.endpoint), TOPIC, 0,
                     "a new leader")
    with Admin(cluster.bootstrap, request_timeout_ms=int(WAIT_S * 1000)) as admin:
        assert admin.list_offsets({tp: EARLIEST})[tp].offset == DELETED_BELOW
    assert first_offset_read(cluster.bootstrap, tp, 0, timeout_s=WAIT_S) == DELETED_BELOW
