"""A partition whose producer state cannot be read back at open (the batches after the last
producer snapshot meet a corrupt batch) still opens, marked corrupt: to be cut and fetched
again, or handed over. It used to be refused at every assign, for good.

Spec: docs/storage.md ("Recovery and opening time"). Real files and rings.
"""

from __future__ import annotations

from pathlib import Path

from tests.clock import ManualClock
from tests.storage_helpers import make_batch
from zlog.broker.data.partition_host import PartitionHost
from zlog.broker.data.producer_snapshots import snapshot_path
from zlog.broker.data.producer_state import ProducerStateTable
from zlog.broker.worker_protocol import Assign
from zlog.errors import ErrorCode
from zlog.shm_segments.log_config import LogConfig
from zlog.types import TopicPartition

CONFIGS = {"segment.bytes": "4096"}
RECORDS = 2
TP = TopicPartition("t", 0)


def _host(data_dir: Path, ring_dir: Path) -> PartitionHost:
    ring_dir.mkdir(exist_ok=True)
    return PartitionHost(data_dir, ring_dir, base_config=LogConfig(ring_bytes=64 * 1024),
                         clock=ManualClock())


def test_a_partition_whose_producer_state_meets_rot_opens_marked_corrupt(
        tmp_path: Path, shm_dir: Path) -> None:
    host = _host(tmp_path, shm_dir / "before")
    host.assign(Assign(0, "t", 0, CONFIGS, leader_epoch=1))
    for tag in range(40):
        assert host.partitions[TP].produce([make_batch(tag, RECORDS, 200)],
                                                 acks=1).error_code == ErrorCode.NONE
    host.close_all()
    directory = tmp_path / "t-0"
    for snapshot in directory.glob("*.snapshot"):  # the producers are read from offset 0
        snapshot.unlink()
    snapshot_path(directory, 0).write_bytes(ProducerStateTable().to_snapshot(0))
    second = sorted(directory.glob("*.log"))[1]
    data = bytearray(second.read_bytes())
    data[len(data) // 2 + 100] ^= 0x40  # inside a record: its CRC fails
    second.write_bytes(bytes(data))

    host = _host(tmp_path, shm_dir / "after")  # a fresh ring: the old one holds it whole
    try:
        host.assign(Assign(0, "t", 0, CONFIGS, leader_epoch=2))
        partition = host.partitions[TP]
        assert partition.corrupt_from is not None
        assert int(second.stem) < partition.corrupt_from < int(sorted(
            directory.glob("*.log"))[2].stem)
        refused = partition.produce([make_batch(99, RECORDS, 200)], acks=1)
        assert refused.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "corrupt batch" in refused.error_message
    finally:
        host.close_all()
