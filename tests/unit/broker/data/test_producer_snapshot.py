"""Idempotent-producer state survives a restart however old the producer's last batch is.

The table is snapshotted at each roll, every few seconds and at close, one `<offset>.snapshot`
file per snapshot (producer_snapshots.py); at open the newest snapshot is loaded and the batches
after its offset are read back from the log. A worker killed between snapshots therefore still
recognises a retry of any of a producer's last five batches, even when those lie in segments
older than the last two (the log's rolls are not bounded in time).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clock import ManualClock
from zlog.broker.data.isr import ReplicaSet
from zlog.broker.data.partition import Partition
from zlog.broker.data.partition_host import HostedPartition, PartitionHost, save_producer_state
from zlog.broker.data.producer_snapshots import (
    LEGACY_SNAPSHOT_FILE,
    PRODUCER_SNAPSHOTS_MAX,
    ProducerSnapshots,
    load_producer_state,
    snapshot_path,
)
from zlog.broker.data.producer_state import ProducerBatch, ProducerStateTable
from zlog.broker.worker_protocol import Assign
from zlog.record.arrays import build_batch_from_values
from zlog.record.header import read_header
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig
from zlog.types import TopicPartition

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
    return HostedPartition(partition, log, ProducerSnapshots(log.directory))


def _load(log: PartitionLog) -> ProducerStateTable:
    return load_producer_state(log, ProducerSnapshots(log.directory))


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
    restored = _load(reopened)
    entry = restored.entry(PID)
    assert entry is not None
    assert [cached.base_offset for cached in entry.batches] == offsets
    for sequence, offset in enumerate(offsets):  # a retry of any of them is a duplicate
        assert restored.check(ProducerBatch(PID, 0, sequence, 0)) == offset
    assert restored.check(ProducerBatch(PID, 0, 5, 0)) is None  # the next one is welcome
    reopened.close()


def test_a_snapshot_beyond_the_log_end_is_ignored_and_deleted(
        tmp_path: Path, shm_dir: Path) -> None:
    """It describes batches the log no longer has: were it kept, a log grown past its offset
    again would load it with other batches' producers."""
    log = _open(tmp_path, shm_dir)
    hosted = _hosted(log, ProducerStateTable())
    for sequence in range(4):
        hosted.partition.produce([_batch(sequence)], acks=1)
    save_producer_state(hosted)
    log.truncate_to(2)  # the snapshot now claims batches the log no longer has
    log.close()
    reopened = _open(tmp_path, shm_dir)
    restored = _load(reopened)
    entry = restored.entry(PID)
    assert entry is not None
    assert [cached.first_sequence for cached in entry.batches] == [0, 1]
    assert not snapshot_path(tmp_path / "t-0", 4).exists()
    assert read_header(_batch(0)).producer_id == PID
    reopened.close()


def test_the_newest_snapshot_at_or_below_the_log_end_is_loaded(
        tmp_path: Path, shm_dir: Path) -> None:
    """A torn newest snapshot (a power loss without fsync) is skipped for the one before."""
    log = _open(tmp_path, shm_dir)
    hosted = _hosted(log, ProducerStateTable())
    for sequence in range(3):
        hosted.partition.produce([_batch(sequence)], acks=1)
        save_producer_state(hosted)
    log.close()
    directory = tmp_path / "t-0"
    assert [p.name for p in sorted(directory.glob("*.snapshot"))] == [
        snapshot_path(directory, offset).name for offset in (1, 2, 3)]
    snapshot_path(directory, 3).write_bytes(b'{"version": 1, "log_off')
    reopened = _open(tmp_path, shm_dir)
    snapshots = ProducerSnapshots(directory)
    restored = load_producer_state(reopened, snapshots)
    assert snapshots.offsets == (1, 2), "the torn one is gone"
    assert restored.check(ProducerBatch(PID, 0, 3, 0)) is None
    assert restored.check(ProducerBatch(PID, 0, 2, 0)) == 2
    reopened.close()


def test_the_snapshot_of_an_older_zlog_is_adopted(tmp_path: Path, shm_dir: Path) -> None:
    log = _open(tmp_path, shm_dir)
    table = ProducerStateTable()
    for sequence in range(2):
        table.observe(ProducerBatch(PID, 0, sequence, 0), log.append(_batch(sequence)))
    directory = log.directory
    (directory / LEGACY_SNAPSHOT_FILE).write_bytes(table.to_snapshot(log.log_end_offset))
    snapshots = ProducerSnapshots(directory)
    assert snapshots.offsets == (2,)
    assert not (directory / LEGACY_SNAPSHOT_FILE).exists()
    assert load_producer_state(log, snapshots).check(ProducerBatch(PID, 0, 1, 0)) == 1
    log.close()


TP = TopicPartition("t", 0)


def _host(data_dir: Path, ring_dir: Path) -> PartitionHost:
    ring_dir.mkdir(parents=True, exist_ok=True)
    return PartitionHost(data_dir, ring_dir, base_config=LogConfig(ring_bytes=64 * 1024),
                         clock=ManualClock())


def test_a_host_snapshots_at_each_roll_keeps_a_bounded_number_and_retention_cleans_them(
        tmp_path: Path, shm_dir: Path) -> None:
    size = len(_batch(0))
    host = _host(tmp_path, shm_dir / "host")
    configs = {"segment.bytes": str(size), "retention.bytes": "0"}  # a segment per batch
    try:
        host.assign(Assign(0, "t", 0, configs, leader_epoch=0))
        directory = host.hosted[TP].log.directory
        snapshots = host.hosted[TP].snapshots
        assert snapshots.offsets == (0,), "taken at open: the log end had none"
        partition = host.partitions[TP]
        partition.produce([_batch(0)], acks=1)  # into the empty active segment: no roll
        for sequence in range(1, 3 * PRODUCER_SNAPSHOTS_MAX):
            partition.produce([_batch(sequence)], acks=1)
            host.tick()  # the worker's tick snapshots what rolled since the last one
            offsets = snapshots.offsets
            assert offsets[-1] == partition.log.log_end_offset, "a snapshot at each roll"
            assert len(offsets) <= PRODUCER_SNAPSHOTS_MAX
        assert sorted(int(p.name.split(".")[0]) for p in directory.glob("*.snapshot")) == list(
            snapshots.offsets)
        host.enforce_retention()  # one replica: the HW is the log end
        log = host.hosted[TP].log
        assert log.log_start_offset == log.log_end_offset - 1, "only the active segment stays"
        assert snapshots.offsets == (log.log_start_offset, log.log_end_offset), \
            "those below the log start go"
        assert len(list(directory.glob("*.snapshot"))) == 2
    finally:
        host.close_all()

