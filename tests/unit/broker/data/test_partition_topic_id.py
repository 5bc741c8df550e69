"""A partition directory belongs to one topic id (KIP-516): the host never serves another's.

A topic deleted and created again under the same name while this broker was away leaves the
old topic's directory (and ring) under the new topic's name. Spec: docs/storage.md ("Partition
directories"). Real files and rings.
"""

from __future__ import annotations

from pathlib import Path

from tests.clock import ManualClock
from tests.storage_helpers import make_batch
from zlog.broker.data.partition_host import PartitionHost
from zlog.broker.worker_protocol import Assign
from zlog.errors import ErrorCode
from zlog.shm_segments.log_config import LogConfig
from zlog.shm_segments.partition_metadata import PARTITION_METADATA_FILE, read_topic_id
from zlog.types import TopicPartition

OLD_ID, NEW_ID = "a" * 32, "b" * 32
TP = TopicPartition("t", 0)


def _host(data_dir: Path, ring_dir: Path) -> PartitionHost:
    ring_dir.mkdir(exist_ok=True)
    return PartitionHost(data_dir, ring_dir, base_config=LogConfig(ring_bytes=64 * 1024),
                         clock=ManualClock())


def _fill(host: PartitionHost, topic_id: str, batches: int) -> None:
    host.assign(Assign(0, "t", 0, leader_epoch=1, topic_id=topic_id))
    for tag in range(batches):
        result = host.partitions[TP].produce([make_batch(tag, 2, 100)], acks=1)
        assert result.error_code == ErrorCode.NONE


def test_a_new_directory_records_its_topic_id(tmp_path: Path, shm_dir: Path) -> None:
    host = _host(tmp_path, shm_dir)
    try:
        _fill(host, OLD_ID, 1)
        assert read_topic_id(tmp_path / "t-0") == OLD_ID
        assert host.partitions[TP].topic_id == OLD_ID
    finally:
        host.close_all()


def test_a_directory_of_another_topic_id_is_deleted_not_served(
        tmp_path: Path, shm_dir: Path) -> None:
    host = _host(tmp_path, shm_dir)
    _fill(host, OLD_ID, 3)
    host.close_all()
    host = _host(tmp_path, shm_dir)
    try:
        host.assign(Assign(0, "t", 0, leader_epoch=0, topic_id=NEW_ID))
        log = host.partitions[TP].log
        assert (log.log_start_offset, log.log_end_offset) == (0, 0)
        assert read_topic_id(tmp_path / "t-0") == NEW_ID
    finally:
        host.close_all()


def test_an_open_partition_assigned_as_another_topic_id_is_replaced(
        tmp_path: Path, shm_dir: Path) -> None:
    """The worker deletes it first (holds_other_topic), then the assign opens it empty."""
    host = _host(tmp_path, shm_dir)
    try:
        _fill(host, OLD_ID, 3)
        again = Assign(1, "t", 0, leader_epoch=1, topic_id=OLD_ID)
        other = Assign(2, "t", 0, leader_epoch=0, topic_id=NEW_ID)
        assert not host.holds_other_topic(again) and host.holds_other_topic(other)
        host.unassign(TP, delete=True)
        host.assign(other)
        assert host.partitions[TP].log.log_end_offset == 0
    finally:
        host.close_all()


def test_a_directory_from_before_topic_ids_is_adopted(tmp_path: Path, shm_dir: Path) -> None:
    host = _host(tmp_path, shm_dir)
    _fill(host, OLD_ID, 3)
    host.close_all()
    (tmp_path / "t-0" / PARTITION_METADATA_FILE).unlink()
    host = _host(tmp_path, shm_dir)
    try:
        host.assign(Assign(0, "t", 0, leader_epoch=1, topic_id=NEW_ID))
        assert host.partitions[TP].log.log_end_offset == 6  # kept: nothing says otherwise
        assert read_topic_id(tmp_path / "t-0") == NEW_ID
    finally:
        host.close_all()


def test_a_ring_left_without_its_directory_is_not_replayed(
        tmp_path: Path, shm_dir: Path) -> None:
    """A wiped data directory with the rings still in shared memory: the partition starts
    empty, not with batches the ring held for the directory that is gone."""
    host = _host(tmp_path, shm_dir)
    host.assign(Assign(0, "t", 0, leader_epoch=1, topic_id=OLD_ID))
    hosted = host.hosted[TP]
    hosted.log.config = LogConfig(ring_bytes=64 * 1024, ring_flush_bytes=1 << 20)
    assert host.partitions[TP].produce([make_batch(0, 2, 100)],
                                       acks=1).error_code == ErrorCode.NONE
    hosted.log._ring.close()  # a killed worker: the batch is in the ring only
    host.hosted.clear()
    host.partitions.clear()
    for path in sorted((tmp_path / "t-0").iterdir()):
        path.unlink()
    (tmp_path / "t-0").rmdir()
    host = _host(tmp_path, shm_dir)
    try:
        host.assign(Assign(0, "t", 0, leader_epoch=2, topic_id=OLD_ID))
        assert host.partitions[TP].log.log_end_offset == 0
    finally:
        host.close_all()
