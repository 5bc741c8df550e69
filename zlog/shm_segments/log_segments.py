"""One partition's segment files, oldest first: found and recovered at open, rolled, read across,
and cut from either end.

`PartitionLog` (log.py) puts the ring in front of these and decides what is written, when the
ring is flushed and what retention deletes; this module keeps the list of segments whole.
Sealed segments found at open stay names until first used (`all`), so a log of thousands of
segments opens like a log of one, and only the last segment is recovered.

The partition's writer thread does everything here, except that key compaction, on a thread
of its own, reads `snapshot()` and calls `swap_compacted`. `lock` guards the list for both;
the writer changes the active segment's contents without it, since compaction never touches
the active segment.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from zlog.clock import Clock
from zlog.errors import CorruptSegmentError, ErrorCode, ZlogError
from zlog.shm_segments.log_config import LogConfig
from zlog.shm_segments.retention import SegmentInfo
from zlog.shm_segments.segment import RELATIVE_OFFSET_MAX, BatchMeta, Segment

log = logging.getLogger(__name__)

_LEFTOVER_SUFFIXES = (".tmp", ".cleaned", ".swap", ".deleted")


class LogSegments:
    """The segments of one partition directory; the last one is active (written)."""

    def __init__(
        self,
        directory: Path,
        config: Callable[[], LogConfig],
        clock: Clock,
        empty_start: Callable[[], int],
        *,
        on_roll: Callable[[], None] | None = None,
    ) -> None:
        """List the segments by name and recover the last one; a directory without segments
        gets one starting at `empty_start()`.

        `config` is read at each use: the log's topic configs may change while it is open.
        `on_roll` is called after each roll.
        """
        self.directory = directory
        self._config = config
        self._clock = clock
        self._on_roll = on_roll
        self.lock = threading.Lock()
        self.recovered_bytes_dropped = 0
        bases: list[int] = []
        for name in os.listdir(directory):
            if name.endswith(".log"):
                if name[:-4].isdigit():
                    bases.append(int(name[:-4]))
            elif name.endswith(_LEFTOVER_SUFFIXES):
                os.unlink(directory / name)
        bases.sort()
        now_ms = clock.wall_ms()
        interval = config().index_interval_bytes
        self._lazy_bases: list[int] = []
        if not bases:
            start = empty_start()
            self._segments = [
                Segment.create(directory, start, index_interval_bytes=interval, now_ms=now_ms)
            ]
            bases = [start]
        else:
            active, dropped = Segment.recover(
                directory, bases[-1], index_interval_bytes=interval, now_ms=now_ms
            )
            self.recovered_bytes_dropped = dropped
            self._segments = [active]
            self._lazy_bases = list(bases)  # a copy: rolls append to `_bases`, never to this
        self._bases = bases

    @property
    def active(self) -> Segment:
        return self._segments[-1]

    @property
    def first_base_offset(self) -> int:
        return self._bases[0]

    @property
    def count(self) -> int:
        return len(self._bases)

    @property
    def size_bytes(self) -> int:
        return sum(segment.size_bytes for segment in self.snapshot())

    def all(self) -> list[Segment]:
        """All segments as objects, oldest first (call with `lock` held)."""
        if self._lazy_bases:
            interval = self._config().index_interval_bytes
            sealed = [
                Segment.sealed_lazy(self.directory, base, following, index_interval_bytes=interval)
                for base, following in itertools.pairwise(self._lazy_bases)
            ]
            self._lazy_bases = []
            self._segments[0:0] = sealed
        return self._segments

    def snapshot(self) -> list[Segment]:
        """The current segments, oldest first (compaction reads the sealed ones)."""
        with self.lock:
            return list(self.all())

    def sealed_infos(self) -> list[SegmentInfo]:
        return [
            SegmentInfo(s.base_offset, s.next_offset, s.size_bytes, s.max_timestamp_ms)
            for s in self.snapshot()[:-1]
        ]

    # ------------------------------------------------------------------ writing

    def write(self, views: list[memoryview], metas: list[BatchMeta]) -> None:
        """Write whole batches, rolling to a new segment where size, age or offsets demand."""
        config = self._config()
        start = 0
        while start < len(views):
            self._maybe_roll(metas[start], config)
            active = self.active
            room = config.segment_bytes - active.size_bytes
            stop = start
            while stop < len(views) and (stop == start or metas[stop].size_bytes <= room):
                if stop > start and _must_roll_for(active, metas[stop], config):
                    break
                room -= metas[stop].size_bytes
                stop += 1
            active.write(views[start:stop], metas[start:stop])
            start = stop

    def _maybe_roll(self, meta: BatchMeta, config: LogConfig) -> None:
        active = self.active
        if active.size_bytes == 0:
            return
        too_old = self._clock.wall_ms() - active.created_ms >= config.segment_ms
        if too_old or _must_roll_for(active, meta, config):
            self.roll()

    def roll(self) -> None:
        """Seal the active segment and start a new one at the log end.

        The new file is made first and removed again if sealing fails, so a full disk leaves
        the log as it was (KAFKA_STORAGE_ERROR), never without an active segment.
        """
        config = self._config()
        active = self.active
        if config.fsyncs:
            active.sync()
        try:
            fresh = Segment.create(
                self.directory, active.next_offset,
                index_interval_bytes=config.index_interval_bytes,
                now_ms=self._clock.wall_ms(),
            )
        except OSError as error:
            raise ZlogError(ErrorCode.KAFKA_STORAGE_ERROR,
                            f"cannot start a segment in {self.directory}: {error.strerror}"
                            ) from error
        try:
            active.seal()
        except OSError as error:
            fresh.delete()
            raise ZlogError(ErrorCode.KAFKA_STORAGE_ERROR,
                            f"cannot seal {active.log_path}: {error.strerror}") from error
        with self.lock:
            self._segments.append(fresh)
            self._bases.append(fresh.base_offset)
        if self._on_roll is not None:
            self._on_roll()

    # ------------------------------------------------------------------ reading

    def read(self, offset: int, max_bytes: int, limit: int) -> list[memoryview]:
        """Whole batches from the one holding `offset` and below `limit`, at most about
        `max_bytes`, the first batch whole even when larger: one view per segment touched."""
        views: list[memoryview] = []
        remaining = max_bytes
        with self.lock:
            if offset >= self.active.base_offset:
                segments, bases = [self.active], [self.active.base_offset]
            else:
                segments, bases = list(self.all()), list(self._bases)
        slot = max(bisect.bisect_right(bases, offset) - 1, 0)
        while slot < len(segments) and offset < limit and (remaining > 0 or not views):
            segment = segments[slot]
            try:
                view, offset = segment.read(offset, remaining, limit, at_least_one=not views)
            except CorruptSegmentError:
                if views:  # what comes before the corrupt segment is whole: serve it
                    break
                raise
            if view is not None:
                views.append(view)
                remaining -= len(view)
            if offset >= segment.next_offset:
                slot += 1
            elif view is None:
                break
        return views

    def verify_sealed(self, max_bytes: int) -> bool:
        """Check the CRCs of about `max_bytes` more of the sealed segments found at open,
        oldest first; True once all are checked (CorruptSegmentError at a corrupt batch)."""
        for segment in self.snapshot()[:-1]:
            if segment.verified:
                continue
            if not segment.verify(max_bytes):
                return False
            max_bytes = max(max_bytes - segment.size_bytes, 0)
            if max_bytes == 0:
                return all(s.verified for s in self.snapshot()[:-1])
        return True

    # ------------------------------------------------------------------ cutting

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset >= `offset`, which lies inside the log."""
        with self.lock:
            self.all()
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                self._segments.pop().delete()
                self._bases.pop()
            if self._segments[-1].sealed:
                self._segments[-1] = self._reopen_active(self._segments[-1])
        self.active.truncate_to(offset)

    def _reopen_active(self, sealed: Segment) -> Segment:
        """Make the last sealed segment writable again (after truncation removed newer ones)."""
        sealed.close()
        for path in (sealed.index_path, sealed.time_index_path):
            path.unlink(missing_ok=True)
        active, dropped = Segment.recover(
            self.directory, sealed.base_offset,
            index_interval_bytes=self._config().index_interval_bytes,
            now_ms=self._clock.wall_ms(),
        )
        if dropped:  # a batch that rotted after the segment was sealed (its CRC fails)
            log.warning("%s: the reopened segment lost %d bytes to a failed CRC check",
                        self.directory.name, dropped)
        return active

    def restart_at(self, offset: int) -> None:
        """Delete every segment; the log goes on empty from `offset`."""
        with self.lock:
            for segment in self.all():
                segment.delete()
            self._segments = [
                Segment.create(
                    self.directory, offset,
                    index_interval_bytes=self._config().index_interval_bytes,
                    now_ms=self._clock.wall_ms(),
                )
            ]
            self._bases = [offset]

    def count_below(self, offset: int) -> int:
        """How many of the oldest sealed segments hold only offsets below `offset`."""
        count = 0
        for segment in self.snapshot()[:-1]:
            if segment.next_offset > offset:
                break
            count += 1
        return count

    def delete_oldest(self, count: int) -> None:
        """Delete the `count` oldest segments, all of them sealed."""
        with self.lock:
            doomed = self.all()[:count]
            self._segments = self._segments[count:]
            self._bases = self._bases[count:]
            for segment in doomed:
                segment.delete()

    def swap_compacted(self, old: Segment, cleaned_path: Path) -> bool:
        """Put a compacted copy of a sealed segment in its place, unless it is gone meanwhile.

        Under the lock, so retention or truncation cannot delete the segment between the
        check and the rename. The old indexes go first: after a crash at any point the
        segment has either its old or its new data, and an index is rebuilt if missing.
        Returns False (and discards the copy) when the segment is no longer in the log.
        """
        with self.lock:
            if old not in self.all()[:-1]:
                cleaned_path.unlink(missing_ok=True)
                return False
            slot = self._segments.index(old)
            for path in (old.index_path, old.time_index_path):
                path.unlink(missing_ok=True)
            os.replace(cleaned_path, old.log_path)
            self._segments[slot] = Segment.sealed_lazy(
                self.directory, old.base_offset, old.next_offset,
                index_interval_bytes=self._config().index_interval_bytes,
            )
        old.close()
        return True

    def close(self, *, ignore_errors: bool = False) -> None:
        """Close the files of every segment opened so far (the log is going away); with
        `ignore_errors`, a segment that fails to close does not keep the others open."""
        for segment in self._segments:
            if ignore_errors:
                with contextlib.suppress(OSError):
                    segment.close()
            else:
                segment.close()


def _must_roll_for(active: Segment, meta: BatchMeta, config: LogConfig) -> bool:
    if meta.next_offset - active.base_offset > RELATIVE_OFFSET_MAX:
        return True
    return active.size_bytes + meta.size_bytes > config.segment_bytes
