"""Retention picks the oldest sealed segments by age, size and the partition's disk share
(`segments_due`), and deletes only those wholly below the high watermark
(`segments_to_delete`)."""

from __future__ import annotations

from zlog.shm_segments.retention import (
    RetentionPolicy,
    SegmentInfo,
    segments_due,
    segments_to_delete,
)

NOW_MS = 1_000_000


def _segments(count: int, size_bytes: int = 100, age_step_ms: int = 1000) -> list[SegmentInfo]:
    # Oldest first: segment i's newest record is (count - i) steps old.
    return [
        SegmentInfo(i * 10, i * 10 + 10, size_bytes, NOW_MS - (count - i) * age_step_ms)
        for i in range(count)
    ]


def test_nothing_is_deleted_without_limits() -> None:
    assert segments_due(_segments(5), 100, RetentionPolicy(), NOW_MS) == 0


def test_age_deletes_the_prefix_older_than_retention_ms() -> None:
    # Ages are 5000, 4000, 3000, 2000, 1000 ms.
    policy = RetentionPolicy(retention_ms=2500)
    assert segments_due(_segments(5), 100, policy, NOW_MS) == 3


def test_age_stops_at_the_first_young_segment() -> None:
    infos = _segments(3)
    young_first = [SegmentInfo(0, 10, 100, NOW_MS), *infos[1:]]
    policy = RetentionPolicy(retention_ms=10)
    assert segments_due(young_first, 100, policy, NOW_MS) == 0


def test_size_keeps_the_log_at_or_above_retention_bytes() -> None:
    # 5 sealed x 100 + 100 active = 600 bytes; keeping at least 250 allows deleting 3.
    policy = RetentionPolicy(retention_bytes=250)
    assert segments_due(_segments(5), 100, policy, NOW_MS) == 3


def test_size_never_counts_the_active_segment() -> None:
    policy = RetentionPolicy(retention_bytes=0)
    assert segments_due(_segments(4), 10_000, policy, NOW_MS) == 4


def test_the_disk_share_is_a_ceiling_on_the_whole_log() -> None:
    # 5 sealed x 100 + 100 active = 600 bytes; within 250 leaves 200 (deleting 4), where
    # retention.bytes=250 would keep 300 (deleting 3).
    policy = RetentionPolicy(disk_share_bytes=250)
    assert segments_due(_segments(5), 100, policy, NOW_MS) == 4
    assert segments_due(_segments(5), 100, RetentionPolicy(retention_bytes=250), NOW_MS) == 3


def test_a_log_that_fits_its_disk_share_keeps_everything() -> None:
    assert segments_due(_segments(5), 100, RetentionPolicy(disk_share_bytes=600), NOW_MS) == 0
    assert segments_due(_segments(5), 100, RetentionPolicy(disk_share_bytes=599), NOW_MS) == 1


def test_the_disk_share_never_deletes_the_active_segment() -> None:
    # A share smaller than the active segment empties the sealed ones and stops there.
    policy = RetentionPolicy(disk_share_bytes=0)
    assert segments_due(_segments(4), 10_000, policy, NOW_MS) == 4
    assert segments_due([], 10_000, policy, NOW_MS) == 0


def test_the_strictest_rule_wins() -> None:
    policy = RetentionPolicy(retention_ms=4500, retention_bytes=350)
    # age deletes 1; size deletes 2 (600 -> 500 -> 400; a third would leave 300 < 350)
    assert segments_due(_segments(5), 100, policy, NOW_MS) == 2


def test_the_disk_share_and_the_other_rules_take_the_strictest() -> None:
    # age deletes 1 (4500 ms); the share of 450 deletes 2 (600 -> 500 -> 400)
    policy = RetentionPolicy(retention_ms=4500, disk_share_bytes=450)
    assert segments_due(_segments(5), 100, policy, NOW_MS) == 2
    policy = RetentionPolicy(retention_ms=1500, disk_share_bytes=450)  # age deletes 4
    assert segments_due(_segments(5), 100, policy, NOW_MS) == 4


def test_nothing_at_or_above_the_high_watermark_is_deleted() -> None:
    """A segment goes only once its next offset is at or below the HW (Kafka's
    `UnifiedLog.deletableSegments`): a record not every in-sync replica holds yet is never
    deleted, or the leader's HW would jump to the new log start over it."""
    sealed = _segments(5)  # [0, 10), [10, 20), ... [40, 50); the active one starts at 50
    everything = RetentionPolicy(retention_bytes=0)
    assert segments_to_delete(sealed, 100, everything, NOW_MS, upto_offset=50) == 5
    assert segments_to_delete(sealed, 100, everything, NOW_MS, upto_offset=49) == 4
    assert segments_to_delete(sealed, 100, everything, NOW_MS, upto_offset=20) == 2
    assert segments_to_delete(sealed, 100, everything, NOW_MS, upto_offset=19) == 1
    assert segments_to_delete(sealed, 100, everything, NOW_MS, upto_offset=0) == 0


def test_every_rule_waits_for_the_high_watermark() -> None:
    sealed = _segments(5)
    for policy in (RetentionPolicy(retention_ms=0), RetentionPolicy(retention_bytes=0),
                   RetentionPolicy(disk_share_bytes=0)):
        assert segments_due(sealed, 100, policy, NOW_MS) == 5, policy
        assert segments_to_delete(sealed, 100, policy, NOW_MS, upto_offset=30) == 3, policy


def test_below_the_high_watermark_the_policy_decides() -> None:
    policy = RetentionPolicy(retention_bytes=250)  # deletes 3 of 5 (test above)
    assert segments_to_delete(_segments(5), 100, policy, NOW_MS, upto_offset=50) == 3
