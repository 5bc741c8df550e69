"""Sparse offset and time indexes of one segment: numpy arrays in memory and on disk.

One entry is added every `index.interval.bytes` of log data, so an index is about 1/500th of
its segment and a lookup is one `np.searchsorted` plus a short walk of batch headers. The
active segment keeps its index in memory only: recovery rebuilds it from the one segment it
scans anyway, so a crash can never leave an index that disagrees with its log. A sealed
segment's index is written once, when the segment is sealed, and checked when first used.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zlog.shm_segments.durable_files import replace_atomically

# Offsets are relative to the segment's base offset (uint32, as in Kafka) and positions are
# byte positions in the .log file (uint32: segment.bytes is at most 2 GiB).
OFFSET_ENTRY = np.dtype([("relative_offset", "<u4"), ("position", "<u4")])
# Each time entry: the largest timestamp seen up to and including the indexed batch, and where
# that batch starts. The running maximum is monotonic, so it can be binary searched.
TIME_ENTRY = np.dtype([("timestamp_ms", "<i8"), ("relative_offset", "<u4"), ("position", "<u4")])

_INITIAL_CAPACITY = 64


class SparseIndex:
    """A growable, append-only array of index entries of one dtype."""

    def __init__(self, dtype: np.dtype, entries: np.ndarray | None = None) -> None:
        self.dtype = dtype
        if entries is None:
            self._array = np.zeros(_INITIAL_CAPACITY, dtype=dtype)
            self._count = 0
        else:
            assert entries.dtype == dtype
            self._array = entries
            self._count = len(entries)

    def __len__(self) -> int:
        return self._count

    @property
    def entries(self) -> np.ndarray:
        return self._array[: self._count]

    def append(self, *fields: int) -> None:
        if self._count == len(self._array):
            grown = np.zeros(len(self._array) * 2, dtype=self.dtype)
            grown[: self._count] = self._array[: self._count]
            self._array = grown
        self._array[self._count] = fields
        self._count += 1

    def truncate_at_position(self, position: int) -> None:
        """Drop entries that point at or past `position` (the log was cut there)."""
        keep = int(np.searchsorted(self.entries["position"], position, side="left"))
        assert keep <= self._count
        self._count = keep

    def write(self, path: Path) -> None:
        """Write atomically: a reader after a crash sees the old file or the whole new one."""
        replace_atomically(path, self.entries.tobytes())

    @classmethod
    def read(cls, path: Path, dtype: np.dtype) -> SparseIndex | None:
        """The index stored at `path`, or None when it is missing or not a whole array."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        if len(raw) % dtype.itemsize != 0:
            return None
        entries = np.frombuffer(raw, dtype=dtype).copy()
        return cls(dtype, entries)


def lookup_position(index: SparseIndex, relative_offset: int) -> int:
    """Start of the last indexed batch whose base is at or before `relative_offset` (else 0)."""
    entries = index.entries
    slot = int(np.searchsorted(entries["relative_offset"], relative_offset, side="right")) - 1
    return 0 if slot < 0 else int(entries["position"][slot])


def lookup_position_at_or_before(index: SparseIndex, position_max: int) -> int:
    """The last indexed batch boundary at or before `position_max` (else 0)."""
    entries = index.entries
    slot = int(np.searchsorted(entries["position"], position_max, side="right")) - 1
    return 0 if slot < 0 else int(entries["position"][slot])


def lookup_time(index: SparseIndex, timestamp_ms: int) -> int:
    """Where to start scanning for the first batch whose max timestamp is >= timestamp_ms.

    Entry k's running maximum is >= timestamp_ms, so the batch we want starts after entry k-1's
    batch; starting the walk at entry k-1 is therefore safe.
    """
    entries = index.entries
    slot = int(np.searchsorted(entries["timestamp_ms"], timestamp_ms, side="left")) - 1
    return 0 if slot < 0 else int(entries["position"][slot])


def running_max_before(index: SparseIndex, position: int) -> tuple[int, int] | None:
    """(the running maximum timestamp, the batch's start) of the last time entry whose batch
    starts before `position`: the largest timestamp of every batch up to and including that
    one. None when no entry's batch starts there."""
    entries = index.entries
    slot = int(np.searchsorted(entries["position"], position, side="left")) - 1
    if slot < 0:
        return None
    return int(entries["timestamp_ms"][slot]), int(entries["position"][slot])


_BASE_OFFSET_BYTES = 8  # a batch starts with its base offset, an int64


def is_consistent(
    offsets: SparseIndex, times: SparseIndex, size_bytes: int, offset_span: int
) -> bool:
    """Whether a loaded index can be trusted for a segment of this size and offset span."""
    for index in (offsets, times):
        entries = index.entries
        if len(entries) == 0:
            continue
        positions = entries["position"].astype(np.int64)
        relative = entries["relative_offset"].astype(np.int64)
        if positions[-1] >= size_bytes or relative[-1] >= offset_span:
            return False
        if np.any(np.diff(positions) <= 0) or np.any(np.diff(relative) < 0):
            return False
    time_values = times.entries["timestamp_ms"]
    return not (len(time_values) > 1 and np.any(np.diff(time_values) < 0))


def points_at_batches(index: SparseIndex, segment: memoryview, base_offset: int) -> bool:
    """Whether every entry's position starts a batch whose base offset is the entry's: a
    byte flipped in an index file can leave it ordered and in bounds (`is_consistent`) while
    it points into the middle of a batch, where a read would start serving garbage."""
    entries = index.entries
    if len(entries) == 0:
        return True
    positions = entries["position"].astype(np.int64)
    if positions[-1] + _BASE_OFFSET_BYTES > segment.nbytes:
        return False
    raw = np.frombuffer(segment, dtype=np.uint8)
    gathered = raw[positions[:, None] + np.arange(_BASE_OFFSET_BYTES)]
    bases = np.ascontiguousarray(gathered).view(">i8").ravel().astype(np.int64)
    relative = entries["relative_offset"].astype(np.int64)
    return bool(np.array_equal(bases - base_offset, relative))
