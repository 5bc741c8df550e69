"""One segment of a partition log: a `.log` file of whole record batches plus its indexes.

A segment is written by one process (the partition's writer) and read through an mmap, so
`read()` hands out memoryviews of the page cache without copying. Two rules keep those views
safe: a segment file is never shrunk while the writer runs (a truncation overwrites the cut
tail with zeros and moves the logical end instead; recovery shrinks the file at the next open,
when no view can exist), and deleted segments are unlinked, which leaves existing mappings
valid until their last view goes away.
"""

from __future__ import annotations

import logging
import mmap
import os
from dataclasses import dataclass
from pathlib import Path

from zlog.errors import CorruptSegmentError, ErrorCode, ZlogError
from zlog.record import header as batch_header
from zlog.record.arrays import parse_batch
from zlog.shm_segments.index import (
    OFFSET_ENTRY,
    TIME_ENTRY,
    SparseIndex,
    is_consistent,
    lookup_position,
    lookup_position_at_or_before,
    lookup_time,
    points_at_batches,
    running_max_before,
)

log = logging.getLogger(__name__)

RELATIVE_OFFSET_MAX = 2**32 - 1  # offsets in a segment's index are u4, relative to its base

_ZERO_CHUNK_BYTES = 1 << 20
# How many buffers one pwritev takes (POSIX guarantees at least 16; Linux allows 1024).
IOV_MAX = max(16, os.sysconf("SC_IOV_MAX")) if "SC_IOV_MAX" in os.sysconf_names else 16


def segment_file_name(base_offset: int, suffix: str) -> str:
    """Files are named by base offset in 20 digits, so a plain sort is offset order."""
    assert base_offset >= 0
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class BatchMeta:
    """What the log needs to know of a batch to place and index it."""

    base_offset: int
    next_offset: int
    max_timestamp_ms: int
    size_bytes: int


def batch_meta(buf: memoryview | bytes | bytearray, position: int = 0) -> BatchMeta:
    """Read the placement fields of the batch at `position` (the caller validated it)."""
    return BatchMeta(*batch_header.read_placement(buf, position))


def _in_order(header: batch_header.BatchHeader, next_offset: int, end_offset: int) -> bool:
    """Whether a batch's offsets follow `next_offset` and end by `end_offset`: its base
    offset lies outside the CRC, so a flipped bit there is found only by its place."""
    return next_offset <= header.base_offset < header.next_offset <= end_offset


class Segment:
    """A `.log` file and its sparse indexes; sealed segments load lazily on first use.

    A segment this process did not write (a sealed one found at open) is checked before its
    first batch is served: every batch's CRC, once, from the start (`verify`). Recovery
    checks only the active segment, and bytes that rotted on disk while the broker ran, or
    while it was stopped, would otherwise be served and copied as they are.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        next_offset: int,
        index_interval_bytes: int,
        sealed: bool,
        created_ms: int,
    ) -> None:
        assert base_offset >= 0 and next_offset >= base_offset
        self.directory = directory
        self.base_offset = base_offset
        self.next_offset = next_offset
        self.index_interval_bytes = index_interval_bytes
        self.sealed = sealed
        self.created_ms = created_ms
        self._size_bytes: int | None = None
        self._max_timestamp_ms: int | None = None
        self._offsets: SparseIndex | None = None
        self._times: SparseIndex | None = None
        self._bytes_since_entry = 0
        self._fd: int | None = None
        self._map: mmap.mmap | None = None
        self._map_bytes = 0
        self._slack_end = 0  # the file's end after a truncation zeroed its tail (never shrunk)
        self.unsynced_messages = 0
        # How far `verify` got: bytes and the offset there; a segment written here is trusted.
        self._checked_bytes = 0 if sealed else -1
        self._checked_offset = base_offset
        self._corrupt: CorruptSegmentError | None = None

    # ------------------------------------------------------------------ opening

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, *, index_interval_bytes: int, now_ms: int
    ) -> Segment:
        """A new, empty active segment (an existing empty file of that name is reused)."""
        segment = cls(
            directory, base_offset, next_offset=base_offset,
            index_interval_bytes=index_interval_bytes, sealed=False, created_ms=now_ms,
        )
        segment._fd = os.open(segment.log_path, os.O_CREAT | os.O_WRONLY, 0o644)
        os.ftruncate(segment._fd, 0)
        segment._size_bytes = 0
        segment._max_timestamp_ms = -1
        segment._offsets = SparseIndex(OFFSET_ENTRY)
        segment._times = SparseIndex(TIME_ENTRY)
        return segment

    @classmethod
    def recover(
        cls, directory: Path, base_offset: int, *, index_interval_bytes: int, now_ms: int
    ) -> tuple[Segment, int]:
        """Open the active segment after any stop: keep the CRC-valid prefix, cut the rest.

        Returns the segment and how many bytes were dropped. The segment's age for
        `segment.ms` starts now: record timestamps are the producers' and may be far in the
        past, which would roll a segment per append. Only the active segment is ever
        scanned, so opening a log costs the same whatever the number of sealed segments.
        """
        segment = cls(
            directory, base_offset, next_offset=base_offset,
            index_interval_bytes=index_interval_bytes, sealed=False, created_ms=now_ms,
        )
        segment._fd = os.open(segment.log_path, os.O_CREAT | os.O_RDWR, 0o644)
        file_bytes = os.fstat(segment._fd).st_size
        segment._offsets = SparseIndex(OFFSET_ENTRY)
        segment._times = SparseIndex(TIME_ENTRY)
        segment._size_bytes = 0
        segment._max_timestamp_ms = -1
        valid_bytes = 0
        if file_bytes > 0:
            with mmap.mmap(segment._fd, file_bytes, access=mmap.ACCESS_READ) as whole:
                view = memoryview(whole)
                try:
                    found, valid_bytes = batch_header.scan_batches(view, 0, check_crc=True)
                    for position, header in found:
                        if not _in_order(header, segment.next_offset,
                                         base_offset + RELATIVE_OFFSET_MAX):
                            valid_bytes = position  # a base offset (outside the CRC) rotted
                            break
                        segment._index_batch(
                            position,
                            BatchMeta(header.base_offset, header.next_offset,
                                      header.max_timestamp_ms, header.size_bytes),
                        )
                finally:
                    view.release()
        dropped = file_bytes - valid_bytes
        if dropped:
            os.ftruncate(segment._fd, valid_bytes)
            log.warning(
                "segment %s: dropped %d bytes of torn or corrupt tail after offset %d",
                segment.log_path, dropped, segment.next_offset,
            )
        segment._size_bytes = valid_bytes
        return segment, dropped

    @classmethod
    def sealed_lazy(
        cls, directory: Path, base_offset: int, next_offset: int, *, index_interval_bytes: int
    ) -> Segment:
        """A sealed segment known only by name: nothing is read until it is used."""
        return cls(
            directory, base_offset, next_offset=next_offset,
            index_interval_bytes=index_interval_bytes, sealed=True, created_ms=0,
        )

    # ------------------------------------------------------------------ properties
    # Paths are built on use: opening a log of thousands of segments must not build
    # thousands of Path objects it will never need.

    @property
    def log_path(self) -> Path:
        return self.directory / segment_file_name(self.base_offset, ".log")

    @property
    def index_path(self) -> Path:
        return self.directory / segment_file_name(self.base_offset, ".index")

    @property
    def time_index_path(self) -> Path:
        return self.directory / segment_file_name(self.base_offset, ".timeindex")

    @property
    def size_bytes(self) -> int:
        if self._size_bytes is None:
            self._size_bytes = self.log_path.stat().st_size
        return self._size_bytes

    @property
    def max_timestamp_ms(self) -> int:
        if self._max_timestamp_ms is None:
            self._load_indexes()
        assert self._max_timestamp_ms is not None
        return self._max_timestamp_ms

    @property
    def is_empty(self) -> bool:
        return self.next_offset == self.base_offset

    # ------------------------------------------------------------------ writing

    def write(self, views: list[memoryview], metas: list[BatchMeta]) -> None:
        """Append whole, validated batches (contiguous in offsets): one system call per
        IOV_MAX views (a ring that held many small batches unflushed hands over thousands,
        and pwritev refuses more than IOV_MAX with EINVAL).

        All or nothing: when the file system refuses the bytes (a full disk, an I/O error),
        the file is cut back to where it ended, nothing is indexed, and KAFKA_STORAGE_ERROR is
        raised; the segment is as it was, so the same batches can be written again later.
        """
        assert not self.sealed and self._fd is not None
        assert metas and metas[0].base_offset >= self.next_offset
        start = self.size_bytes
        total = sum(meta.size_bytes for meta in metas)
        try:
            position = start
            for first in range(0, len(views), IOV_MAX):
                chunk = views[first : first + IOV_MAX]
                written = os.pwritev(self._fd, chunk, position)
                chunk_bytes = sum(len(view) for view in chunk)
                if written != chunk_bytes:
                    self._write_rest(chunk, position, written)
                position += chunk_bytes
            assert position == start + total, "views and metas describe the same batches"
        except (OSError, ZlogError) as error:
            self._cut_back(start)
            detail = error.strerror if isinstance(error, OSError) else error.message
            raise ZlogError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"cannot write to {self.log_path}: {detail}"
            ) from error
        position = start
        for meta in metas:
            self._index_batch(position, meta)
            self.unsynced_messages += meta.next_offset - meta.base_offset
            position += meta.size_bytes
        assert position == start + total
        self._size_bytes = position

    def _cut_back(self, size_bytes: int) -> None:
        """Drop the part of a failed write that reached the file (shrinking needs no space).

        Never below a truncation's zeroed tail: views handed out before it may still cover it.
        """
        assert self._fd is not None
        try:
            os.ftruncate(self._fd, max(size_bytes, self._slack_end))
        except OSError as error:  # the tail stays; recovery cuts it at the next open
            log.error("segment %s: cannot cut a failed write back: %s", self.log_path, error)

    def _write_rest(self, views: list[memoryview], position: int, written: int) -> None:
        """Finish a short write (a full disk raises; a signal may leave part undone)."""
        assert self._fd is not None and written >= 0
        offset = position + written
        skip = written
        for view in views:
            if skip >= len(view):
                skip -= len(view)
                continue
            rest, skip = view[skip:], 0
            while len(rest):
                count = os.pwrite(self._fd, rest, offset)
                if count <= 0:
                    raise ZlogError(ErrorCode.KAFKA_STORAGE_ERROR, f"short write: {self.log_path}")
                rest, offset = rest[count:], offset + count

    def _index_batch(self, position: int, meta: BatchMeta) -> None:
        assert self._offsets is not None and self._times is not None
        assert meta.base_offset >= self.base_offset
        if self._max_timestamp_ms is None or meta.max_timestamp_ms > self._max_timestamp_ms:
            self._max_timestamp_ms = meta.max_timestamp_ms
        if position == 0 or self._bytes_since_entry >= self.index_interval_bytes:
            relative = meta.base_offset - self.base_offset
            self._offsets.append(relative, position)
            self._times.append(self._max_timestamp_ms, relative, position)
            self._bytes_since_entry = 0
        self._bytes_since_entry += meta.size_bytes
        self.next_offset = meta.next_offset

    def sync(self) -> None:
        """fsync the data (only when a topic asks for it, as in Kafka, where replication is the
        safety; zlog's replication is still to come)."""
        if self._fd is not None:
            os.fdatasync(self._fd)
        self.unsynced_messages = 0

    def seal(self) -> None:
        """The segment will not grow again: write its indexes and stop writing."""
        assert not self.sealed
        assert self._offsets is not None and self._times is not None
        self._offsets.write(self.index_path)
        self._times.write(self.time_index_path)
        self._drop_slack()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.sealed = True

    def _drop_slack(self) -> None:
        """Shrink the file to its logical size (zeros left by a truncation go).

        A view handed out before the truncation and still held now would point past the end
        of the file; fetch responses are sent within milliseconds, and a segment is sealed
        only once it is full again, so none is left by then.
        """
        if self._fd is not None and os.fstat(self._fd).st_size > self.size_bytes:
            os.ftruncate(self._fd, self.size_bytes)
        self._slack_end = 0

    def truncate_to(self, offset: int) -> None:
        """Drop every batch that holds an offset >= `offset`; the writer keeps running.

        The cut bytes are overwritten with zeros rather than removed from the file, so views
        handed out earlier never point past the end of the file (which would be SIGBUS).
        """
        assert not self.sealed and self._fd is not None
        position = self._position_of(offset)
        old_size = self.size_bytes
        zeros = bytes(min(_ZERO_CHUNK_BYTES, max(old_size - position, 0)))
        cursor = position
        while cursor < old_size:
            chunk = zeros[: old_size - cursor]
            cursor += os.pwrite(self._fd, chunk, cursor)
        self._slack_end = max(self._slack_end, old_size)
        self._size_bytes = position
        self._rebuild_after_cut(position)

    def _rebuild_after_cut(self, position: int) -> None:
        """Recompute next offset, max timestamp and indexes for the prefix [0, position)."""
        self._offsets = SparseIndex(OFFSET_ENTRY)
        self._times = SparseIndex(TIME_ENTRY)
        self._max_timestamp_ms = -1
        self._bytes_since_entry = 0
        self.next_offset = self.base_offset
        view = self._view()
        cursor = 0
        while cursor < position:
            meta = batch_meta(view, cursor)
            self._index_batch(cursor, meta)
            cursor += meta.size_bytes
        assert cursor == position

    # ------------------------------------------------------------------ reading

    def _view(self) -> memoryview:
        """A read-only view of the whole segment; the mapping is renewed when the file grew."""
        size = self.size_bytes
        if size == 0:
            return memoryview(b"")
        if self._map is None or self._map_bytes < size:
            fd = os.open(self.log_path, os.O_RDONLY)
            try:
                self._map = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
            finally:
                os.close(fd)
            self._map_bytes = size
        return memoryview(self._map)[:size]

    def _position_of(self, offset: int) -> int:
        """Start of the first batch whose offsets reach `offset` (size_bytes if none)."""
        self.verify()
        self._load_indexes()
        assert self._offsets is not None
        view = self._view()
        size = self.size_bytes
        position = lookup_position(self._offsets, offset - self.base_offset)
        while position < size:
            meta = batch_meta(view, position)
            if meta.next_offset > offset:
                return position
            position += meta.size_bytes
        return size

    def read(
        self, offset: int, max_bytes: int, upto_offset: int, *, at_least_one: bool = True
    ) -> tuple[memoryview | None, int]:
        """Whole batches from the one holding `offset`, ending before `upto_offset`.

        Returns one contiguous view (None when nothing qualifies) and the offset to continue
        from. With `at_least_one`, the first batch is returned even when it is larger than
        `max_bytes`, so that a consumer always makes progress (Kafka's rule); without it, a
        batch that does not fit leaves the view None and the offset unchanged.
        """
        start = self._position_of(offset)
        view = self._view()
        size = self.size_bytes
        if start >= size:
            return None, self.next_offset
        first = batch_meta(view, start)
        if first.base_offset >= upto_offset:
            return None, first.base_offset
        if first.size_bytes > max_bytes and not at_least_one:
            return None, offset
        limit = min(start + max(max_bytes, 0), self._position_of(upto_offset))
        end = start + first.size_bytes
        next_offset = first.next_offset
        assert self._offsets is not None
        jump = lookup_position_at_or_before(self._offsets, limit)
        if jump > end:
            end = jump
            next_offset = batch_meta(view, end).base_offset
        while end < size:
            meta = batch_meta(view, end)
            if end + meta.size_bytes > limit or meta.base_offset >= upto_offset:
                break
            end += meta.size_bytes
            next_offset = meta.next_offset
        assert end > start
        return view[start:end], next_offset

    def first_batch_at_or_after_time(self, timestamp_ms: int) -> memoryview | None:
        """The first batch whose max timestamp is >= `timestamp_ms`, if this segment has one."""
        self.verify()
        self._load_indexes()
        assert self._times is not None
        if self.max_timestamp_ms < timestamp_ms:
            return None
        view = self._view()
        position = lookup_time(self._times, timestamp_ms)
        while position < self.size_bytes:
            meta = batch_meta(view, position)
            if meta.max_timestamp_ms >= timestamp_ms:
                return view[position : position + meta.size_bytes]
            position += meta.size_bytes
        return None

    def max_timestamp_batch(self, from_offset: int,
                            upto_offset: int) -> tuple[int, memoryview] | None:
        """The largest timestamp of this segment's records in [from_offset, upto_offset) and
        the first batch holding it (None: no record there), for ListOffsets' max timestamp.

        Each batch header carries its max timestamp and each time index entry the segment's
        running maximum up to its batch: a range from the segment's start reads the index up
        to its last entry before `upto_offset`, then the headers of at most an index interval
        of batches. A range starting inside (the log start moved into the segment) walks the
        headers from there. A batch either bound cuts is decoded: only its records in the
        range count.
        """
        self.verify()
        self._load_indexes()
        assert self._times is not None
        view = self._view()
        end = self._position_of(upto_offset)  # the batch holding upto_offset, if any
        best: int | None = None
        best_at = -1  # -1: the first batch whose max reaches `best` (from the index)
        position = 0
        if from_offset > self.base_offset:
            position = self._position_of(from_offset)
        else:
            indexed = running_max_before(self._times, end)
            if indexed is not None:
                best, position = indexed
                position += batch_meta(view, position).size_bytes
        stop = end
        if end < self.size_bytes and batch_meta(view, end).base_offset < upto_offset:
            stop += batch_meta(view, end).size_bytes  # the batch upto_offset cuts
        while position < stop:
            meta = batch_meta(view, position)
            batch = view[position : position + meta.size_bytes]
            if from_offset <= meta.base_offset and meta.next_offset <= upto_offset:
                stamp: int | None = meta.max_timestamp_ms
            else:
                stamp = _max_timestamp_within(batch, from_offset, upto_offset)
            if stamp is not None and (best is None or stamp > best):
                best, best_at = stamp, position
            position += meta.size_bytes
        if best is None:
            return None
        if best_at < 0:
            found = self.first_batch_at_or_after_time(best)
            assert found is not None, "the index's running maximum is a batch's"
            return best, found
        return best, view[best_at : best_at + batch_meta(view, best_at).size_bytes]

    def batch_views(self) -> list[memoryview]:
        """Every batch of the segment, in order (for compaction and tests)."""
        view = self._view()
        views: list[memoryview] = []
        position = 0
        while position < self.size_bytes:
            meta = batch_meta(view, position)
            views.append(view[position : position + meta.size_bytes])
            position += meta.size_bytes
        return views

    # ------------------------------------------------------------------ integrity

    @property
    def verified(self) -> bool:
        """Every batch checked (or written by this process); a corrupt one never is."""
        return self._checked_bytes < 0 or (self._corrupt is None
                                           and self._checked_bytes >= self.size_bytes)

    def verify(self, max_bytes: int = -1) -> bool:
        """Check the CRC of the batches not checked yet, about `max_bytes` of them (all with
        -1); True once the whole segment is checked. Raises CorruptSegmentError, now and at
        every later call, at the first batch that fails: it and what follows are never
        served. Written by this process: nothing to check."""
        if self._corrupt is not None:
            raise self._corrupt
        if self.verified:
            return True
        size = self.size_bytes
        start = self._checked_bytes
        end = size if max_bytes < 0 else min(size, start + max(max_bytes, 1))
        found, checked = batch_header.scan_batches(self._view(), start, check_crc=True,
                                                   stop_at=end)
        for position, header in found:
            if not _in_order(header, self._checked_offset, self.next_offset):
                checked = position
                break
            self._checked_offset = header.next_offset
        self._checked_bytes = checked
        if checked < end:  # the walk stopped at a batch that is not whole, or out of order
            self._corrupt = CorruptSegmentError(
                self._checked_offset,
                f"segment {self.log_path}: the batch at byte {checked} (offset "
                f"{self._checked_offset}) fails its CRC or offset check; the segment is not "
                "served from there on")
            log.error("%s", self._corrupt.message)
            raise self._corrupt
        return self._checked_bytes >= size

    # ------------------------------------------------------------------ lazy index load

    def _load_indexes(self) -> None:
        """Load a sealed segment's indexes; rebuild them if missing or not trustworthy."""
        if self._offsets is not None:
            return
        offsets = SparseIndex.read(self.index_path, OFFSET_ENTRY)
        times = SparseIndex.read(self.time_index_path, TIME_ENTRY)
        span = max(self.next_offset - self.base_offset, 1)
        if offsets is not None and times is not None and is_consistent(
            offsets, times, self.size_bytes, span
        ) and all(points_at_batches(index, self._view(), self.base_offset)
                  for index in (offsets, times)):
            self._offsets, self._times = offsets, times
            self._max_timestamp_ms = self._last_batches_max_timestamp()
            return
        log.warning("segment %s: rebuilding a missing or damaged index", self.log_path)
        self._offsets = SparseIndex(OFFSET_ENTRY)
        self._times = SparseIndex(TIME_ENTRY)
        self._max_timestamp_ms = -1
        end_offset = self.next_offset
        self._rebuild_after_cut(self.size_bytes)
        self.next_offset = end_offset
        self._offsets.write(self.index_path)
        self._times.write(self.time_index_path)

    def _last_batches_max_timestamp(self) -> int:
        """The segment's max timestamp: the last index entry's, then the batches after it."""
        assert self._times is not None
        entries = self._times.entries
        running = int(entries["timestamp_ms"][-1]) if len(entries) else -1
        position = int(entries["position"][-1]) if len(entries) else 0
        view = self._view()
        while position < self.size_bytes:
            meta = batch_meta(view, position)
            running = max(running, meta.max_timestamp_ms)
            position += meta.size_bytes
        return running

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Stop writing; a sealed segment's mapping is left to the garbage collector."""
        if self._fd is not None:
            self._drop_slack()
            os.close(self._fd)
            self._fd = None
        self._map = None

    def delete(self) -> None:
        """Unlink the files; views handed out earlier stay valid (the inode lives on)."""
        self.close()
        for path in (self.log_path, self.index_path, self.time_index_path):
            path.unlink(missing_ok=True)


def _max_timestamp_within(batch: memoryview, from_offset: int, upto_offset: int) -> int | None:
    """The largest timestamp of the batch's records in [from_offset, upto_offset), if any."""
    parsed = parse_batch(batch, check_crc=False)
    stamps = [stamp for offset, stamp in zip(parsed.offsets.tolist(),
                                             parsed.timestamps_ms.tolist(), strict=True)
              if from_offset <= offset < upto_offset]
    return max(stamps) if stamps else None
