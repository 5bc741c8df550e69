"""Retention on a hosted replica deletes only segments wholly below its high watermark: on a
leader whose follower has not fetched, and on a follower whose HW lags (docs/storage.md,
"Retention, compaction, durability"). Real files and rings; the partition rules publish the HW.
"""

from __future__ import annotations

from pathlib import Path

from tests.clock import ManualClock
from tests.storage_helpers import make_batch
from zlog.broker.data.partition_host import PartitionHost
from zlog.broker.worker_protocol import Assign
from zlog.errors import ErrorCode
from zlog.record.header import scan_batches
from zlog.shm_segments.log_config import LogConfig
from zlog.types import TopicPartition

TP = TopicPartition("t", 0)
RECORDS = 1
SEGMENT_BYTES = len(make_batch(0, RECORDS))  # one batch a segment
CONFIGS = {"segment.bytes": str(SEGMENT_BYTES), "retention.bytes": "0"}
BATCHES = 6


def _host(data_dir: Path, ring_dir: Path) -> PartitionHost:
    ring_dir.mkdir(parents=True, exist_ok=True)
    return PartitionHost(data_dir, ring_dir, base_config=LogConfig(ring_bytes=64 * 1024),
                         clock=ManualClock(), local_replica_id=1)


def _two_replicas(*, is_leader: bool) -> Assign:
    return Assign(0, "t", 0, CONFIGS, leader_epoch=1, is_leader=is_leader, replicas=(1, 2),
                  isr=(1, 2), broker_id=1)


def test_a_leader_keeps_what_its_follower_has_not_fetched(tmp_path: Path,
                                                          shm_dir: Path) -> None:
    host = _host(tmp_path, shm_dir / "leader")
    try:
        host.assign(_two_replicas(is_leader=True))
        partition = host.partitions[TP]
        for tag in range(BATCHES):
            outcome = partition.produce([make_batch(tag, RECORDS)], acks=1)
            assert outcome.error_code == ErrorCode.NONE
            host.tick()  # the worker's tick: producer snapshots of what rolled
        log = host.hosted[TP].log
        host.enforce_retention()
        assert log.log_start_offset == 0, "the follower holds nothing: the HW is 0"
        partition.note_replica_fetch(2, 4, now_ms=0, broker_epoch=0,
                                     log_start_offset=0)  # it holds [0, 4)
        assert partition.high_watermark == 4
        host.enforce_retention()
        assert log.log_start_offset == 4
        assert partition.high_watermark == 4, "the HW did not jump to a new log start"
    finally:
        host.close_all()


def test_a_follower_keeps_what_its_leader_has_not_committed(tmp_path: Path,
                                                           shm_dir: Path) -> None:
    leader = _host(tmp_path / "leader", shm_dir / "leader")
    follower = _host(tmp_path / "follower", shm_dir / "follower")
    try:
        leader.assign(Assign(0, "t", 0, CONFIGS, leader_epoch=1))
        for tag in range(BATCHES):
            leader.partitions[TP].produce([make_batch(tag, RECORDS)], acks=1)
        chunks = leader.hosted[TP].log.read(0, 1 << 20)
        follower.assign(_two_replicas(is_leader=False))
        copy = follower.partitions[TP]
        for chunk in chunks:
            for start, header in scan_batches(chunk)[0]:
                copy.append_from_leader(chunk[start:start + header.size_bytes], header)
                follower.tick()  # the worker's tick: segment files, producer snapshots
        log = follower.hosted[TP].log
        assert log.log_end_offset == BATCHES
        follower.enforce_retention()
        assert log.log_start_offset == 0, "no HW from the leader yet"
        copy.follow_high_watermark(3)
        follower.enforce_retention()
        assert log.log_start_offset == 3
    finally:
        leader.close_all()
        follower.close_all()


def test_retention_cuts_the_epoch_cache_from_the_start_and_on_disk(tmp_path: Path,
                                                                    shm_dir: Path) -> None:
    """The cache says where each epoch starts in this log: once retention moved the log
    start, the epoch holding it starts there (Kafka's truncateFromStart), in memory and in
    the checkpoint a reopened replica reads."""
    host = _host(tmp_path, shm_dir / "leader")
    try:
        host.assign(Assign(0, "t", 0, CONFIGS, leader_epoch=1))
        for tag in range(BATCHES // 2):
            host.partitions[TP].produce([make_batch(tag, RECORDS)], acks=1)
        host.assign(Assign(0, "t", 0, CONFIGS, leader_epoch=2))
        for tag in range(BATCHES // 2):
            host.partitions[TP].produce([make_batch(tag, RECORDS)], acks=1)
        host.tick()
        assert [(e.epoch, e.start_offset) for e in host.partitions[TP].epochs.entries] == [
            (1, 0), (2, 3)]
        host.enforce_retention()
        start = host.hosted[TP].log.log_start_offset
        assert start == BATCHES - 1, "every sealed segment below the HW went"
        expected = [(2, start)]
        assert [(e.epoch, e.start_offset) for e in host.partitions[TP].epochs.entries] == expected
    finally:
        host.close_all()
    reopened = _host(tmp_path, shm_dir / "leader")
    try:
        reopened.assign(Assign(0, "t", 0, CONFIGS, leader_epoch=2))
        assert [(e.epoch, e.start_offset)
                for e in reopened.partitions[TP].epochs.entries] == expected
    finally:
        reopened.close_all()
