"""Idempotent-producer state survives a restart however old the producer's last batch is.

The table is snapshotted every few seconds and at close; at open the snapshot is loaded and
the batches after its offset are read back from the log. A worker killed between snapshots
therefore still recognises a retry of any of a producer's last five batches, even when those
lie in segments older than the last two (the log's rolls are not bounded in time).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from zlog.broker.data.isr import ReplicaSet
from zlog.broker.data.partition import Partition
from zlog.broker.data.partition_host import (
    PRODUCER_SNAPSHOT_FILE,
    HostedPartition,
    load_producer_state,
    save_producer_state,
)
from zlog.broker.data.producer_state import ProducerBatch, ProducerStateTable
from zlog.record.arrays import build_batch_from_values
from zlog.record.header import read_header
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig

PID = 7000


def _batch(sequence: int, pid: int = PID, epoch: int = 0) -> bytes:
    return build_batch_from_values(
        [f"seq-{sequence}".encode().ljust(40, b".")], timestamp_ms=1_700_000_000_000,
        producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
    )


def _open(data: Path, shm: Path) -> PartitionLog:
    config = LogConfig(segment_bytes=len(_batch(0)) * 2, ring_bytes=256 * 1024)
    return PartitionLog(data, "t", 0, config, ring_dir=shm)


def _hosted(log: PartitionLog, producers: ProducerStateTable) -> HostedPartition:
    partition = Partition("t", 0, log, leader_epoch=0, is_leader=True,
                          replicas=ReplicaSet.single(0, 1), producers=producers)
    return HostedPartition(partition, log)


def test_snapshot_round_trip_keeps_epochs_and_the_last_five_batches() -> None:
    table = ProducerStateTable()
    for sequence in range(8):
        table.observe(ProducerBatch(PID, 3, sequence, 0), base_offset=100 + sequence)
    table.observe(ProducerBatch(PID + 1, 0, 0, 4), base_offset=200)
    copy, offset = ProducerStateTable.from_snapshot(table.to_snapshot(205))
    assert offset == 205
    for pid in (PID, PID + 1):
        original, restored = table.entry(pid), copy.entry(pid)
        assert original is not None and restored is not None
        assert restored.epoch == original.epoch
        assert list(restored.batches) == list(original.batches)


@pytest.mark.parametrize("data", [b"", b"{", b"[]", b'{"version": 9}', b'{"version": 1}'])
def test_a_damaged_snapshot_is_not_one(data: bytes) -> None:
    with pytest.raises(ValueError):
        ProducerStateTable.from_snapshot(data)


def test_a_retry_is_recognised_after_a_crash_past_many_rolls(tmp_path: Path, shm_dir: Path) -> None:
    log = _open(tmp_path, shm_dir)
    producers = ProducerStateTable()
    hosted = _hosted(log, producers)
    offsets = []
    for sequence in range(3):
        offsets.append(hosted.partition.produce([_batch(sequence)], acks=1).base_offset)
    save_producer_state(hosted)  # the periodic snapshot
    for sequence in range(3, 5):  # after the snapshot, then the worker dies: no snapshot
        offsets.append(hosted.partition.produce([_batch(sequence)], acks=1).base_offset)
    for other in range(10):  # other producers roll the log many times
        hosted.partition.produce([_batch(0, pid=PID + 1 + other)], acks=1)
    assert log.segment_count > 4
    log.close()

    reopened = _open(tmp_path, shm_dir)
    restored = load_producer_state(reopened)
    entry = restored.entry(PID)
    assert entry is not None
    assert [cached.base_offset for cached in entry.batches] == offsets
    for sequence, offset in enumerate(offsets):  # a retry of any of them is a duplicate
        assert restored.check(ProducerBatch(PID, 0, sequence, 0)) == offset
    assert restored.check(ProducerBatch(PID, 0, 5, 0)) is None  # the next one is welcome
    reopened.close()


def test_a_snapshot_beyond_the_log_end_is_ignored(tmp_path: Path, shm_dir: Path) -> None:
    log = _open(tmp_path, shm_dir)
    hosted = _hosted(log, ProducerStateTable())
    for sequence in range(4):
        hosted.partition.produce([_batch(sequence)], acks=1)
    save_producer_state(hosted)
    log.truncate_to(2)  # the snapshot now claims batches the log no longer has
    log.close()
    reopened = _open(tmp_path, shm_dir)
    restored = load_producer_state(reopened)
    entry = restored.entry(PID)
    assert entry is not None
    assert [cached.first_sequence for cached in entry.batches] == [0, 1]
    assert (tmp_path / "t-0" / PRODUCER_SNAPSHOT_FILE).exists()
    assert read_header(_batch(0)).producer_id == PID
    reopened.close()
