"""A follower whose sealed segment rotted while it was down finds the corrupt batch by its
CRC, cuts its log there and fetches the rest again from the leader (docs/storage.md,
"Recovery and opening time"; F5 of the fault schedule).

Three real brokers, one partition of 256 KiB segments holding ~100 KB batches. The follower
is killed, one byte in the middle of its second segment is flipped, and it starts again.
Afterwards its log holds exactly the leader's batches, and reads whole.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster_fixtures import log_bytes
from tests.fault.tagged_batches import RECORDS_PER_BATCH, produce_tagged
from zlog.client import Admin, Consumer, NewTopic, TopicPartition
from zlog.errors import ErrorCode
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC = "rot"
BATCHES = 12  # two to a segment: six segments


def _served_end(bootstrap: str) -> int:
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        return consumer.list_offsets({TopicPartition(TOPIC, 0): -1})[TopicPartition(TOPIC, 0)]


def _follower(cluster: ClusterProcesses) -> int:
    return next(node for node in (1, 2, 3) if node != cluster.partition(TOPIC, 0).leader)


def test_a_follower_cuts_a_rotted_segment_and_fetches_it_again(tmp_path: Path) -> None:
    with cluster_processes(3, tmp_path / "logs") as cluster:
        with Admin(cluster.bootstrap, request_timeout_ms=30_000) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, replication_factor=3, configs={
                "min.insync.replicas": "2", "segment.bytes": str(256 << 10)})])
        cluster.wait_isr(TOPIC, 0, {1, 2, 3})
        leader = cluster.partition(TOPIC, 0)
        for tag in range(BATCHES):
            assert produce_tagged(leader.endpoint, TOPIC, 0, tag).error_code == ErrorCode.NONE
        node = _follower(cluster)
        follower = cluster.broker(node)
        cluster.wait_isr(TOPIC, 0, {1, 2, 3})  # it holds every batch
        follower.kill_all()
        second = sorted((follower.data_dir / f"{TOPIC}-0").glob("*.log"))[1]
        data = bytearray(second.read_bytes())
        data[len(data) // 2] ^= 0x10
        second.write_bytes(bytes(data))

        follower.start()
        wait_until(lambda: "its first corrupt batch" in follower.log_text(), 30,
                   what=f"broker {node} cutting its log at the corrupt batch")
        cluster.wait_isr(TOPIC, 0, {1, 2, 3})
        leader = cluster.partition(TOPIC, 0)
        wait_until(lambda: _served_end(cluster.bootstrap) == BATCHES * RECORDS_PER_BATCH, 10,
                   what="the leader's high watermark at the end")
        for broker in cluster.brokers.values():
            broker.kill_all()
        # Opened again (rings replayed), each log reads whole: CRCs checked, and equal.
        stored = log_bytes(follower, TOPIC, 0)
        assert stored == log_bytes(cluster.broker(leader.leader), TOPIC, 0)
        assert len(stored) > BATCHES * 100_000
