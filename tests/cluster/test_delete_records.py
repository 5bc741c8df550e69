"""DeleteRecords on a 3-broker cluster: once the leader answered, every in-sync replica's log
start is at the offset too (on its disk), so the leader that follows a kill -9 serves nothing
below it, and ListOffsets earliest keeps returning it (docs/replication.md §2.3).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.first_read import first_offset_read, replicated_records, stored_log_start
from zlog.client import EARLIEST, Admin, TopicPartition
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


def test_deleted_records_stay_deleted_after_the_leader_is_killed(
        cluster: ClusterProcesses) -> None:
    tp = TopicPartition(TOPIC, 0)
    leader = replicated_records(cluster, tp, RECORDS, timeout_s=WAIT_S)
    with Admin(cluster.bootstrap) as admin:
        assert admin.delete_records({tp: DELETED_BELOW}) == {tp: DELETED_BELOW}
    followers = sorted({1, 2, 3} - {leader})
    assert {node: stored_log_start(cluster.broker(node).data_dir, tp) for node in followers
            } == dict.fromkeys(followers, DELETED_BELOW), \
        "an in-sync replica still holds what was deleted"

    cluster.broker(leader).kill_all()
    cluster.wait_for(lambda p: p.leader not in (leader, -1) and bool(p.endpoint), TOPIC, 0,
                     "a new leader")
    with Admin(cluster.bootstrap, request_timeout_ms=int(WAIT_S * 1000)) as admin:
        assert admin.list_offsets({tp: EARLIEST})[tp].offset == DELETED_BELOW
    assert first_offset_read(cluster.bootstrap, tp, 0, timeout_s=WAIT_S) == DELETED_BELOW
