"""Sparse indexes: binary search over numpy arrays, and their on-disk form."""

from __future__ import annotations

from pathlib import Path

from zlog.shm_segments.index import (
    OFFSET_ENTRY,
    TIME_ENTRY,
    SparseIndex,
    is_consistent,
    lookup_position,
    lookup_position_at_or_before,
    lookup_time,
)


def _offsets(pairs: list[tuple[int, int]]) -> SparseIndex:
    index = SparseIndex(OFFSET_ENTRY)
    for relative, position in pairs:
        index.append(relative, position)
    return index


def test_lookup_finds_the_last_entry_at_or_before_the_offset() -> None:
    index = _offsets([(0, 0), (10, 4096), (20, 8192)])
    assert lookup_position(index, 0) == 0
    assert lookup_position(index, 9) == 0
    assert lookup_position(index, 10) == 4096
    assert lookup_position(index, 25) == 8192
    assert lookup_position(SparseIndex(OFFSET_ENTRY), 5) == 0


def test_lookup_by_position_bound() -> None:
    index = _offsets([(0, 0), (10, 4096), (20, 8192)])
    assert lookup_position_at_or_before(index, 5000) == 4096
    assert lookup_position_at_or_before(index, 8192) == 8192
    assert lookup_position_at_or_before(index, 100) == 0


def test_time_lookup_starts_before_the_first_entry_reaching_the_timestamp() -> None:
    index = SparseIndex(TIME_ENTRY)
    for stamp, relative, position in [(100, 0, 0), (200, 10, 4096), (300, 20, 8192)]:
        index.append(stamp, relative, position)
    assert lookup_time(index, 50) == 0
    assert lookup_time(index, 150) == 0
    assert lookup_time(index, 250) == 4096
    assert lookup_time(index, 999) == 8192


def test_index_grows_past_its_initial_capacity(tmp_path: Path) -> None:
    index = _offsets([(i, i * 100) for i in range(1000)])
    assert len(index) == 1000
    index.write(tmp_path / "x.index")
    loaded = SparseIndex.read(tmp_path / "x.index", OFFSET_ENTRY)
    assert loaded is not None
    assert loaded.entries.tolist() == index.entries.tolist()


def test_a_partial_file_is_not_an_index(tmp_path: Path) -> None:
    (tmp_path / "x.index").write_bytes(b"\x00" * 13)
    assert SparseIndex.read(tmp_path / "x.index", OFFSET_ENTRY) is None
    assert SparseIndex.read(tmp_path / "missing.index", OFFSET_ENTRY) is None


def test_consistency_rejects_entries_past_the_segment_or_out_of_order() -> None:
    times = SparseIndex(TIME_ENTRY)
    good = _offsets([(0, 0), (10, 4096)])
    assert is_consistent(good, times, size_bytes=5000, offset_span=20)
    assert not is_consistent(good, times, size_bytes=4096, offset_span=20)
    assert not is_consistent(good, times, size_bytes=5000, offset_span=10)
    backwards = _offsets([(0, 4096), (10, 0)])
    assert not is_consistent(backwards, times, size_bytes=9000, offset_span=20)


def test_truncate_at_position_drops_entries_from_there() -> None:
    index = _offsets([(0, 0), (10, 4096), (20, 8192)])
    index.truncate_at_position(4096)
    assert index.entries["position"].tolist() == [0]
