"""Fetch long poll and fetch sizing: when a parked fetch is answered, and how much it gets.

A fetch that finds fewer than `min_bytes` is parked here until appends (or, for consumers, the
high watermark) have made `min_bytes` available over its partitions, or until its deadline
(`max_wait_ms` after it arrived), whichever comes first — Kafka's DelayedFetch. The worker tells
this module how many bytes became readable on which partition; the module answers which parked
fetches are now ready, and the worker then reads and replies. Waiting costs nothing per byte:
bytes are counted from the sizes of appended batches, never re-read.

`collect_fetch` applies Kafka's sizing rules to one fetch: a total budget (`max_bytes`), a budget
per partition (`partition_max_bytes`), and at least one whole batch for the first partition that
has data, even when that batch is larger than the budgets, so a consumer always makes progress.

Pure: time comes in as `now_ms`; reading is a callable passed in.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from zlog import limits
from zlog.errors import ErrorCode
from zlog.types import TopicPartition

T = TypeVar("T")
E = TypeVar("E")

FETCH_WAIT_MS_MAX: Final = 300_000
"""Longest long poll honoured (5 minutes); a larger max_wait_ms is clamped to it."""


# ------------------------------------------------------------------------------ fetch sizing


@dataclass(frozen=True, slots=True)
class EntryRead:
    """What one partition of a fetch produced: an error or whole batches, plus its offsets."""

    error_code: ErrorCode
    high_watermark: int
    log_start_offset: int
    chunks: tuple[memoryview, ...] = ()
    error_message: str = ""

    @property
    def size_bytes(self) -> int:
        return sum(chunk.nbytes for chunk in self.chunks)


ReadEntry = Callable[[E, int, bool], EntryRead]
"""read(entry, limit_bytes, at_least_one) -> EntryRead; must stay within `limit_bytes` unless
`at_least_one`, in which case it may return one batch larger than the limit."""


def collect_fetch(
    entries: Sequence[E],
    max_bytes: int,
    partition_max_bytes: Callable[[E], int],
    read: ReadEntry[E],
) -> list[EntryRead]:
    """Read every entry in order within the total and per-partition budgets.

    Only the first entry that returns data may exceed its budget (with one whole batch); every
    later entry must fit in what is left of `max_bytes`, as in Kafka's ReplicaManager.
    """
    assert max_bytes >= 0, max_bytes
    remaining_bytes = max_bytes
    at_least_one = True
    results: list[EntryRead] = []
    for entry in entries:
        limit_bytes = max(min(partition_max_bytes(entry), remaining_bytes), 0)
        result = read(entry, limit_bytes, at_least_one)
        size_bytes = result.size_bytes
        assert at_least_one or size_bytes <= limit_bytes, (size_bytes, limit_bytes)
        if size_bytes:
            at_least_one = False
            remaining_bytes -= size_bytes
        results.append(result)
    assert len(results) == len(entries)
    return results


def fetch_is_complete(results: Iterable[EntryRead], min_bytes: int, max_wait_ms: int) -> bool:
    """Whether a first attempt may be answered at once instead of parked.

    As in Kafka: when it already has min_bytes, when the client does not want to wait, when it
    names no partition at all (nothing could wake it), or when any partition failed (the client
    needs the error now, e.g. to refresh its metadata).
    """
    results = list(results)
    if not results:
        return True
    total_bytes = 0
    for result in results:
        if result.error_code != ErrorCode.NONE:
            return True
        total_bytes += result.size_bytes
    return max_wait_ms <= 0 or total_bytes >= min_bytes


# ------------------------------------------------------------------------------ long poll


@dataclass(slots=True)
class _Parked(Generic[T]):
    token: T
    min_bytes: int
    deadline_ms: int
    reads_log_end: bool  # a follower: woken by appends, not by the high watermark
    room_bytes: dict[TopicPartition, int]  # per partition, what may still count toward min_bytes
    available_bytes: int
    done: bool = False


@dataclass(slots=True)
class FetchWaiters(Generic[T]):
    """Parked fetches, by partition and by deadline. `T` is the worker's reply context."""

    parked_max: int = limits.PARKED_FETCHES_MAX
    _by_id: dict[int, _Parked[T]] = field(default_factory=dict)
    _by_partition: dict[TopicPartition, dict[int, None]] = field(default_factory=dict)
    _deadlines: list[tuple[int, int]] = field(default_factory=list)  # heap of (deadline, id)
    _next_id: int = 0

    def __len__(self) -> int:
        return len(self._by_id)

    def park(
        self,
        token: T,
        partitions: Sequence[tuple[TopicPartition, int]],
        *,
        min_bytes: int,
        available_bytes: int,
        now_ms: int,
        max_wait_ms: int,
        reads_log_end: bool = False,
    ) -> bool:
        """Wait for `min_bytes` over `partitions` [(topic-partition, partition_max_bytes)].

        `available_bytes` is what the first attempt found. Returns False, parking nothing, when
        the table is full: the caller then answers at once (a bounded queue, never a drop).
        """
        assert max_wait_ms > 0 and min_bytes > available_bytes >= 0
        if len(self._by_id) >= self.parked_max:
            return False
        fetch_id = self._next_id
        self._next_id += 1
        room = {tp: max(limit_bytes, 0) for tp, limit_bytes in partitions}
        deadline_ms = now_ms + min(max_wait_ms, FETCH_WAIT_MS_MAX)
        self._by_id[fetch_id] = _Parked(
            token, min_bytes, deadline_ms, reads_log_end, room, available_bytes
        )
        for tp in room:
            self._by_partition.setdefault(tp, {})[fetch_id] = None
        heapq.heappush(self._deadlines, (deadline_ms, fetch_id))
        if len(self._deadlines) > 2 * len(self._by_id) + 64:
            self._drop_stale_deadlines()
        assert len(self._by_id) <= self.parked_max
        return True

    def _drop_stale_deadlines(self) -> None:
        """Fetches answered early leave their heap slot behind; keep the heap bounded."""
        self._deadlines = [(d, i) for d, i in self._deadlines if i in self._by_id]
        heapq.heapify(self._deadlines)

    def on_appended(self, tp: TopicPartition, size_bytes: int) -> list[T]:
        """Bytes were appended to `tp` (followers may read them): the fetches now ready."""
        return self._credit(tp, size_bytes, followers=True)

    def on_committed(self, tp: TopicPartition, size_bytes: int) -> list[T]:
        """The high watermark of `tp` moved over `size_bytes`: consumer fetches now ready."""
        return self._credit(tp, size_bytes, followers=False)

    def wake_partition(self, tp: TopicPartition) -> list[T]:
        """Answer every fetch waiting on `tp` now (the partition left this worker)."""
        ids = list(self._by_partition.get(tp, {}))
        return [self._remove(fetch_id) for fetch_id in ids]

    def expire(self, now_ms: int) -> list[T]:
        """The fetches whose deadline is at or before `now_ms`, oldest deadline first."""
        expired: list[T] = []
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _deadline_ms, fetch_id = heapq.heappop(self._deadlines)
            if fetch_id in self._by_id:
                expired.append(self._remove(fetch_id))
        return expired

    def next_deadline_ms(self) -> int | None:
        """The earliest deadline of a fetch still parked (for the poll timeout)."""
        while self._deadlines and self._deadlines[0][1] not in self._by_id:
            heapq.heappop(self._deadlines)  # answered early; its heap slot is stale
        return self._deadlines[0][0] if self._deadlines else None

    def remove_where(self, unwanted: Callable[[T], bool]) -> int:
        """Forget the parked fetches whose token is `unwanted`, unanswered; how many."""
        ids = [fetch_id for fetch_id, parked in self._by_id.items() if unwanted(parked.token)]
        for fetch_id in ids:
            self._remove(fetch_id)
        return len(ids)

    def drain(self) -> list[T]:
        """Every parked fetch, in arrival order (shutdown answers them all)."""
        return [self._remove(fetch_id) for fetch_id in list(self._by_id)]

    def _credit(self, tp: TopicPartition, size_bytes: int, *, followers: bool) -> list[T]:
        assert size_bytes >= 0, size_bytes
        ready: list[int] = []
        for fetch_id in self._by_partition.get(tp, {}):
            parked = self._by_id[fetch_id]
            if parked.reads_log_end != followers:
                continue
            counted_bytes = min(size_bytes, parked.room_bytes[tp])
            parked.room_bytes[tp] -= counted_bytes
            parked.available_bytes += counted_bytes
            if parked.available_bytes >= parked.min_bytes:
                ready.append(fetch_id)
        return [self._remove(fetch_id) for fetch_id in ready]

    def _remove(self, fetch_id: int) -> T:
        parked = self._by_id.pop(fetch_id)
        assert not parked.done
        parked.done = True
        for tp in parked.room_bytes:
            waiting = self._by_partition[tp]
            del waiting[fetch_id]
            if not waiting:
                del self._by_partition[tp]
        return parked.token
