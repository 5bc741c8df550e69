"""`__consumer_offsets` replicas get a small ring (zlog.groups.partitioning.OFFSETS_RING_BYTES):
a broker holds up to 50 of them, and each ring is memory taken at open. A batch larger than
the ring still goes in (straight to the segment). Real files and rings.
"""

from __future__ import annotations

from pathlib import Path

from tests.clock import ManualClock
from zlog.broker.data.partition_host import PartitionHost
from zlog.broker.worker_protocol import Assign
from zlog.errors import ErrorCode
from zlog.groups.partitioning import OFFSETS_RING_BYTES, OFFSETS_TOPIC
from zlog.record.records import NewRecord, build_batch
from zlog.shm_segments.log import ring_path_for
from zlog.shm_segments.log_config import LogConfig
from zlog.types import TopicPartition

BROKER_RING_BYTES = 4 * OFFSETS_RING_BYTES


def test_offsets_replicas_get_a_small_ring_and_still_take_a_batch_larger_than_it(
        tmp_path: Path, shm_dir: Path) -> None:
    host = PartitionHost(tmp_path, shm_dir, base_config=LogConfig(ring_bytes=BROKER_RING_BYTES),
                         clock=ManualClock())
    try:
        host.assign(Assign(0, OFFSETS_TOPIC, 3, {"cleanup.policy": "compact",
                                                "max.message.bytes": str(BROKER_RING_BYTES)},
                           leader_epoch=1))
        host.assign(Assign(0, "plain", 0, {}, leader_epoch=1))
        offsets_ring = ring_path_for(shm_dir, OFFSETS_TOPIC, 3).stat().st_size
        plain_ring = ring_path_for(shm_dir, "plain", 0).stat().st_size
        assert offsets_ring < BROKER_RING_BYTES <= plain_ring
        assert offsets_ring <= OFFSETS_RING_BYTES + (64 << 10), "its capacity and a header"
        partition = host.partitions[TopicPartition(OFFSETS_TOPIC, 3)]
        big = build_batch([NewRecord(b"v" * (OFFSETS_RING_BYTES // 2), key=b"k%d" % i)
                           for i in range(4)], base_timestamp_ms=1_700_000_000_000)
        assert partition.produce([big], acks=1).error_code == ErrorCode.NONE
        assert partition.log.log_end_offset == 4
    finally:
        host.close_all()
