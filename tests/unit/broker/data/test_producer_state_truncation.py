"""A follower's producer table after it cuts its log is the table of what stays, however long
ago a producer last wrote (docs/storage.md, "Producer-state snapshots").

The table is rebuilt from the newest snapshot at or below the cut and the batches after it
(Kafka's `UnifiedLog.truncateTo` -> `rebuildProducerState`), not from the log's last segments
only: an idempotent producer idle while others rolled segments must still be in order, and one
whose batches retention deleted must still be known. Real files and rings; the worker's tick is
where roll snapshots are taken.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from tests.clock import ManualClock
from tests.memory_log import MemoryLog
from zlog.broker.data.partition import Partition
from zlog.broker.data.partition_host import PartitionHost
from zlog.broker.data.producer_state import ProducerBatch, ProducerStateTable
from zlog.broker.worker_protocol import Assign
from zlog.record.arrays import build_batch_from_values
from zlog.record.header import read_header
from zlog.shm_segments.log_config import LogConfig
from zlog.types import TopicPartition

TP: Final = TopicPartition("t", 0)
IDLE: Final = 7000  # sends three batches, then nothing
BUSY: Final = 7001  # rolls the log while the idle one waits
EPOCH: Final = 1


def _batch(producer_id: int, sequence: int) -> bytes:
    return build_batch_from_values(
        [f"{producer_id}-{sequence}".encode().ljust(60, b".")],
        timestamp_ms=1_700_000_000_000, producer_id=producer_id, producer_epoch=0,
        base_sequence=sequence)


SEGMENT_BYTES: Final = 2 * len(_batch(BUSY, 0))  # two batches a segment


def _follower(tmp_path: Path, shm_dir: Path, **configs: str) -> PartitionHost:
    ring_dir = shm_dir / "follower"
    ring_dir.mkdir(parents=True, exist_ok=True)
    host = PartitionHost(tmp_path, ring_dir, base_config=LogConfig(ring_bytes=64 * 1024),
                         clock=ManualClock(), local_replica_id=1)
    host.assign(Assign(0, TP.topic, TP.partition, {"segment.bytes": str(SEGMENT_BYTES),
                                                   **configs},
                       leader_epoch=EPOCH, is_leader=False, replicas=(1, 2), isr=(1, 2),
                       broker_id=1))
    return host


def _copy(host: PartitionHost, leader: MemoryLog, batch: bytes) -> int:
    """The leader appends `batch`; the follower copies it as its fetcher would, and the
    worker's tick runs. Returns the batch's base offset."""
    base = leader.append(batch, leader_epoch=EPOCH)
    stored = bytes(leader.batches[-1])
    host.partitions[TP].append_from_leader(stored, read_header(stored), defer_flush=True)
    host.hosted[TP].log.tick()  # the fetcher moves the batches into the segment files
    host.tick()
    return base


def _idle_then_busy(host: PartitionHost, busy_batches: int) -> list[int]:
    leader = MemoryLog()
    idle_offsets = [_copy(host, leader, _batch(IDLE, sequence)) for sequence in range(3)]
    for sequence in range(busy_batches):
        _copy(host, leader, _batch(BUSY, sequence))
    return idle_offsets


def _cut(host: PartitionHost, point: int) -> Partition:
    """A diverging answer's cut (replica_sync.apply_replica_fetch)."""
    partition = host.partitions[TP]
    partition.truncate_to(point, ProducerStateTable())
    partition.producers = host.rebuilt_producers(TP)
    return partition


def test_an_idle_producer_is_in_order_after_rolls_and_a_truncation(
        tmp_path: Path, shm_dir: Path) -> None:
    host = _follower(tmp_path, shm_dir)
    try:
        idle_offsets = _idle_then_busy(host, busy_batches=12)
        log = host.hosted[TP].log
        assert log.segment_count >= 6, "the idle producer's batches lie segments back"
        partition = _cut(host, log.log_end_offset - 1)  # the last busy batch diverged
        assert partition.producers.check(ProducerBatch(IDLE, 0, 3, 0)) is None, "in order"
        assert partition.producers.check(ProducerBatch(IDLE, 0, 2, 0)) == idle_offsets[2]
    finally:
        host.close_all()


def test_an_idle_producer_outlives_retention_of_its_batches_and_a_truncation(
        tmp_path: Path, shm_dir: Path) -> None:
    """Retention deleted every batch the idle producer wrote; a truncation after that still
    finds it in a snapshot the log start did not pass."""
    host = _follower(tmp_path, shm_dir, **{"retention.bytes": "0"})
    try:
        _idle_then_busy(host, busy_batches=12)
        partition = host.partitions[TP]
        log = host.hosted[TP].log
        partition.follow_high_watermark(log.log_end_offset - 1)  # all but the last batch
        host.enforce_retention()
        assert log.log_start_offset > 3, "the idle producer's batches are gone"
        partition = _cut(host, log.log_end_offset - 1)
        assert partition.producers.check(ProducerBatch(IDLE, 0, 3, 0)) is None, "in order"
    finally:
        host.close_all()
