"""Which segments retention deletes: by age, by total size, and by disk fullness.

Pure: the log passes in its segment listing, the time and the disk figures, and deletes the
oldest `count` segments it gets back. Every rule deletes a prefix of the log (oldest first)
and the active segment is never part of it, so the answer is one number.

`retention.disk.percent` keeps the disk below N% full. Each partition frees, on its own,
what the whole disk is over the limit, oldest first; with many partitions on one disk this
frees more than strictly needed, which errs on the side of never filling the disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp_ms: int  # -1 when the segment holds no timestamps


@dataclass(frozen=True, slots=True)
class DiskUsage:
    total_bytes: int
    used_bytes: int

    @property
    def used_percent(self) -> float:
        return 100.0 * self.used_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    retention_ms: int = -1  # -1: keep regardless of age
    retention_bytes: int = -1  # -1: keep regardless of size
    retention_disk_percent: float = -1.0  # -1: no disk limit; else keep the disk below this %


def segments_to_delete(
    sealed: Sequence[SegmentInfo],
    active_size_bytes: int,
    policy: RetentionPolicy,
    now_ms: int,
    disk: DiskUsage | None = None,
) -> int:
    """How many of the oldest sealed segments to delete (the active one is never counted)."""
    by_age = _count_by_age(sealed, policy.retention_ms, now_ms)
    by_size = _count_by_size(sealed, active_size_bytes, policy.retention_bytes)
    by_disk = _count_by_disk(sealed, policy.retention_disk_percent, disk)
    count = max(by_age, by_size, by_disk)
    assert 0 <= count <= len(sealed)
    return count


def _count_by_age(sealed: Sequence[SegmentInfo], retention_ms: int, now_ms: int) -> int:
    if retention_ms < 0:
        return 0
    count = 0
    for info in sealed:
        if now_ms - info.max_timestamp_ms <= retention_ms:
            break
        count += 1
    return count


def _count_by_size(
    sealed: Sequence[SegmentInfo], active_size_bytes: int, retention_bytes: int
) -> int:
    if retention_bytes < 0:
        return 0
    total_bytes = active_size_bytes + sum(info.size_bytes for info in sealed)
    count = 0
    for info in sealed:
        if total_bytes - info.size_bytes < retention_bytes:
            break
        total_bytes -= info.size_bytes
        count += 1
    return count


def _count_by_disk(
    sealed: Sequence[SegmentInfo], limit_percent: float, disk: DiskUsage | None
) -> int:
    if limit_percent < 0 or disk is None or disk.used_percent <= limit_percent:
        return 0
    to_free_bytes = disk.used_bytes - int(disk.total_bytes * limit_percent / 100.0)
    count = 0
    for info in sealed:
        if to_free_bytes <= 0:
            break
        to_free_bytes -= info.size_bytes
        count += 1
    return count
