"""Recovery cuts a torn or corrupt tail of the active segment at the last CRC-valid batch."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.storage_helpers import batch_tags, make_batch, split_batches
from zlog.record.header import Compression
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig

_SEGMENT = f"{0:020d}.log"


_SMALL_RING = LogConfig(ring_bytes=64 * 1024)  # opening maps and faults in the whole ring


def _write_log(data_dir: Path, shm_dir: Path, batches: list[bytes]) -> list[int]:
    with PartitionLog(data_dir, "t", 0, _SMALL_RING, ring_dir=shm_dir) as log:
        return [log.append(batch) for batch in batches]


def _recover(data_dir: Path) -> tuple[list[int], int, int]:
    """Open a copy of the log with a fresh ring: tags read back, log end, bytes dropped."""
    shm = Path(tempfile.mkdtemp(prefix="zlog-rec-", dir="/dev/shm"))
    try:
        with PartitionLog(data_dir, "t", 0, _SMALL_RING, ring_dir=shm) as log:
            tags = [batch_tags(b)[0] for b in split_batches(log.read(0, 1 << 30))]
            return tags, log.log_end_offset, log.recovered_bytes_dropped
    finally:
        shutil.rmtree(shm, ignore_errors=True)


@settings(max_examples=25, deadline=None)
@given(
    counts=st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=4),
    compression=st.sampled_from([Compression.NONE, Compression.LZ4]),
)
def test_a_cut_at_every_byte_of_the_last_batch_keeps_exactly_the_batches_before(
    counts: list[int], compression: Compression
) -> None:
    work = Path(tempfile.mkdtemp(prefix="zlog-rec-"))
    shm = Path(tempfile.mkdtemp(prefix="zlog-rec-", dir="/dev/shm"))
    try:
        batches = [
            make_batch(tag, record_count=n, compression=compression) for tag, n in enumerate(counts)
        ]
        bases = _write_log(work / "orig", shm, batches)
        segment_path = work / "orig" / "t-0" / _SEGMENT
        whole = segment_path.read_bytes()
        last_start = len(whole) - len(batches[-1])
        for cut in range(last_start, len(whole)):
            copy = work / f"cut-{cut}"
            (copy / "t-0").mkdir(parents=True)
            (copy / "t-0" / _SEGMENT).write_bytes(whole[:cut])
            tags, end, dropped = _recover(copy)
            assert tags == list(range(len(batches) - 1)), cut
            assert end == bases[-1]
            assert dropped == cut - last_start
            shutil.rmtree(copy)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


def test_a_corrupt_batch_and_everything_after_it_are_dropped(tmp_path: Path, shm_dir: Path) -> None:
    batches = [make_batch(tag) for tag in range(4)]
    _write_log(tmp_path, shm_dir, batches)
    segment_path = tmp_path / "t-0" / _SEGMENT
    raw = bytearray(segment_path.read_bytes())
    third = sum(len(b) for b in batches[:2])
    raw[third + 70] ^= 0x01  # inside the records of the third batch: its CRC fails
    segment_path.write_bytes(bytes(raw))
    tags, end, dropped = _recover(tmp_path)
    assert tags == [0, 1]
    assert end == 6
    assert dropped == len(batches[2]) + len(batches[3])


def test_recovery_then_appends_continue_at_the_cut(tmp_path: Path, shm_dir: Path) -> None:
    batches = [make_batch(tag) for tag in range(3)]
    _write_log(tmp_path, shm_dir, batches)
    segment_path = tmp_path / "t-0" / _SEGMENT
    segment_path.write_bytes(segment_path.read_bytes()[:-5])
    with PartitionLog(tmp_path, "t", 0, ring_dir=shm_dir / "again") as log:
        assert log.append(make_batch(9)) == 6
        assert [batch_tags(b)[0] for b in split_batches(log.read(0, 1 << 20))] == [0, 1, 9]
