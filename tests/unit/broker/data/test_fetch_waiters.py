"""Long-poll bookkeeping and fetch sizing, with time passed in by hand."""

from __future__ import annotations

from dataclasses import dataclass

from zlog.broker.data.fetch_waiters import (
    FETCH_WAIT_MS_MAX,
    EntryRead,
    FetchWaiters,
    collect_fetch,
    fetch_is_complete,
)
from zlog.errors import ErrorCode

A, B, C = ("t", 0), ("t", 1), ("u", 0)
NOW_MS = 1_000


@dataclass(frozen=True)
class _Entry:
    """A partition holding batches of the given sizes, fetched with `partition_max_bytes`."""

    batch_sizes: tuple[int, ...]
    partition_max_bytes: int
    error: ErrorCode = ErrorCode.NONE


def _read(entry: _Entry, limit_bytes: int, at_least_one: bool) -> EntryRead:
    """PartitionLog's rule: whole batches within the limit, the first one even if larger."""
    if entry.error != ErrorCode.NONE:
        return EntryRead(entry.error, -1, -1)
    chunks: list[memoryview] = []
    used = 0
    for size in entry.batch_sizes:
        if used + size > limit_bytes and (chunks or not at_least_one):
            break
        chunks.append(memoryview(bytes(size)))
        used += size
    return EntryRead(ErrorCode.NONE, 10, 0, tuple(chunks))


def _sizes(entries: list[_Entry], max_bytes: int) -> list[int]:
    results = collect_fetch(entries, max_bytes, lambda e: e.partition_max_bytes, _read)
    return [r.size_bytes for r in results]


def test_fetch_respects_partition_and_total_budgets() -> None:
    entries = [_Entry((100, 100, 100), 250), _Entry((100, 100), 1000), _Entry((100,), 1000)]
    assert _sizes(entries, 10_000) == [200, 200, 100]
    assert _sizes(entries, 300) == [200, 100, 0]


def test_only_the_first_partition_with_data_may_exceed_the_budgets() -> None:
    entries = [_Entry((), 1000), _Entry((5000, 10), 100), _Entry((5000,), 100_000)]
    assert _sizes(entries, 1000) == [0, 5000, 0], "the first non-empty one gets its big batch"
    entries = [_Entry((10,), 1000), _Entry((5000,), 100_000)]
    assert _sizes(entries, 1000) == [10, 0], "a later oversized batch waits for a later fetch"


def test_an_error_uses_no_budget() -> None:
    entries = [_Entry((), 100, ErrorCode.NOT_LEADER_OR_FOLLOWER), _Entry((500,), 100)]
    assert _sizes(entries, 100) == [0, 500]


def test_a_fetch_completes_at_once_with_min_bytes_no_wait_or_an_error() -> None:
    data = EntryRead(ErrorCode.NONE, 1, 0, (memoryview(bytes(10)),))
    empty = EntryRead(ErrorCode.NONE, 1, 0)
    failed = EntryRead(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1)
    assert fetch_is_complete([data], 10, 500)
    assert not fetch_is_complete([data, empty], 11, 500)
    assert fetch_is_complete([empty], 1, 0)
    assert fetch_is_complete([empty, failed], 1, 500)
    assert fetch_is_complete([empty], 0, 500)
    assert fetch_is_complete([], 1, 500), "a fetch of no partition has nothing to wait for"


def test_appends_wake_a_fetch_once_min_bytes_are_available() -> None:
    waiters: FetchWaiters[str] = FetchWaiters()
    assert waiters.park("f", [(A, 1000), (B, 1000)], min_bytes=100, available_bytes=10,
                        now_ms=NOW_MS, max_wait_ms=500)
    assert waiters.on_committed(A, 50) == []
    assert waiters.on_committed(C, 500) == [], "another partition"
    assert waiters.on_committed(B, 40) == ["f"]
    assert len(waiters) == 0
    assert waiters.on_committed(A, 500) == [], "answered once"


def test_only_partition_max_bytes_of_a_partition_count() -> None:
    waiters: FetchWaiters[str] = FetchWaiters()
    waiters.park("f", [(A, 30), (B, 1000)], min_bytes=50, available_bytes=0, now_ms=NOW_MS,
                 max_wait_ms=500)
    assert waiters.on_committed(A, 100) == []
    assert waiters.on_committed(A, 100) == []
    assert waiters.on_committed(B, 20) == ["f"]


def test_consumers_wake_on_the_high_watermark_and_followers_on_appends() -> None:
    waiters: FetchWaiters[str] = FetchWaiters()
    waiters.park("consumer", [(A, 1000)], min_bytes=1, available_bytes=0, now_ms=NOW_MS,
                 max_wait_ms=500)
    waiters.park("follower", [(A, 1000)], min_bytes=1, available_bytes=0, now_ms=NOW_MS,
                 max_wait_ms=500, reads_log_end=True)
    assert waiters.on_appended(A, 10) == ["follower"]
    assert waiters.on_committed(A, 10) == ["consumer"]


def test_a_fetch_expires_exactly_at_its_deadline() -> None:
    waiters: FetchWaiters[str] = FetchWaiters()
    waiters.park("late", [(A, 1000)], min_bytes=1, available_bytes=0, now_ms=NOW_MS,
                 max_wait_ms=300)
    waiters.park("early", [(B, 1000)], min_bytes=1, available_bytes=0, now_ms=NOW_MS,
                 max_wait_ms=100)
    assert waiters.next_deadline_ms() == NOW_MS + 100
    assert waiters.expire(NOW_MS + 99) == []
    assert waiters.expire(NOW_MS + 100) == ["early"]
    assert waiters.next_deadline_ms() == NOW_MS + 300
    assert waiters.expire(NOW_MS + 10_000) == ["late"]
    assert waiters.next_deadline_ms() is None


def test_a_fetch_answered_early_leaves_no_deadline_behind() -> None:
    waiters: FetchWaiters[str] = FetchWaiters()
    waiters.park("f", [(A, 1000)], min_bytes=1, available_bytes=0, now_ms=NOW_MS,
                 max_wait_ms=100)
    assert waiters.on_committed(A, 1) == ["f"]
    assert waiters.next_deadline_ms() is None
    assert waiters.expire(NOW_MS + 100) == []


def test_waits_are_clamped_to_the_longest_long_poll() -> None:
    waiters: FetchWaiters[str] = FetchWaiters()
    waiters.park("f", [(A, 1000)], min_bytes=1, available_bytes=0, now_ms=NOW_MS,
                 max_wait_ms=2**31 - 1)
    assert waiters.next_deadline_ms() == NOW_MS + FETCH_WAIT_MS_MAX


def test_a_partition_leaving_wakes_its_fetches_and_drain_wakes_all() -> None:
    waiters: FetchWaiters[str] = FetchWaiters()
    for name, tp in (("a", A), ("ab", B), ("c", C)):
        waiters.park(name, [(tp, 100)], min_bytes=1, available_bytes=0, now_ms=NOW_MS,
                     max_wait_ms=100)
    assert waiters.wake_partition(B) == ["ab"]
    assert waiters.drain() == ["a", "c"]
    assert len(waiters) == 0


def test_the_table_is_bounded() -> None:
    waiters: FetchWaiters[int] = FetchWaiters(parked_max=2)
    parked = [
        waiters.park(i, [(A, 100)], min_bytes=1, available_bytes=0, now_ms=NOW_MS,
                     max_wait_ms=100)
        for i in range(3)
    ]
    assert parked == [True, True, False]


def test_stale_deadlines_do_not_pile_up() -> None:
    waiters: FetchWaiters[int] = FetchWaiters()
    for i in range(1000):
        waiters.park(i, [(A, 100)], min_bytes=1, available_bytes=0, now_ms=NOW_MS,
                     max_wait_ms=60_000)
        assert waiters.on_committed(A, 1) == [i]
    assert len(waiters._deadlines) <= 2 * len(waiters) + 65
