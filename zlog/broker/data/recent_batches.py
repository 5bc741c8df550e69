"""The last few batches a leader appended, kept as stored, to answer consumers at the log's tail.

A consumer keeping up reads what was appended a moment ago. The log finds it through the
segment's sparse offset index and a walk over batch headers from the nearest index entry, for
the fetch offset and again for the high watermark; for a batch of a few hundred bytes that walk
costs more than everything else the fetch does. This table answers the same read from copies of
the recent batches, with exactly the bytes and frames `PartitionLog.read` would return:

* the bytes: a batch as the log stores it is the produced batch with its base offset and
  partition leader epoch stamped (`record.header.stamp`), which is how it is kept here;
* the frames: the log returns one frame per segment a read touches, so the table remembers
  which batches began a segment and starts a new frame at each;
* the sizing: the log returns the longest run of whole batches from the one holding the offset
  that fits `max_bytes`, the first batch always, and nothing from `upto_offset` on.

The table only ever describes the log's tail: batches are noted right after the log appended
them, in order, and anything that touches the log otherwise (a batch too large to keep, a segment
count that changed between appends, a new epoch or role) empties it. A read it cannot answer
exactly (an offset before its first batch, a high watermark inside a batch, the log having moved
on) gets None, and the caller reads the log. Bounded by bytes and by batches. Pure.
"""

from __future__ import annotations

import bisect
from typing import TypeAlias

from zlog import limits

Stored: TypeAlias = bytes | bytearray



class RecentBatches:
    """Contiguous stored batches ending at the log end, oldest first, with segment starts."""

    __slots__ = ("_bases", "_batches", "_bytes", "_nexts", "_segment_count", "_starts_segment")

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._nexts: list[int] = []  # sorted: bisect finds the batch holding an offset
        self._batches: list[Stored] = []
        self._starts_segment: list[bool] = []
        self._bytes = 0
        self._segment_count = -1  # the log's segment count after the last noted append

    def __len__(self) -> int:
        return len(self._batches)

    @property
    def end_offset(self) -> int:
        """The offset after the last batch kept (-1 when empty)."""
        return self._nexts[-1] if self._nexts else -1

    def clear(self) -> None:
        self._bases.clear()
        self._nexts.clear()
        self._batches.clear()
        self._starts_segment.clear()
        self._bytes = 0
        self._segment_count = -1

    def note_appended(
        self, base_offset: int, next_offset: int, stored: Stored, segment_counts: tuple[int, int]
    ) -> None:
        """The log just appended a batch at [base_offset, next_offset), stored as `stored`.

        The caller clears the table instead for a batch over limits.RECENT_BATCHES_BYTES_MAX.
        `segment_counts` is the log's segment count before and after the append: one more after
        means the batch began a segment; a count that changed since the last append means the
        log's segments changed in between (a roll or a deletion), so what is kept may no longer
        be laid out as remembered, and is dropped.
        """
        assert base_offset < next_offset, (base_offset, next_offset)
        assert len(stored) <= limits.RECENT_BATCHES_BYTES_MAX, len(stored)
        count_before, count_after = segment_counts
        contiguous = bool(self._nexts) and self._nexts[-1] == base_offset
        if not contiguous or count_before != self._segment_count:
            self.clear()
        self._bases.append(base_offset)
        self._nexts.append(next_offset)
        self._batches.append(stored)
        self._starts_segment.append(count_after != count_before)
        self._bytes += len(stored)
        self._segment_count = count_after
        while (self._bytes > limits.RECENT_BATCHES_BYTES_MAX
               or len(self._batches) > limits.RECENT_BATCHES_MAX):
            self._drop_oldest()
        assert self._bytes >= 0 and len(self._bases) == len(self._batches)

    def _drop_oldest(self) -> None:
        self._bases.pop(0)
        self._nexts.pop(0)
        self._bytes -= len(self._batches.pop(0))
        self._starts_segment.pop(0)

    def read(
        self, offset: int, max_bytes: int, upto_offset: int, *, log_end_offset: int,
        segment_count: int,
    ) -> list[memoryview] | None:
        """`PartitionLog.read(offset, max_bytes, upto_offset)` from the kept batches, or None.

        None unless the table still ends at the log end with the same segments, holds the
        batch with `offset`, and `upto_offset` falls between two kept batches (or at the end).
        """
        if not self._nexts or self._nexts[-1] != log_end_offset:
            return None
        if segment_count != self._segment_count:
            return None
        if not self._bases[0] <= offset < upto_offset:
            return None
        first = bisect.bisect_right(self._nexts, offset)
        stop = bisect.bisect_left(self._bases, upto_offset)
        if stop <= first or self._nexts[stop - 1] > upto_offset:
            return None  # the high watermark lies inside a batch: the log decides
        return self._frames(first, stop, max_bytes)

    def _frames(self, first: int, stop: int, max_bytes: int) -> list[memoryview]:
        """Whole batches first..stop within max_bytes (the first always), a frame per segment."""
        frames: list[memoryview] = []
        run: list[Stored] = [self._batches[first]]
        used_bytes = len(run[0])
        for index in range(first + 1, stop):
            batch = self._batches[index]
            used_bytes += len(batch)
            if used_bytes > max_bytes:
                break
            if self._starts_segment[index]:
                frames.append(_frame(run))
                run = []
            run.append(batch)
        frames.append(_frame(run))
        return frames


def _frame(run: list[Stored]) -> memoryview:
    """Consecutive batches as one frame; a lone batch as it is (the frame is only read)."""
    return memoryview(run[0] if len(run) == 1 else b"".join(run))
