"""PartitionLog over real files and a real shared-memory ring."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.clock import ManualClock
from tests.storage_helpers import base_offset_of, batch_tags, make_batch, split_batches
from zlog.client.local_ring import LocalRing
from zlog.errors import ErrorCode, ZlogError
from zlog.record.arrays import build_batch_from_values
from zlog.record.header import validate_batch
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig
from zlog.shm_segments.ring import RingLockedError
from zlog.shm_segments.segment import IOV_MAX


def _open(
    data: Path, shm: Path, clock: ManualClock | None = None, **config: object
) -> PartitionLog:
    config.setdefault("ring_bytes", 256 * 1024)  # a 64 MiB default ring is faulted in at open
    settings = LogConfig(**config)  # type: ignore[arg-type]
    return PartitionLog(data, "events", 0, settings, ring_dir=shm, clock=clock)


def _all_batches(log: PartitionLog, start: int | None = None) -> list[bytes]:
    offset = log.log_start_offset if start is None else start
    return split_batches(log.read(offset, 1 << 30))


def test_append_assigns_consecutive_offsets_and_reads_back(tmp_path: Path, shm_dir: Path) -> None:
    with _open(tmp_path, shm_dir) as log:
        bases = [log.append(make_batch(tag, record_count=tag + 1)) for tag in range(5)]
        assert bases == [0, 1, 3, 6, 10]
        assert log.log_end_offset == 15
        batches = _all_batches(log)
        assert [base_offset_of(b) for b in batches] == bases
        for tag, batch in enumerate(batches):
            validate_batch(batch)  # stamping the offset kept the CRC valid
            assert batch_tags(batch) == [tag] * (tag + 1)


def test_read_starts_at_the_batch_holding_the_offset(tmp_path: Path, shm_dir: Path) -> None:
    with _open(tmp_path, shm_dir) as log:
        for tag in range(4):
            log.append(make_batch(tag, record_count=5))
        for offset in range(20):
            first = split_batches(log.read(offset, 1 << 20))[0]
            assert base_offset_of(first) == offset // 5 * 5


def test_read_honours_max_bytes_but_returns_at_least_one_batch(
    tmp_path: Path, shm_dir: Path
) -> None:
    with _open(tmp_path, shm_dir) as log:
        size = len(make_batch(0))
        for tag in range(10):
            log.append(make_batch(tag))
        assert len(split_batches(log.read(0, 1))) == 1
        assert len(split_batches(log.read(0, size * 3))) == 3
        assert len(split_batches(log.read(0, size * 3 + size // 2))) == 3
        assert sum(len(v) for v in log.read(0, size * 3)) == size * 3


def test_read_never_returns_batches_at_or_above_upto(tmp_path: Path, shm_dir: Path) -> None:
    with _open(tmp_path, shm_dir) as log:
        for tag in range(5):
            log.append(make_batch(tag))  # 3 records each
        batches = split_batches(log.read(0, 1 << 20, upto_offset=9))
        assert [base_offset_of(b) for b in batches] == [0, 3, 6]
        assert log.read(9, 1 << 20, upto_offset=9) == []


def test_read_outside_the_log_is_offset_out_of_range(tmp_path: Path, shm_dir: Path) -> None:
    with _open(tmp_path, shm_dir) as log:
        log.append(make_batch(0))
        assert log.read(3, 100) == []  # the log end: nothing yet, not an error
        for bad in (-1, 4, 1000):
            with pytest.raises(ZlogError) as caught:
                log.read(bad, 100)
            assert caught.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_segments_roll_by_size_and_are_named_by_base_offset(tmp_path: Path, shm_dir: Path) -> None:
    size = len(make_batch(0))
    with _open(tmp_path, shm_dir, segment_bytes=size * 2) as log:
        for tag in range(7):
            log.append(make_batch(tag))
        names = sorted(p.name for p in (tmp_path / "events-0").glob("*.log"))
        assert names == [f"{base:020d}.log" for base in (0, 6, 12, 18)]
        assert [batch_tags(b)[0] for b in _all_batches(log)] == list(range(7))
        assert [base_offset_of(b) for b in _all_batches(log, 7)] == [6, 9, 12, 15, 18]


def test_segments_roll_by_age(tmp_path: Path, shm_dir: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    with _open(tmp_path, shm_dir, clock, segment_ms=1000) as log:
        log.append(make_batch(0, timestamp_ms=clock.wall_ms()))
        clock.advance(999)
        log.append(make_batch(1, timestamp_ms=clock.wall_ms()))
        assert log.segment_count == 1
        clock.advance(1)
        log.append(make_batch(2, timestamp_ms=clock.wall_ms()))
        assert log.segment_count == 2


def test_reopen_keeps_offsets_data_and_log_start(tmp_path: Path, shm_dir: Path) -> None:
    size = len(make_batch(0))
    with _open(tmp_path, shm_dir, segment_bytes=size * 2) as log:
        for tag in range(9):
            log.append(make_batch(tag))
        log.publish_high_watermark(log.log_end_offset)
        log.delete_records_before(7)
        before = _all_batches(log)
    with _open(tmp_path, shm_dir, segment_bytes=size * 2) as log:
        assert log.log_end_offset == 27
        assert log.log_start_offset == 7
        assert _all_batches(log) == before
        assert log.append(make_batch(9)) == 27


def test_opening_reads_only_the_active_segment(tmp_path: Path, shm_dir: Path) -> None:
    size = len(make_batch(0))
    with _open(tmp_path, shm_dir, segment_bytes=size) as log:
        for tag in range(50):
            log.append(make_batch(tag))
    with _open(tmp_path, shm_dir, segment_bytes=size) as log:
        sealed = log.segments_snapshot()[:-1]
        assert len(sealed) == 49
        assert all(segment._offsets is None for segment in sealed)  # nothing loaded yet
        assert batch_tags(_all_batches(log, 30)[0]) == [10] * 3


@pytest.mark.parametrize("damage", ["missing", "garbage", "wrong"])
def test_a_missing_or_damaged_index_is_rebuilt(tmp_path: Path, shm_dir: Path, damage: str) -> None:
    size = len(make_batch(0))
    config = {"segment_bytes": size * 20, "index_interval_bytes": size}
    with _open(tmp_path, shm_dir, **config) as log:
        for tag in range(30):
            log.append(make_batch(tag))
    index_path = tmp_path / "events-0" / f"{0:020d}.index"
    if damage == "missing":
        index_path.unlink()
    elif damage == "garbage":
        index_path.write_bytes(os.urandom(21))
    else:
        index_path.write_bytes((b"\x00\x00\x00\x09" + b"\xff\xff\x00\x00") * 3)  # past the end
    with _open(tmp_path, shm_dir, **config) as log:
        for offset in range(0, 60, 7):
            assert base_offset_of(split_batches(log.read(offset, 1))[0]) == offset // 3 * 3
    assert index_path.stat().st_size == 20 * 8  # one entry per batch, written back


def test_truncate_to_cuts_whole_batches_and_appends_continue(tmp_path: Path, shm_dir: Path) -> None:
    size = len(make_batch(0))
    with _open(tmp_path, shm_dir, segment_bytes=size * 3) as log:
        for tag in range(10):
            log.append(make_batch(tag))
        log.truncate_to(16)  # inside batch 5 (offsets 15-17): it goes too
        assert log.log_end_offset == 15
        assert [batch_tags(b)[0] for b in _all_batches(log)] == [0, 1, 2, 3, 4]
        assert log.append(make_batch(99)) == 15
        log.truncate_to(4)  # back into the first segment
        assert log.log_end_offset == 3
        assert log.append(make_batch(100)) == 3
        expected = [0, 100]
        assert [batch_tags(b)[0] for b in _all_batches(log)] == expected
    with _open(tmp_path, shm_dir, segment_bytes=size * 3) as log:
        assert [batch_tags(b)[0] for b in _all_batches(log)] == expected
        assert log.log_end_offset == 6


def test_truncate_below_log_start_restarts_the_log(tmp_path: Path, shm_dir: Path) -> None:
    with _open(tmp_path, shm_dir) as log:
        for tag in range(3):
            log.append(make_batch(tag))
        log.truncate_fully_and_start_at(100)
        assert (log.log_start_offset, log.log_end_offset) == (100, 100)
        assert log.append(make_batch(7)) == 100


def test_delete_records_before_advances_log_start(tmp_path: Path, shm_dir: Path) -> None:
    size = len(make_batch(0))
    with _open(tmp_path, shm_dir, segment_bytes=size * 2) as log:
        for tag in range(6):
            log.append(make_batch(tag))
        log.publish_high_watermark(log.log_end_offset)  # one replica: everything committed
        assert log.delete_records_before(7) == 7
        with pytest.raises(ZlogError) as caught:
            log.read(6, 100)
        assert caught.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert base_offset_of(_all_batches(log)[0]) == 6  # the batch holding 7
        assert log.segment_count == 2  # [0, 6) deleted; [6, 12) and [12, 18) remain
        with pytest.raises(ZlogError):
            log.delete_records_before(19)
        log.delete_records_before(18)
        assert log.read(18, 100) == []


def test_retention_by_bytes_and_time_deletes_oldest_segments(tmp_path: Path, shm_dir: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    size = len(make_batch(0))
    config = {"segment_bytes": size, "retention_bytes": size * 3, "retention_ms": 10_000}
    with _open(tmp_path, shm_dir, clock, **config) as log:
        for tag in range(6):
            log.append(make_batch(tag, timestamp_ms=clock.wall_ms() + tag * 1000))
        log.publish_high_watermark(log.log_end_offset)  # one replica: everything committed
        assert log.enforce_retention() == 3  # 6 segments; keep >= 3 * size
        assert log.log_start_offset == 9
        clock.advance(14_500)  # batches 3 and 4 now older than 10 s; 5 is active
        assert log.enforce_retention() == 2
        assert log.log_start_offset == 15
        assert [batch_tags(b)[0] for b in _all_batches(log)] == [5]


def test_retention_keeps_the_log_within_its_disk_share(tmp_path: Path, shm_dir: Path) -> None:
    size = len(make_batch(0))
    config = {"segment_bytes": size, "disk_share_bytes": 2 * size, "retention_ms": -1}
    with _open(tmp_path, shm_dir, **config) as log:
        for tag in range(5):
            log.append(make_batch(tag))
        log.publish_high_watermark(log.log_end_offset)  # one replica: everything committed
        assert log.enforce_retention() == 3  # 5 segments of one batch; 2 fit in the share
        assert log.size_bytes == 2 * size
        assert [batch_tags(b)[0] for b in _all_batches(log)] == [3, 4]
        assert log.enforce_retention() == 0
        log.config = replace(log.config, disk_share_bytes=size - 1)  # a smaller share
        assert log.enforce_retention() == 1  # the active segment stays, whatever its size
        assert [batch_tags(b)[0] for b in _all_batches(log)] == [4]


def test_retention_deletes_only_segments_wholly_below_the_high_watermark(
    tmp_path: Path, shm_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever the policy says, a segment holding an offset at or above the high watermark
    stays: no follower may hold it yet, and deleting it would let the leader's high watermark
    jump over it to the new log start (an acks=all batch acknowledged on one copy, gone)."""
    caplog.set_level(logging.INFO, logger="zlog.shm_segments.log")
    size = len(make_batch(0, record_count=1))
    with _open(tmp_path, shm_dir, segment_bytes=size, retention_bytes=0) as log:
        for tag in range(6):
            log.append(make_batch(tag, record_count=1))  # a segment each: [0, 1) ... [5, 6)
        assert log.enforce_retention() == 0, "no high watermark published: nothing committed"
        log.publish_high_watermark(3)
        assert log.enforce_retention() == 3
        assert log.log_start_offset == 3
        log.publish_high_watermark(4)
        assert log.enforce_retention() == 1
        log.publish_high_watermark(log.log_end_offset)
        assert log.enforce_retention() == 1  # the active segment stays
        assert [batch_tags(b)[0] for b in _all_batches(log)] == [5]
    waits = [r for r in caplog.records if "retention waits for the high watermark" in r.message]
    assert len(waits) == 1, "said once while retention waited, not at every pass"
    assert any("no longer waits" in r.message for r in caplog.records)


def test_retention_keeps_the_log_from_the_offset_the_broker_names(
    tmp_path: Path, shm_dir: Path
) -> None:
    """The broker names where its producer table can be rebuilt from: segments there and
    after stay, whatever the high watermark allows."""
    size = len(make_batch(0, record_count=1))
    with _open(tmp_path, shm_dir, segment_bytes=size, retention_bytes=0) as log:
        for tag in range(6):
            log.append(make_batch(tag, record_count=1))
        log.publish_high_watermark(log.log_end_offset)
        assert log.enforce_retention(keep_from_offset=2) == 2
        assert log.log_start_offset == 2
        assert log.enforce_retention(keep_from_offset=9) == 3  # the HW bounds it then


def test_the_disk_share_waits_for_the_high_watermark_too(tmp_path: Path, shm_dir: Path) -> None:
    size = len(make_batch(0, record_count=1))
    config = {"segment_bytes": size, "disk_share_bytes": 0, "retention_ms": -1}
    with _open(tmp_path, shm_dir, **config) as log:
        for tag in range(5):
            log.append(make_batch(tag, record_count=1))
        log.publish_high_watermark(2)
        assert log.enforce_retention() == 2
        assert log.size_bytes == 3 * size, "over its share until the followers catch up"


def test_delete_records_above_the_high_watermark_is_out_of_range(
    tmp_path: Path, shm_dir: Path
) -> None:
    """Kafka's DeleteRecords refuses an offset above the high watermark the same way."""
    size = len(make_batch(0, record_count=1))
    with _open(tmp_path, shm_dir, segment_bytes=size * 2) as log:
        for tag in range(6):
            log.append(make_batch(tag, record_count=1))
        log.publish_high_watermark(4)
        with pytest.raises(ZlogError) as caught:
            log.delete_records_before(5)
        assert caught.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert "high watermark 4" in caught.value.message
        assert log.log_start_offset == 0
        assert log.delete_records_before(4) == 4


def test_retention_disk_percent_alone_deletes_nothing(tmp_path: Path, shm_dir: Path) -> None:
    """The percent is the topic's, over all its partitions on a broker: only the broker knows
    how many those are, and it hands the log its share."""
    size = len(make_batch(0))
    config = {"segment_bytes": size, "retention_disk_percent": 1e-9, "retention_ms": -1}
    with _open(tmp_path, shm_dir, **config) as log:
        for tag in range(3):
            log.append(make_batch(tag))
        log.publish_high_watermark(log.log_end_offset)
        assert log.enforce_retention() == 0


def test_offset_for_timestamp_finds_the_first_record_at_or_after(
    tmp_path: Path, shm_dir: Path
) -> None:
    size = len(make_batch(0))
    with _open(tmp_path, shm_dir, segment_bytes=size * 2) as log:
        for tag in range(6):
            log.append(make_batch(tag, timestamp_ms=1000 * (tag + 1)))
        assert log.offset_for_timestamp(0) == 0
        assert log.offset_for_timestamp(1000) == 0
        assert log.offset_for_timestamp(1001) == 3
        assert log.offset_for_timestamp(4500) == 12
        assert log.offset_for_timestamp(6000) == 15
        assert log.offset_for_timestamp(6001) is None


def test_flush_messages_fsyncs_every_n_messages(tmp_path: Path, shm_dir: Path) -> None:
    with _open(tmp_path, shm_dir, flush_messages=5) as log:
        log.append(make_batch(0))
        assert log.segments_snapshot()[-1].unsynced_messages == 3
        log.append(make_batch(1))
        assert log.segments_snapshot()[-1].unsynced_messages == 0


def test_flush_ms_fsyncs_on_the_next_tick_after_the_interval(tmp_path: Path, shm_dir: Path) -> None:
    clock = ManualClock()
    with _open(tmp_path, shm_dir, clock, flush_ms=100) as log:
        log.append(make_batch(0))
        assert log.segments_snapshot()[-1].unsynced_messages == 3
        clock.advance(100)
        log.tick()
        assert log.segments_snapshot()[-1].unsynced_messages == 0


def test_batches_pending_in_the_ring_are_readable(tmp_path: Path, shm_dir: Path) -> None:
    with _open(tmp_path, shm_dir, ring_flush_bytes=1 << 20) as log:
        for tag in range(4):
            log.append(make_batch(tag))
        assert log.segments_snapshot()[-1].size_bytes == 0  # all still in the ring
        assert [batch_tags(b)[0] for b in _all_batches(log)] == [0, 1, 2, 3]
    with _open(tmp_path, shm_dir) as log:
        assert log.log_end_offset == 12


def test_a_full_ring_flushes_instead_of_dropping(tmp_path: Path, shm_dir: Path) -> None:
    config = {"ring_bytes": 64 * 1024, "ring_flush_bytes": 1 << 30}
    with _open(tmp_path, shm_dir, **config) as log:
        for tag in range(40):
            log.append(make_batch(tag, record_count=10, value_bytes=500))
        assert [batch_tags(b)[0] for b in _all_batches(log)] == list(range(40))


def test_more_batches_pending_than_one_system_call_takes_all_reach_the_segment(
    tmp_path: Path, shm_dir: Path
) -> None:
    """pwritev refuses more than IOV_MAX buffers (EINVAL): a ring holding more small batches
    than that unflushed is written in several calls, not refused."""
    count = IOV_MAX * 2 + 5
    with _open(tmp_path, shm_dir, ring_bytes=1 << 20, ring_flush_bytes=1 << 30) as log:
        for tag in range(count):
            log.append(make_batch(tag % 100, record_count=1, value_bytes=10))
        assert log.segments_snapshot()[-1].size_bytes == 0  # all still in the ring
        log.flush()
        pending = log.segments_snapshot()[-1]
        assert pending.next_offset == count and log.flush_error is None
        flushed = _all_batches(log)
    with _open(tmp_path, shm_dir) as log:
        assert _all_batches(log) == flushed
        assert [batch_tags(b)[0] for b in flushed] == [tag % 100 for tag in range(count)]


def test_a_batch_larger_than_the_ring_goes_straight_to_the_segment(
    tmp_path: Path, shm_dir: Path
) -> None:
    with _open(tmp_path, shm_dir, ring_bytes=64 * 1024, max_message_bytes=1 << 20) as log:
        log.append(make_batch(0))
        log.append(make_batch(1, record_count=20, value_bytes=10_000))
        log.append(make_batch(2))
        tags = [tag for batch in _all_batches(log) for tag in batch_tags(batch)]
        assert tags == [0] * 3 + [1] * 20 + [2] * 3
        assert log.log_end_offset == 26


def test_replicated_batches_keep_their_offsets(tmp_path: Path, shm_dir: Path) -> None:
    with _open(tmp_path, shm_dir) as leader, _open(tmp_path / "f", shm_dir / "f") as follower:
        for tag in range(3):
            leader.append(make_batch(tag))
        for batch in _all_batches(leader):
            follower.append_replicated(batch)
        assert _all_batches(follower) == _all_batches(leader)
        with pytest.raises(ZlogError) as caught:
            follower.append_replicated(_all_batches(leader)[0])
        assert caught.value.code == ErrorCode.INVALID_REQUEST


def test_a_deferred_replicated_batch_waits_in_the_ring_for_tick(
    tmp_path: Path, shm_dir: Path
) -> None:
    with _open(tmp_path, shm_dir) as leader, _open(tmp_path / "f", shm_dir / "f") as follower:
        for tag in range(3):
            leader.append(make_batch(tag))
        copied = _all_batches(leader)
        follower.append_replicated(copied[0])  # write-through: in the segment at once
        written = follower.segments_snapshot()[-1].size_bytes
        assert written == len(copied[0])
        for batch in copied[1:]:
            follower.append_replicated(batch, defer_flush=True)
        assert follower.segments_snapshot()[-1].size_bytes == written  # still in the ring
        assert follower.log_end_offset == leader.log_end_offset == 9
        follower.tick()
        assert follower.segments_snapshot()[-1].size_bytes == sum(len(b) for b in copied)
        assert _all_batches(follower) == copied


def test_bad_batches_are_rejected_and_change_nothing(tmp_path: Path, shm_dir: Path) -> None:
    with _open(tmp_path, shm_dir, max_message_bytes=10_000) as log:
        log.append(make_batch(0))
        before = (_all_batches(log), log.log_end_offset)
        corrupt = bytearray(make_batch(1))
        corrupt[-1] ^= 0xFF
        too_big = make_batch(2, record_count=100, value_bytes=200)
        for bad, code in [
            (bytes(corrupt), ErrorCode.CORRUPT_MESSAGE),
            (too_big, ErrorCode.MESSAGE_TOO_LARGE),
            (b"\x00" * 10, ErrorCode.CORRUPT_MESSAGE),
        ]:
            with pytest.raises(ZlogError) as caught:
                log.append(bad)
            assert caught.value.code == code
            assert (_all_batches(log), log.log_end_offset) == before


def test_a_header_the_caller_validated_still_leaves_the_crc_to_the_log(
    tmp_path: Path, shm_dir: Path
) -> None:
    """The partition hands `append` the header it validated, so the log does not validate it
    again; the CRC is still checked on the log's copy, whichever way the batch goes (the ring,
    or straight to the segment when larger than the ring takes), and a header that does not
    describe the bytes is not trusted."""
    with _open(tmp_path, shm_dir, ring_bytes=64 * 1024) as log:
        good = make_batch(0)
        assert log.append(good, header=validate_batch(good, check_crc=False)) == 0
        before = (_all_batches(log), log.log_end_offset)
        through_ring, direct = bytearray(make_batch(1)), bytearray(make_batch(2, 200, 400))
        assert len(through_ring) < 32 * 1024 < len(direct)  # half the ring: the most it takes
        for bad in (through_ring, direct):
            bad[-1] ^= 0xFF
            with pytest.raises(ZlogError) as caught:
                log.append(bytes(bad), header=validate_batch(bad, check_crc=False))
            assert caught.value.code == ErrorCode.CORRUPT_MESSAGE
            assert (_all_batches(log), log.log_end_offset) == before
        with pytest.raises(ZlogError) as caught:
            log.append(b"\x00" * 10, header=validate_batch(good, check_crc=False))
        assert caught.value.code == ErrorCode.CORRUPT_MESSAGE
        assert log.append(make_batch(3), header=validate_batch(make_batch(3))) == 3
        assert [batch_tags(batch) for batch in _all_batches(log)] == [[0] * 3, [3] * 3]


def test_a_second_writer_is_refused(tmp_path: Path, shm_dir: Path) -> None:
    with _open(tmp_path, shm_dir), pytest.raises(RingLockedError) as caught:
        _open(tmp_path, shm_dir)
    assert caught.value.code == ErrorCode.KAFKA_STORAGE_ERROR


def test_delete_removes_data_and_ring(tmp_path: Path, shm_dir: Path) -> None:
    log = _open(tmp_path, shm_dir)
    log.append(make_batch(0))
    log.delete()
    assert not (tmp_path / "events-0").exists()
    assert not log.ring_path.exists()


def test_unknown_or_bad_topic_configs_are_invalid_config() -> None:
    assert LogConfig.from_topic_configs({"segment.bytes": "1024"}).segment_bytes == 1024
    for bad in ({"segment.bytez": "1"}, {"retention.ms": "soon"}, {"segment.bytes": "1"},
                {"cleanup.policy": "shred"}, {"ring.bytes": "65536"},
                {"ring.flush.bytes": "0"}, {"disk.share.bytes": "1024"}):
        with pytest.raises(ZlogError) as caught:
            LogConfig.from_topic_configs(bad)
        assert caught.value.code == ErrorCode.INVALID_CONFIG


def test_a_local_reader_of_the_ring_finds_no_deleted_record(
    tmp_path: Path, shm_dir: Path
) -> None:
    """The ring holds the latest batches for readers on this host (client/local_ring.py): once
    DeleteRecords moved the log start past some of them, the ring no longer offers them, and
    such a reader goes to the network, which answers OFFSET_OUT_OF_RANGE."""
    with _open(tmp_path, shm_dir) as log:
        for tag in range(6):
            log.append(make_batch(tag, record_count=1))
        log.publish_high_watermark(6)
        reader = LocalRing(log.ring_path)
        try:
            assert reader.covers(0)
            assert log.delete_records_before(4) == 4
            assert not reader.covers(3)
            log.append(make_batch(6, record_count=1))
            assert reader.covers(6)
        finally:
            reader.close()


def _first_of_max(stamped: list[tuple[int, int]], start: int, upto: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of the largest timestamp in [start, upto)."""
    inside = [(offset, stamp) for offset, stamp in stamped if start <= offset < upto]
    if not inside:
        return None
    largest = max(stamp for _, stamp in inside)
    return next((offset, stamp) for offset, stamp in inside if stamp == largest)


@pytest.mark.parametrize("seed", range(12))
def test_max_timestamp_record_is_the_first_of_the_largest_timestamp(
    tmp_path: Path, shm_dir: Path, seed: int
) -> None:
    """Over out-of-order timestamps with ties, several segments with indexes of a few entries
    each (sealed ones read back from disk after a reopen), a log start moving inside segments
    and batches and bounds cutting batches: the answer is what reading every record gives."""
    rng = np.random.default_rng(seed)
    size = len(make_batch(0, record_count=3))
    config = {"segment_bytes": size * 6, "index_interval_bytes": size}
    stamped: list[tuple[int, int]] = []
    with _open(tmp_path, shm_dir, **config) as log:
        assert log.max_timestamp_record(log.log_end_offset) is None, "an empty log"
        for _ in range(30):
            stamps = rng.integers(1_000, 1_040, size=int(rng.integers(1, 6)))
            values = [b"v" * 20] * len(stamps)
            base = log.append(build_batch_from_values(values, timestamp_ms=stamps))
            stamped += [(base + i, int(stamp)) for i, stamp in enumerate(stamps)]
        log.publish_high_watermark(log.log_end_offset)
        assert log.segment_count > 3
    with _open(tmp_path, shm_dir, **config) as log:
        log.publish_high_watermark(log.log_end_offset)
        end = log.log_end_offset
        for start in sorted(int(s) for s in rng.integers(0, end, size=4)):
            log.delete_records_before(start)
            for upto in {end, *(int(u) for u in rng.integers(start, end + 1, size=4))}:
                assert log.max_timestamp_record(upto) == _first_of_max(stamped, start, upto), \
                    (start, upto)
        log.delete_records_before(end)
        assert log.max_timestamp_record(end) is None, "every record deleted"
