"""A batch that rots in a sealed segment is found by its CRC and never served.

Spec: docs/storage.md ("Recovery and opening time"). Real files: a log of several sealed
segments is closed, one byte in the middle of its oldest segment is flipped, and it is opened
again, as a broker restarting on a damaged disk would.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.storage_helpers import batch_tags, make_batch, split_batches
from zlog.errors import CorruptSegmentError, ErrorCode
from zlog.shm_segments.index import OFFSET_ENTRY
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig

CONFIG = LogConfig(ring_bytes=64 * 1024, segment_bytes=4096)
RECORDS = 2  # per batch
BATCHES = 40  # ~500 bytes each, eight to a segment: five segments


def _tags(log: PartitionLog, offset: int) -> list[int]:
    return [batch_tags(b)[0] for b in split_batches(log.read(offset, 1 << 30))]


def _written(data_dir: Path, shm_dir: Path) -> list[Path]:
    with PartitionLog(data_dir, "t", 0, CONFIG, ring_dir=shm_dir) as log:
        for tag in range(BATCHES):
            log.append(make_batch(tag, RECORDS, 200))
        assert log.segment_count >= 4
    return sorted((data_dir / "t-0").glob("*.log"))


def _fresh_ring(shm_dir: Path) -> Path:
    """A ring directory of its own: the old ring still holds every batch, whole, and a
    read of what it holds is served from it."""
    ring_dir = shm_dir / "reopened"
    ring_dir.mkdir(exist_ok=True)
    return ring_dir


def _flip_byte(segment: Path, past_middle: int) -> None:
    data = bytearray(segment.read_bytes())
    data[len(data) // 2 + past_middle] ^= 0x40
    segment.write_bytes(bytes(data))


@pytest.mark.parametrize("past_middle", [0, 100], ids=["base-offset", "record"])
def test_a_corrupt_batch_is_never_read_and_names_the_offset_to_fetch_again(
        tmp_path: Path, shm_dir: Path, past_middle: int) -> None:
    """The middle byte of the segment starts a batch's base offset, which the CRC does not
    cover (the order of offsets is checked instead); 100 bytes on it is inside a record."""
    segments = _written(tmp_path, shm_dir)
    _flip_byte(segments[1], past_middle)
    with PartitionLog(tmp_path, "t", 0, CONFIG, ring_dir=_fresh_ring(shm_dir)) as log:
        assert log.log_end_offset == BATCHES * RECORDS  # opening checks the active one only
        second_base = int(segments[1].stem)
        assert _tags(log, 0)[-1] == second_base // RECORDS - 1  # the whole segment before
        with pytest.raises(CorruptSegmentError) as refused:
            log.read(second_base, 1 << 30)  # the corrupt segment is refused whole
        error = refused.value
        assert error.code == ErrorCode.KAFKA_STORAGE_ERROR and "CRC" in error.message
        assert second_base < error.offset < int(segments[2].stem)  # its first bad batch
        with pytest.raises(CorruptSegmentError):  # again, from the first scan's result
            log.read(error.offset, 100)
        assert _tags(log, int(segments[2].stem))  # later segments are served
        with pytest.raises(CorruptSegmentError) as scanned:
            while not log.verify_sealed(1024):
                pass
        assert scanned.value.offset == error.offset

        log.truncate_to(error.offset)  # a follower's cut: the rest is fetched again
        assert log.log_end_offset == error.offset
        assert log.verify_sealed(1 << 20)
        assert _tags(log, 0) == list(range(error.offset // RECORDS))


def test_whole_sealed_segments_pass_the_check_in_small_steps(
        tmp_path: Path, shm_dir: Path) -> None:
    _written(tmp_path, shm_dir)
    with PartitionLog(tmp_path, "t", 0, CONFIG, ring_dir=_fresh_ring(shm_dir)) as log:
        steps = 0
        while not log.verify_sealed(700):  # less than two batches a step
            steps += 1
            assert steps < 100
        assert steps >= 5
        assert _tags(log, 0) == list(range(BATCHES))


def test_a_batch_larger_than_the_step_is_checked_whole(
        tmp_path: Path, shm_dir: Path) -> None:
    with PartitionLog(tmp_path, "t", 0, CONFIG, ring_dir=shm_dir) as log:
        for tag in range(4):
            log.append(make_batch(tag, RECORDS, 1000))  # one ~2 KB batch per segment
    with PartitionLog(tmp_path, "t", 0, CONFIG, ring_dir=_fresh_ring(shm_dir)) as log:
        steps = 0
        while not log.verify_sealed(100):
            steps += 1
            assert steps < 10
        assert _tags(log, 0) == list(range(4))


def test_an_index_entry_pointing_into_a_batch_is_rebuilt_not_followed(
        tmp_path: Path, shm_dir: Path) -> None:
    """A flipped position byte can keep the index ordered and in bounds; the entries are
    checked against the batches they point at, and the index rebuilt."""
    with PartitionLog(tmp_path, "t", 0, replace(CONFIG, index_interval_bytes=0),
                      ring_dir=shm_dir) as log:
        for tag in range(BATCHES):
            log.append(make_batch(tag, RECORDS, 200))
    index = sorted((tmp_path / "t-0").glob("*.index"))[0]
    entries = np.fromfile(index, dtype=OFFSET_ENTRY)
    assert len(entries) >= 4  # an entry per batch
    entries["position"][2] += 1  # still between its neighbours, now inside a batch
    entries.tofile(index)
    with PartitionLog(tmp_path, "t", 0, CONFIG, ring_dir=_fresh_ring(shm_dir)) as log:
        assert _tags(log, 4) == list(range(2, BATCHES))  # from the batch holding offset 4
    rebuilt = np.fromfile(index, dtype=OFFSET_ENTRY)
    assert entries["position"][2] not in rebuilt["position"]  # rebuilt on disk


def test_recovery_cuts_the_active_segment_at_a_rotted_base_offset(
        tmp_path: Path, shm_dir: Path) -> None:
    """Recovery's CRC check does not cover the base offset; a batch whose offset is out of
    place ends the valid prefix like a failed CRC (it used to be indexed, and one beyond
    what a segment's u4 index holds stopped the log from opening)."""
    with PartitionLog(tmp_path, "t", 0, CONFIG, ring_dir=shm_dir) as log:
        bases = [log.append(make_batch(tag, RECORDS, 200)) for tag in range(4)]
    (active,) = sorted((tmp_path / "t-0").glob("*.log"))
    data = bytearray(active.read_bytes())
    third = data.index(bases[2].to_bytes(8, "big"), 1)  # the third batch's base offset
    data[third] ^= 0x10  # its high byte
    active.write_bytes(bytes(data))
    with PartitionLog(tmp_path, "t", 0, CONFIG, ring_dir=_fresh_ring(shm_dir)) as log:
        assert log.log_end_offset == bases[2]
        assert log.recovered_bytes_dropped > 0
        assert _tags(log, 0) == [0, 1]
