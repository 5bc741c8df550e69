"""A full disk is an operating error: the append is refused with KAFKA_STORAGE_ERROR, what is
stored stays whole and readable, and writing resumes by itself once space is freed.

Real files on a real (small) tmpfs: `small_disk` mounts one per test. The rings live on
/dev/shm as in production, so only the segment files meet the full disk.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from tests.fault.small_disk import small_disk
from tests.fault.tagged_batches import (
    RECORDS_PER_BATCH,
    produce_tagged,
    read_tags,
    tagged_batch,
)
from tests.storage_helpers import batch_tags, split_batches
from zlog import limits
from zlog.client import Admin, NewTopic
from zlog.errors import ErrorCode, ZlogError
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig
from zlog.transport.messages.data import ProduceResult
from zlog_testbed.broker_process import broker_process
from zlog_testbed.waiting import wait_until

CONFIG = LogConfig(ring_bytes=limits.RING_SIZE_BYTES_MIN * 64, max_message_bytes=1 << 21)


def _stored_tags(log: PartitionLog) -> list[int]:
    tags: list[int] = []
    for batch in split_batches(log.read(log.log_start_offset, 1 << 30)):
        tags.extend(sorted(set(batch_tags(batch))))
    return tags


def _append_until_refused(log: PartitionLog, first_tag: int) -> tuple[list[int], ZlogError]:
    accepted: list[int] = []
    for tag in range(first_tag, first_tag + 1000):
        try:
            log.append(tagged_batch(tag))
        except ZlogError as error:
            return accepted, error
        accepted.append(tag)
    raise AssertionError("the disk never filled up")


def test_a_full_disk_refuses_the_batch_and_keeps_the_log_whole(shm_dir: Path) -> None:
    with small_disk(4 << 20) as disk:
        disk.fill_leaving(1 << 20)
        log = PartitionLog(disk.path / "data", "t", 0, CONFIG, ring_dir=shm_dir)
        accepted, error = _append_until_refused(log, 0)
        assert error.code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "No space left" in error.message
        assert accepted, "some batches fit before the disk filled"
        end_before = log.log_end_offset
        assert end_before == len(accepted) * RECORDS_PER_BATCH  # the refused batch took none
        with pytest.raises(ZlogError) as again:
            log.append(tagged_batch(999))
        assert again.value.code == ErrorCode.KAFKA_STORAGE_ERROR
        assert log.log_end_offset == end_before
        assert _stored_tags(log) == accepted  # reads keep working, nothing torn

        disk.free_ballast()
        assert log.append(tagged_batch(500)) == end_before  # resumes by itself, no gap
        log.close()
        reopened = PartitionLog(disk.path / "data", "t", 0, CONFIG, ring_dir=shm_dir)
        assert _stored_tags(reopened) == [*accepted, 500]
        reopened.close()


def test_what_the_ring_holds_waits_there_until_the_disk_has_room(shm_dir: Path) -> None:
    """With flushing batched (ring_flush_bytes), acknowledged batches live in the ring; a full
    disk keeps them there, across a close and a reopen, until space is freed."""
    config = replace(CONFIG, ring_flush_bytes=CONFIG.ring_bytes // 4)
    with small_disk(4 << 20) as disk:
        disk.fill_leaving(600 << 10)
        log = PartitionLog(disk.path / "data", "t", 0, config, ring_dir=shm_dir)
        accepted: list[int] = []
        for tag in range(40):
            try:
                log.append(tagged_batch(tag))
            except ZlogError as error:  # the ring is full and the disk too
                assert error.code == ErrorCode.KAFKA_STORAGE_ERROR
                break
            accepted.append(tag)
        assert log.flush_error is not None, "the disk filled while batches were in the ring"
        on_disk = _stored_tags(log)  # a flush is all or nothing: maybe none of it yet
        assert on_disk == accepted[: len(on_disk)] and len(on_disk) < len(accepted)
        log.close()  # keeps the rest in the ring; must not raise

        reopened = PartitionLog(disk.path / "data", "t", 0, config, ring_dir=shm_dir)
        assert reopened.log_end_offset == len(accepted) * RECORDS_PER_BATCH
        replayed = _stored_tags(reopened)  # replay moves batch by batch, as far as they fit
        assert replayed == accepted[: len(replayed)] and len(replayed) < len(accepted)
        assert reopened.flush_error is not None
        disk.free_ballast()
        reopened.tick()
        assert reopened.flush_error is None
        assert _stored_tags(reopened) == accepted  # nothing lost, nothing twice
        reopened.close()


_OPEN_UNDER_A_LOW_FD_LIMIT = textwrap.dedent("""
    import os, resource, sys
    from pathlib import Path
    from zlog.errors import ZlogError
    from zlog.shm_segments.log import PartitionLog
    from zlog.shm_segments.log_config import LogConfig

    data_dir, ring_dir = Path(sys.argv[1]), Path(sys.argv[2])
    config = LogConfig(ring_bytes=65536)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    opened, failed = [], None
    for partition in range(64):
        fds_before = len(os.listdir("/proc/self/fd"))
        try:
            opened.append(PartitionLog(data_dir, "t", partition, config, ring_dir=ring_dir))
        except ZlogError as error:
            failed = (partition, error.code.name)
            assert len(os.listdir("/proc/self/fd")) <= fds_before, "a failed open leaked"
            break
    assert failed is not None, "the limit was never reached"
    opened.pop().close()  # room for one more open: the failed partition must open now
    retry = PartitionLog(data_dir, "t", failed[0], config, ring_dir=ring_dir)
    retry.close()
    print(failed[1])
""")


def test_a_failed_open_leaks_no_descriptor_and_no_ring_lock(tmp_path: Path,
                                                             shm_dir: Path) -> None:
    """`Too many open files` fails one open cleanly; the same process opens it once it can
    (a leaked ring lock would refuse it: "locked by another writer (pid <own pid>)")."""
    result = subprocess.run(
        [sys.executable, "-c", _OPEN_UNDER_A_LOW_FD_LIMIT, str(tmp_path), str(shm_dir)],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "KAFKA_STORAGE_ERROR"


@pytest.mark.slow
def test_a_broker_on_a_full_disk_answers_storage_error_and_recovers(tmp_path: Path) -> None:
    """Spec (docs/reliability.md): the produce gets KAFKA_STORAGE_ERROR (56), the worker
    stays up and keeps serving reads, a killed worker comes back on the full disk, and
    writes resume by themselves once space is freed. Nothing acknowledged is lost."""
    with small_disk(30 << 20) as disk, broker_process(
        tmp_path, workers=1, data_dir=disk.path / "data",
    ) as broker:
        with Admin(broker.endpoint, request_timeout_ms=10_000) as admin:
            admin.create_topics([NewTopic("full", 2)])
        broker.data_endpoint("full", 1)
        disk.fill_leaving(3 << 20)
        (worker_pid,) = broker.worker_pids()
        acknowledged: list[int] = []
        refused: ProduceResult | None = None
        for tag in range(200):
            result = produce_tagged(broker.data_endpoint("full", tag % 2), "full", tag % 2, tag)
            if result.error_code != ErrorCode.NONE:
                refused = result
                break
            acknowledged.append(tag)
        assert refused is not None, "the disk never filled"
        assert refused.error_code == ErrorCode.KAFKA_STORAGE_ERROR, refused
        assert broker.worker_pids() == [worker_pid]  # an operating error, not a crash
        assert read_tags(broker.endpoint, "full", 2) == acknowledged

        broker.kill_worker(worker_pid)  # a restart on the full disk must come back
        wait_until(lambda: broker.served_by_another_worker("full", 2, worker_pid), 30,
                   what="the restarted worker serving both partitions")
        assert read_tags(broker.endpoint, "full", 2) == acknowledged

        disk.free_ballast()
        result = produce_tagged(broker.data_endpoint("full", 0), "full", 0, 1000)
        assert result.error_code == ErrorCode.NONE, result
        assert read_tags(broker.endpoint, "full", 2) == [*acknowledged, 1000]
        assert "AssertionError" not in broker.log_text()
