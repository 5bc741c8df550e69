"""A worker's upkeep on a full disk (a real tmpfs filled up) says so in one line each round,
with the error, and no traceback: a full disk is an operator's condition, not a bug."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.clock import ManualClock
from tests.fault.small_disk import small_disk
from zlog.broker.data.partition_host import PartitionHost
from zlog.broker.worker_protocol import Assign
from zlog.errors import ErrorCode
from zlog.record.records import NewRecord, build_batch
from zlog.shm_segments.log_config import LogConfig
from zlog.types import TopicPartition
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TP = TopicPartition("compacted", 0)
DISK_BYTES = 4 << 20
CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "300"}


def _batch(version: int, timestamp_ms: int) -> bytes:
    """Key `k` overwritten, and a key of its own that survives compaction."""
    return build_batch([NewRecord(f"v{version}".encode(), b"k"),
                        NewRecord(b"kept", f"u{version}".encode())],
                       base_timestamp_ms=timestamp_ms)


def test_compaction_on_a_full_disk_logs_one_line_with_the_error(
        shm_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    with small_disk(DISK_BYTES) as disk:
        clock = ManualClock()
        host = PartitionHost(disk.path / "data", shm_dir, clock=clock, local_replica_id=1,
                             base_config=LogConfig(ring_bytes=64 * 1024))
        try:
            host.assign(Assign(0, TP.topic, TP.partition, CONFIGS, leader_epoch=1))
            partition = host.partitions[TP]
            for version in range(12):  # every sealed segment shrinks, none to nothing
                outcome = partition.produce([_batch(version, clock.wall_ms())], acks=1)
                assert outcome.error_code == ErrorCode.NONE
            assert host.hosted[TP].log.segment_count > 2
            disk.fill_leaving(0)
            caplog.set_level(logging.INFO)
            assert host.start_compactions() == 1
            compaction = host.hosted[TP].compaction
            assert compaction is not None
            wait_until(compaction.done, 30.0, what="the compaction to end")
            assert isinstance(compaction.exception(), OSError), "the disk should be full"
        finally:
            host.close_all()
        failed = [record for record in caplog.records if "compaction" in record.getMessage()
                  and record.levelno >= logging.WARNING]
        assert len(failed) == 1, caplog.text
        assert failed[0].exc_info is None, f"a traceback for a full disk:\n{caplog.text}"
        assert "No space left on device" in failed[0].getMessage()
        assert TP.topic in failed[0].getMessage()
