"""The recent-batches table answers consumers exactly as `PartitionLog.read` would, or not at all.

The checks run over the real log with tiny segments, so that reads cross segment rolls, and
compare every answer the table gives with the log's own, frame by frame.
"""

from __future__ import annotations

import random
from pathlib import Path

from tests.storage_helpers import make_batch
from zlog import limits
from zlog.broker.data.isr import ReplicaSet
from zlog.broker.data.partition import Partition
from zlog.broker.data.recent_batches import RecentBatches
from zlog.errors import ErrorCode
from zlog.record.header import stamp
from zlog.record.records import NewRecord, build_batch
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig

T0_MS = 1_700_000_000_000
# Segments of a few batches each, and index entries every few batches: reads cross rolls, and
# the log's index lookups take both of their paths.
SMALL_SEGMENTS = LogConfig(ring_bytes=256 * 1024, segment_bytes=1200, index_interval_bytes=300)


def _append(log: PartitionLog, recent: RecentBatches, batch: bytes, epoch: int = 1) -> None:
    """What `Partition` does around an append: note the stored form and the segment counts."""
    count_before = log.segment_count
    base = log.append(batch, leader_epoch=epoch)
    stored = bytearray(batch)
    stamp(stored, base, epoch)
    next_offset = base + int.from_bytes(batch[23:27], "big") + 1
    recent.note_appended(base, next_offset, stored, (count_before, log.segment_count))


def _frames(chunks: list[memoryview] | None) -> list[bytes] | None:
    return None if chunks is None else [bytes(chunk) for chunk in chunks]


def test_every_answer_is_the_logs_own_across_segment_rolls(tmp_path: Path, shm_dir: Path) -> None:
    rng = random.Random(7)
    recent = RecentBatches()
    answered = 0
    with PartitionLog(tmp_path, "t", 0, SMALL_SEGMENTS, ring_dir=shm_dir) as log:
        for tag in range(120):
            batch = make_batch(tag, rng.randint(1, 4), rng.choice([5, 40, 150]), T0_MS + tag)
            _append(log, recent, batch)
            end = log.log_end_offset
            for _ in range(6):
                offset = rng.randint(max(0, end - 40), end - 1)
                upto = rng.randint(offset + 1, end)
                max_bytes = rng.choice([0, 1, 100, 400, 1000, 1 << 20])
                mine = recent.read(offset, max_bytes, upto, log_end_offset=end,
                                   segment_count=log.segment_count)
                if mine is not None:
                    answered += 1
                    assert _frames(mine) == _frames(log.read(offset, max_bytes, upto)), (
                        tag, offset, upto, max_bytes)
        assert log.segment_count > 20, "the scenario crosses many segment rolls"
    assert answered > 300, "most reads near the tail are answered from the table"


def test_it_answers_nothing_once_the_log_moved_on_without_it(
    tmp_path: Path, shm_dir: Path
) -> None:
    recent = RecentBatches()
    with PartitionLog(tmp_path, "t", 0, SMALL_SEGMENTS, ring_dir=shm_dir) as log:
        for tag in range(3):
            _append(log, recent, make_batch(tag, 2))
        end = log.log_end_offset
        assert recent.read(2, 1 << 20, end, log_end_offset=end,
                           segment_count=log.segment_count) is not None
        log.append(make_batch(3, 2))  # appended behind the table's back
        assert recent.read(2, 1 << 20, end, log_end_offset=log.log_end_offset,
                           segment_count=log.segment_count) is None
        log.roll()  # the segments changed between two appends: the next one starts afresh
        _append(log, recent, make_batch(4, 2))
        assert len(recent) == 1
        assert recent.read(end, 1 << 20, log.log_end_offset, log_end_offset=log.log_end_offset,
                           segment_count=log.segment_count) is None, "before the first kept"


def test_a_roll_between_two_appends_is_not_mistaken_for_one_segment(
    tmp_path: Path, shm_dir: Path
) -> None:
    """The log returns a frame per segment; a roll it made between appends splits the frames."""
    recent = RecentBatches()
    with PartitionLog(tmp_path, "t", 0, LogConfig(ring_bytes=64 * 1024), ring_dir=shm_dir) as log:
        _append(log, recent, make_batch(0, 2))
        _append(log, recent, make_batch(1, 2))
        log.roll()
        _append(log, recent, make_batch(2, 2))
        end = log.log_end_offset
        for offset in range(end):
            mine = recent.read(offset, 1 << 20, end, log_end_offset=end,
                               segment_count=log.segment_count)
            assert mine is None or _frames(mine) == _frames(log.read(offset, 1 << 20, end))
        assert len(log.read(0, 1 << 20, end)) == 2, "two segments, two frames"


def test_a_high_watermark_inside_a_batch_is_left_to_the_log() -> None:
    recent = RecentBatches()
    recent.note_appended(0, 3, make_batch(0, 3), (1, 1))
    recent.note_appended(3, 6, make_batch(1, 3), (1, 1))
    assert recent.read(0, 1 << 20, 4, log_end_offset=6, segment_count=1) is None
    answer = recent.read(0, 1 << 20, 3, log_end_offset=6, segment_count=1)
    assert _frames(answer) == [make_batch(0, 3)]


def test_it_stays_within_its_bounds() -> None:
    recent = RecentBatches()
    big = make_batch(0, 1, limits.RECENT_BATCHES_BYTES_MAX // 3)
    for tag in range(5):
        recent.note_appended(tag, tag + 1, big, (1, 1))
    assert len(recent) == 2, "bounded by bytes"
    small = RecentBatches()
    for offset in range(limits.RECENT_BATCHES_MAX + 10):
        small.note_appended(offset, offset + 1, make_batch(offset, 1, 1), (1, 1))
    assert len(small) == limits.RECENT_BATCHES_MAX, "bounded by batches"
    assert small.end_offset == limits.RECENT_BATCHES_MAX + 10
    small.note_appended(limits.RECENT_BATCHES_MAX + 11, limits.RECENT_BATCHES_MAX + 12,
                        make_batch(0, 1), (1, 1))
    assert len(small) == 1, "a gap starts the table afresh"


def _partition_reads_match(partition: Partition, log: PartitionLog, rng: random.Random) -> int:
    """Partition.read against the same read made of the log alone; returns reads answered."""
    hw = partition.high_watermark
    compared = 0
    for offset in range(max(log.log_start_offset, hw - 12), hw + 1):
        for limit_bytes in (0, 150, 600, 1 << 20):
            at_least_one = rng.random() < 0.7
            got = partition.read(offset, limit_bytes, replica_id=-1, at_least_one=at_least_one)
            chunks = log.read(offset, limit_bytes, hw)
            if not at_least_one and sum(c.nbytes for c in chunks) > limit_bytes:
                chunks = []
            assert got.error_code == ErrorCode.NONE
            assert (got.high_watermark, got.log_start_offset) == (
                partition.client_high_watermark, log.log_start_offset)
            assert _frames(list(got.chunks)) == _frames(chunks), (offset, limit_bytes)
            compared += 1
    return compared


def test_partition_reads_are_unchanged(tmp_path: Path, shm_dir: Path) -> None:
    """Through `Partition`: consumers, a lagging high watermark, records deleted, new epochs."""
    rng = random.Random(3)
    three = ReplicaSet(0, frozenset({0, 1, 2}), frozenset({0, 1}))
    with PartitionLog(tmp_path, "t", 0, SMALL_SEGMENTS, ring_dir=shm_dir) as log:
        partition = Partition("t", 0, log, leader_epoch=1, replicas=three)
        for tag in range(60):
            batch = make_batch(tag, rng.randint(1, 3), rng.choice([10, 90]), T0_MS + tag)
            assert partition.produce([batch], acks=1).error_code == ErrorCode.NONE
            follower_at = rng.randint(partition.high_watermark, log.log_end_offset)
            partition.note_replica_fetch(1, follower_at, now_ms=0, broker_epoch=1,
                                         log_start_offset=0)
            if tag == 30:
                log.delete_records_before(partition.high_watermark - 5)
            if tag == 45:
                partition.become(leader_epoch=2, is_leader=True)
            _partition_reads_match(partition, log, rng)


def test_a_compacted_partition_reads_the_log(tmp_path: Path, shm_dir: Path) -> None:
    with PartitionLog(tmp_path, "t", 0, SMALL_SEGMENTS, ring_dir=shm_dir) as log:
        partition = Partition("t", 0, log, leader_epoch=1, compacted=True)
        keyed = build_batch([NewRecord(b"v", key=b"k", timestamp_ms=T0_MS)])
        assert partition.produce([keyed], acks=1).error_code == ErrorCode.NONE
        assert _partition_reads_match(partition, log, random.Random(1)) > 0
