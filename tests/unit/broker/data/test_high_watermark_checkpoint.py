"""Where a reopened replica's high watermark starts (high_watermark_checkpoint.py), on real
files and rings: the ring header's HW, else the checkpoint's, else the log start."""

from __future__ import annotations

from pathlib import Path

from tests.clock import ManualClock
from tests.storage_helpers import make_batch
from zlog.broker.data.high_watermark_checkpoint import (
    CHECKPOINT_FILE,
    load_high_watermark,
    save_high_watermark,
)
from zlog.broker.data.partition_host import PartitionHost
from zlog.broker.worker_protocol import Assign
from zlog.shm_segments.log_config import LogConfig
from zlog.types import TopicPartition

TP = TopicPartition("t", 0)
FOLLOWING = Assign(0, "t", 0, {}, leader_epoch=1, is_leader=False, broker_id=2, leader=1,
                   replicas=(1, 2), isr=(1, 2), leader_endpoint="tcp://127.0.0.1:1")


def _host(data_dir: Path, ring_dir: Path) -> PartitionHost:
    ring_dir.mkdir(exist_ok=True)
    return PartitionHost(data_dir, ring_dir, base_config=LogConfig(ring_bytes=64 * 1024),
                         clock=ManualClock())


def _copied_follower(data_dir: Path, ring_dir: Path, high_watermark: int) -> None:
    """A follower that copied 4 batches (12 records) and learnt `high_watermark`, closed."""
    host = _host(data_dir, ring_dir)
    host.assign(FOLLOWING)
    partition = host.partitions[TP]
    for tag in range(4):
        batch = bytearray(make_batch(tag))
        batch[0:8] = (3 * tag).to_bytes(8, "big")  # the leader's offsets
        partition.log.append_replicated(batch)
    partition.follow_high_watermark(high_watermark)
    host.close_all()


def test_a_reopened_follower_starts_at_the_high_watermark_it_had(
        tmp_path: Path, shm_dir: Path) -> None:
    _copied_follower(tmp_path, shm_dir / "rings", 9)
    host = _host(tmp_path, shm_dir / "rings")  # the same ring: its header says 9
    host.assign(FOLLOWING)
    assert host.partitions[TP].high_watermark == 9
    host.close_all()
    assert load_high_watermark(tmp_path / "t-0") == 9, "checkpointed at close"

    rebooted = _host(tmp_path, shm_dir / "after-reboot")  # no ring: the checkpoint says 9
    rebooted.assign(FOLLOWING)
    assert rebooted.partitions[TP].high_watermark == 9
    rebooted.close_all()


def test_a_missing_or_damaged_checkpoint_starts_at_the_log_start(
        tmp_path: Path, shm_dir: Path) -> None:
    _copied_follower(tmp_path, shm_dir / "rings", 9)
    checkpoint = tmp_path / "t-0" / CHECKPOINT_FILE
    checkpoint.write_bytes(b"0\n9x\n")
    host = _host(tmp_path, shm_dir / "fresh")
    host.assign(FOLLOWING)
    assert host.partitions[TP].high_watermark == 0
    host.close_all()
    checkpoint.unlink()
    assert load_high_watermark(tmp_path / "t-0") == -1


def test_a_checkpoint_past_the_log_end_is_capped(tmp_path: Path, shm_dir: Path) -> None:
    """A power loss may cut the log below the checkpointed HW: the log end bounds it."""
    _copied_follower(tmp_path, shm_dir / "rings", 9)
    save_high_watermark(tmp_path / "t-0", 400)
    host = _host(tmp_path, shm_dir / "fresh")
    host.assign(FOLLOWING)
    assert host.partitions[TP].high_watermark == 12
    host.close_all()
