"""Which segments retention deletes: by age, by total size, and by the partition's disk share.

Pure: the log passes in its segment listing, the time and its high watermark, and deletes the
oldest `count` segments it gets back. Every rule deletes a prefix of the log (oldest first) and
the active segment is never part of it, so the answer is one number.

Whatever the rules say, only segments wholly below the high watermark go (Kafka's
`UnifiedLog.deletableSegments`: a segment's next offset at most the HW). A record at or above it
may not be on every in-sync replica yet: deleting it would move the log start past the HW, and a
leader takes its log start as a floor for its HW, so acks=all batches held by the leader alone
would be acknowledged, and gone. A follower's HW lags its leader's, which only makes it keep a
little more. Segments due but above the HW wait: `segments_due` tells the log how many, so it
can say so while its followers hold retention back.

`retention.bytes` follows Kafka: a segment goes only if what stays is still at least the limit,
so the log keeps at least that much and may exceed it by less than a segment. The disk share
(the partition's part of its topic's `retention.disk.percent` budget, `disk_budget.py` in the
broker) is a ceiling instead: segments go until what stays fits in the share, because the
share exists to bound the disk a topic takes, and only the active segment may stay above it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp_ms: int  # -1 when the segment holds no timestamps


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    retention_ms: int = -1  # -1: keep regardless of age
    retention_bytes: int = -1  # -1: keep regardless of size
    disk_share_bytes: int = -1  # -1: no disk share; else keep the log within this many bytes


def segments_to_delete(
    sealed: Sequence[SegmentInfo],
    active_size_bytes: int,
    policy: RetentionPolicy,
    now_ms: int,
    *,
    upto_offset: int,
) -> int:
    """How many of the oldest sealed segments to delete: those the policy says are due, up to
    the last one wholly below `upto_offset` (the high watermark, or less) - the active one is
    never counted. The log calls the two halves itself, to say what the HW holds back."""
    return wholly_below(sealed, segments_due(sealed, active_size_bytes, policy, now_ms),
                        upto_offset)


def wholly_below(sealed: Sequence[SegmentInfo], count: int, upto_offset: int) -> int:
    """How many of the first `count` sealed segments end at or below `upto_offset`."""
    below = 0
    while below < count and sealed[below].next_offset <= upto_offset:
        below += 1
    return below


def segments_due(
    sealed: Sequence[SegmentInfo],
    active_size_bytes: int,
    policy: RetentionPolicy,
    now_ms: int,
) -> int:
    """How many of the oldest sealed segments the policy alone would delete."""
    by_age = _count_by_age(sealed, policy.retention_ms, now_ms)
    by_size = _count_by_size(sealed, active_size_bytes, policy.retention_bytes)
    by_share = _count_by_share(sealed, active_size_bytes, policy.disk_share_bytes)
    count = max(by_age, by_size, by_share)
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
    return _count_oldest_while(
        sealed, active_size_bytes, lambda total, size: total - size >= retention_bytes
    )


def _count_by_share(
    sealed: Sequence[SegmentInfo], active_size_bytes: int, share_bytes: int
) -> int:
    if share_bytes < 0:
        return 0
    return _count_oldest_while(sealed, active_size_bytes, lambda total, size: total > share_bytes)


def _count_oldest_while(
    sealed: Sequence[SegmentInfo],
    active_size_bytes: int,
    deletes: Callable[[int, int], bool],
) -> int:
    """How many oldest segments go while `deletes(log bytes now, oldest segment's bytes)`."""
    total_bytes = active_size_bytes + sum(info.size_bytes for info in sealed)
    count = 0
    for info in sealed:
        if not deletes(total_bytes, info.size_bytes):
            break
        total_bytes -= info.size_bytes
        count += 1
    return count
