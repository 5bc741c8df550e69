"""PartitionLog: one partition's ordered segments, fed through its shared-memory ring.

Write path: `append` validates the batch header (unless the caller hands it the header it
validated already) and the CRC (never the records one by one), copies the batch into the ring
with its base offset stamped, and then flushes ring -> active segment (after every append by
default, or once `ring_flush_bytes` are pending).
Because the ring lives in shared memory, an append that returned survives a SIGKILL of this
process: the next `PartitionLog` opened on the partition replays the ring into the segment.

Ownership: exactly one process writes a partition (the ring's flock enforces it). Within that
process, appends, truncation and retention run on one thread; compaction may run on another
and only swaps sealed segments under the segment list's lock. The list of segments itself
(opening, rolling, reading across them, cutting) is `log_segments.py`'s.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from time import perf_counter_ns

from zlog.clock import Clock, SystemClock
from zlog.errors import ErrorCode, ZlogError
from zlog.record import header as batch_header
from zlog.record.arrays import parse_batch
from zlog.shm_segments.durable_files import replace_atomically
from zlog.shm_segments.log_config import LogConfig
from zlog.shm_segments.log_io_stats import LogIoStats
from zlog.shm_segments.log_segments import LogSegments
from zlog.shm_segments.retention import SegmentInfo, segments_due, wholly_below
from zlog.shm_segments.ring import (
    RING_DIRECTORY_DEFAULT,
    RingFullError,
    RingLockedError,
    RingWriter,
)
from zlog.shm_segments.ring_dirs import RING_SUFFIX, claim
from zlog.shm_segments.segment import BatchMeta, Segment, batch_meta

log = logging.getLogger(__name__)

LOG_START_FILE = "log-start-offset"
FILE_NAME_BYTES_MAX = 255  # NAME_MAX of ext4, xfs, btrfs and tmpfs


def default_ring_dir(data_dir: Path) -> Path:
    """Rings of one data directory live together on tmpfs, apart from other brokers' rings."""
    digest = hashlib.sha1(str(data_dir.resolve()).encode()).hexdigest()[:16]
    base = RING_DIRECTORY_DEFAULT if RING_DIRECTORY_DEFAULT.is_dir() else Path(data_dir) / ".rings"
    return base / f"zlog-{digest}"


def partition_dir_name(topic: str, partition: int) -> str:
    assert partition >= 0 and topic and "/" not in topic and topic not in {".", ".."}
    return f"{topic}-{partition}"


def ring_file_name(topic: str, partition: int) -> str:
    """`<topic>-<partition>.ring`, or a shortened name with a digest when that is too long.

    A topic name may take 249 characters (Kafka's bound, chosen so that `<topic>-<partition>`
    fits a file system's 255-byte names); the ring's suffix would push the longest names past
    that, so those rings are named by a prefix of the topic and a digest of the whole name.
    """
    name = f"{partition_dir_name(topic, partition)}{RING_SUFFIX}"
    if len(name.encode()) <= FILE_NAME_BYTES_MAX:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:16]
    tail = f"~{digest}-{partition}{RING_SUFFIX}"
    prefix = topic.encode()[: FILE_NAME_BYTES_MAX - len(tail)].decode(errors="ignore")
    shortened = prefix + tail
    assert len(shortened.encode()) <= FILE_NAME_BYTES_MAX
    return shortened


def ring_path_for(ring_dir: Path, topic: str, partition: int) -> Path:
    """Where a partition's ring lives; the one rule, for the writer and for the metadata."""
    return ring_dir / ring_file_name(topic, partition)


class PartitionLog:
    """The jocko CommitLog/Partition API over rings and segments."""

    def __init__(
        self,
        data_dir: Path,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        *,
        ring_dir: Path | None = None,
        clock: Clock | None = None,
        on_roll: Callable[[], None] | None = None,
    ) -> None:
        """`on_roll` is called after each roll (the broker snapshots its producer table)."""
        self.config = config or LogConfig()
        self.clock = clock or SystemClock()
        self.topic, self.partition = topic, partition
        self.directory = Path(data_dir) / partition_dir_name(topic, partition)
        ring_base = ring_dir or default_ring_dir(Path(data_dir))
        self.ring_path = ring_path_for(ring_base, topic, partition)
        self._closed = False
        self._last_sync_ms = self.clock.monotonic_ms()
        self.flush_error: ZlogError | None = None  # why the ring cannot be flushed right now
        self.io = LogIoStats()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            ring_base.mkdir(parents=True, exist_ok=True)
            claim(ring_base, Path(data_dir))  # whose rings these are, for `zlog rings`
            self._segments = LogSegments(self.directory, lambda: self.config, self.clock,
                                         self._read_log_start, on_roll=on_roll)
            self.recovered_bytes_dropped = self._segments.recovered_bytes_dropped
            self._ring = self._open_ring()
            self._replay_ring()
        except BaseException as error:
            self._release_after_failed_open()
            if isinstance(error, OSError):
                raise ZlogError(
                    ErrorCode.KAFKA_STORAGE_ERROR,
                    f"cannot open {topic}-{partition} in {data_dir}: {error.strerror or error}",
                ) from error
            raise
        self._log_start_offset = max(self._read_log_start(), self._segments.first_base_offset)
        # Where committed records end, as the partition last said (`publish_high_watermark`):
        # retention and DeleteRecords never go past it. Nothing is known committed until then.
        self._high_watermark = self._log_start_offset
        self._retention_waits = False  # retention is held back by the HW (logged once)

    def _release_after_failed_open(self) -> None:
        """Close whatever the failed open had opened: no descriptor or ring lock may leak."""
        segments: LogSegments | None = getattr(self, "_segments", None)
        if segments is not None:
            segments.close(ignore_errors=True)
        ring = getattr(self, "_ring", None)
        if ring is not None:
            ring.close()
        self._closed = True

    # ------------------------------------------------------------------ opening

    def _open_ring(self) -> RingWriter:
        try:
            return RingWriter(self.ring_path, self.config.ring_bytes)
        except RingLockedError:
            raise  # another live writer owns the partition: never take its ring away
        except ZlogError as error:
            log.warning("ring %s unusable (%s); starting a new one", self.ring_path, error)
            self.ring_path.unlink(missing_ok=True)
            return RingWriter(self.ring_path, self.config.ring_bytes)

    def _replay_ring(self) -> None:
        """Flush into the segment what a previous writer left in the ring and had not flushed.

        When the segment cannot take it (a full disk), the rest stays in the ring, where it
        is as safe as before: the log opens anyway, serves what is on disk, and `tick` moves
        the rest once there is room.
        """
        leo = self._active.next_offset
        replayed = 0
        for position, view in self._ring.unflushed_batches():
            try:
                batch_header.validate_batch(view, strict=False)
            except ZlogError as error:
                log.warning("ring %s: stopping replay at a bad batch: %s", self.ring_path, error)
                break
            meta = batch_meta(view)
            if meta.next_offset <= leo:
                continue
            if meta.base_offset != leo:
                log.error(
                    "ring %s: batch at offset %d does not follow the log end %d; not replayed",
                    self.ring_path, meta.base_offset, leo,
                )
                break
            try:
                self._segments.write([view], [meta])
            except ZlogError as error:
                if error.code != ErrorCode.KAFKA_STORAGE_ERROR:
                    raise
                self._ring.mark_flushed(position)
                self._note_flush_failure(error)
                self.replayed_batches = replayed
                return
            leo = meta.next_offset
            replayed += 1
        if replayed:
            log.info("ring %s: replayed %d batches into the log", self.ring_path, replayed)
        self.replayed_batches = replayed
        self._ring.reset(leo)

    # ------------------------------------------------------------------ offsets

    @property
    def _active(self) -> Segment:
        return self._segments.active

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets (Kafka's LEO)."""
        return max(self._ring.next_offset, self._active.next_offset)

    def _read_log_start(self) -> int:
        try:
            return int((self.directory / LOG_START_FILE).read_text().strip() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def _write_log_start(self, *, durable: bool = False) -> None:
        replace_atomically(self.directory / LOG_START_FILE,
                           f"{self._log_start_offset}\n".encode(), durable=durable)

    # ------------------------------------------------------------------ appending

    def append(
        self, batch: memoryview | bytes | bytearray, *, leader_epoch: int = -1,
        header: batch_header.BatchHeader | None = None,
    ) -> int:
        """Assign offsets to a producer's batch and store it; returns its base offset.

        `header` is what `validate_batch(batch, strict=True, check_crc=False)` returned for
        exactly these bytes (the partition's rules check every batch before they append it):
        the header is then not validated a second time. The CRC is checked here either way.
        """
        if header is None or header.size_bytes != len(batch):
            header = batch_header.validate_batch(batch, strict=True, check_crc=False)
        return self._append(batch, header, self.log_end_offset, leader_epoch)

    def append_replicated(
        self, batch: memoryview | bytes | bytearray, *, defer_flush: bool = False
    ) -> int:
        """Store a batch copied from the leader with its offsets as they are (followers).

        `defer_flush` leaves the batch in the ring (stored: a restart replays it) for the
        caller's `tick` to move into the segment: a follower sends its next fetch first, so
        the segment write overlaps the leader's answer instead of delaying the request.
        """
        header = batch_header.validate_batch(batch, strict=False, check_crc=False)
        if header.base_offset < self.log_end_offset:
            raise ZlogError(
                ErrorCode.INVALID_REQUEST,
                f"replicated batch at offset {header.base_offset} is below the log end "
                f"{self.log_end_offset}; truncate first",
            )
        return self._append(batch, header, None, None, defer_flush=defer_flush)

    def _append(
        self,
        batch: memoryview | bytes | bytearray,
        header: batch_header.BatchHeader,
        base_offset: int | None,
        leader_epoch: int | None,
        *,
        defer_flush: bool = False,
    ) -> int:
        """Copy into the ring (CRC checked on the ring's copy), then flush per the policy
        (or leave it there for the caller's `tick` when `defer_flush`)."""
        assert not self._closed, "append on a closed log"
        size_bytes = len(batch)
        if size_bytes > self.config.max_message_bytes:
            raise ZlogError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {size_bytes} bytes exceeds max.message.bytes "
                f"{self.config.max_message_bytes}",
            )
        if size_bytes > self.config.segment_bytes:
            raise ZlogError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"batch of {size_bytes} bytes exceeds segment.bytes {self.config.segment_bytes}",
            )
        base = header.base_offset if base_offset is None else base_offset
        meta = BatchMeta(base, base + header.last_offset_delta + 1, header.max_timestamp_ms,
                         size_bytes)
        ring = self._ring
        if size_bytes > ring.max_batch_bytes:
            self._append_directly(batch, base_offset, leader_epoch)
        else:
            position = self._ring_append(batch, meta.next_offset, base_offset, leader_epoch)
            if defer_flush:
                pass  # the caller's tick moves it; a full ring flushes in _ring_append
            elif self.config.ring_flush_bytes == 0 and ring.flushed_position == position:
                # Write-through, the common case: exactly this batch is pending.
                started_ns = perf_counter_ns()
                try:
                    self._segments.write(ring.unflushed_views(), [meta])
                except ZlogError:
                    # Refused as a whole: the batch leaves the ring too, so the producer's
                    # error means "not stored" and its retry does not make a duplicate.
                    ring.reset(self._active.next_offset)
                    raise
                ring.mark_flushed(position + size_bytes)
                self.io.flushed(perf_counter_ns() - started_ns)
                self.flush_error = None
            elif ring.unflushed_bytes() > self.config.ring_flush_bytes:
                self._flush_if_possible()
        if self._syncing:
            self._maybe_sync()
        return base

    def _ring_append(
        self,
        batch: memoryview | bytes | bytearray,
        next_offset: int,
        base_offset: int | None,
        leader_epoch: int | None,
    ) -> int:
        check = batch_header.verify_crc
        try:
            return self._ring.append(
                batch, next_offset, base_offset=base_offset,
                partition_leader_epoch=leader_epoch, check=check,
            )
        except RingFullError:
            self.flush()  # backpressure: make room by moving data to the segment, never drop
            return self._ring.append(
                batch, next_offset, base_offset=base_offset,
                partition_leader_epoch=leader_epoch, check=check,
            )

    def _append_directly(
        self, batch: memoryview | bytes | bytearray, base_offset: int | None,
        leader_epoch: int | None,
    ) -> None:
        """A batch too large for the ring goes straight to the segment, after what is pending."""
        batch_header.verify_crc(batch)
        self.flush()
        stamped = bytearray(batch)
        if base_offset is not None:
            batch_header.stamp(stamped, base_offset, leader_epoch)
        view = memoryview(stamped)
        self._segments.write([view], [batch_meta(view)])
        self._ring.reset(self._active.next_offset)

    def flush(self) -> None:
        """Move everything pending in the ring into the active segment (no fsync).

        Raises KAFKA_STORAGE_ERROR when the segment cannot take it; what was not moved stays
        in the ring (a batch in the ring is stored), and a later flush tries again.
        """
        views: list[memoryview] = []
        metas: list[BatchMeta] = []
        end = self._ring.flushed_position
        for position, view in self._ring.unflushed_batches():
            views.append(view)
            metas.append(batch_meta(view))
            end = position + len(view)
        if views:
            started_ns = perf_counter_ns()
            try:
                self._segments.write(views, metas)
            except ZlogError as error:
                self._mark_written_prefix()
                self._note_flush_failure(error)
                raise
            self._ring.mark_flushed(end)
            self.io.flushed(perf_counter_ns() - started_ns)
        if self.flush_error is not None:
            log.info("%s-%d: the ring flushes into %s again", self.topic, self.partition,
                     self.directory)
            self.flush_error = None

    def _mark_written_prefix(self) -> None:
        """After a failed multi-batch flush: the batches that did reach a segment (one that
        rolled before the failure) are marked flushed, so they are never written twice."""
        written_end = self._active.next_offset
        position = self._ring.flushed_position
        for ring_position, view in self._ring.unflushed_batches():
            if batch_meta(view).next_offset > written_end:
                break
            position = ring_position + len(view)
        if position != self._ring.flushed_position:
            self._ring.mark_flushed(position)

    def _note_flush_failure(self, error: ZlogError) -> None:
        """Log a storage failure once per episode, not once per attempt."""
        if self.flush_error is None:
            log.error("%s-%d: cannot move the ring into the segment files: %s",
                      self.topic, self.partition, error.message)
        self.flush_error = error

    def _flush_if_possible(self) -> bool:
        """Flush, or keep the data in the ring when the disk refuses it (logged once)."""
        try:
            self.flush()
        except ZlogError as error:
            if error.code != ErrorCode.KAFKA_STORAGE_ERROR:
                raise
            return False
        return True

    def roll(self) -> None:
        """Seal the active segment and start a new one at the log end (`LogSegments.roll`)."""
        self._segments.roll()

    # ------------------------------------------------------------------ durability knobs

    @property
    def _syncing(self) -> bool:
        return self.config.fsyncs

    def _maybe_sync(self) -> None:
        if not self._syncing:
            return
        now_ms = self.clock.monotonic_ms()
        by_count = 0 < self.config.flush_messages <= self._active.unsynced_messages
        by_time = 0 <= self.config.flush_ms <= now_ms - self._last_sync_ms
        if by_count or by_time:
            self.sync()

    def sync(self) -> None:
        """Flush the ring and fsync the active segment."""
        self.flush()
        started_ns = perf_counter_ns()
        self._active.sync()
        self.io.synced(perf_counter_ns() - started_ns)
        self._last_sync_ms = self.clock.monotonic_ms()

    def tick(self) -> None:
        """Periodic work of the writer: time-based flush and fsync (`flush.ms`), and another
        try at moving what a full disk left in the ring."""
        if self._ring.unflushed_bytes() and not self._flush_if_possible():
            return
        self._maybe_sync()

    def verify_sealed(self, max_bytes: int) -> bool:
        """Check the CRCs of about `max_bytes` more of the sealed segments this process did
        not write; True once all are checked. CorruptSegmentError names the first offset
        that cannot be trusted (docs/storage.md, "Recovery and opening time")."""
        return self._segments.verify_sealed(max_bytes)

    # ------------------------------------------------------------------ reading

    def read(
        self, offset: int, max_bytes: int, upto_offset: int | None = None
    ) -> list[memoryview]:
        """Whole batches from the one holding `offset`, at most about `max_bytes`.

        Returns memoryviews of the segment files' pages (no copy), one per segment touched.
        The first batch is returned whole even when larger than `max_bytes`. Batches at or
        above `upto_offset` (the high watermark, for consumers) are never returned.
        """
        end = self.log_end_offset
        if offset < self._log_start_offset or offset > end:
            raise ZlogError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} is outside [{self._log_start_offset}, {end}] "
                f"of {self.topic}-{self.partition}",
            )
        limit = end if upto_offset is None else min(upto_offset, end)
        if offset >= limit:
            return []
        if (
            self._ring.unflushed_bytes() and limit > self._active.next_offset
            and not self._flush_if_possible()
        ):
            limit = min(limit, self._active.next_offset)  # what is on disk; the rest later
            if offset >= limit:
                return []
        return self._segments.read(offset, max_bytes, limit)

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """The earliest offset whose record timestamp is >= `timestamp_ms` (None if none)."""
        self._flush_if_possible()
        for segment in self._segments.snapshot():
            if segment.is_empty or segment.next_offset <= self._log_start_offset:
                continue
            found = segment.first_batch_at_or_after_time(timestamp_ms)
            if found is None:
                continue
            parsed = parse_batch(found, check_crc=False)
            for offset, stamp in zip(
                parsed.offsets.tolist(), parsed.timestamps_ms.tolist(), strict=True
            ):
                if stamp >= timestamp_ms and offset >= self._log_start_offset:
                    return int(offset)
        return None

    def max_timestamp_record(self, upto_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp from the log
        start to `upto_offset` (None: no record there): ListOffsets' max timestamp (KIP-734).

        Only a segment whose max timestamp passes the best one so far is looked into, and
        there its time index and batch headers (`Segment.max_timestamp_batch`); the one batch
        found is decoded for the record."""
        self._flush_if_possible()
        log_start_offset = self._log_start_offset
        best: tuple[int, memoryview] | None = None
        for segment in self._segments.snapshot():
            if (segment.is_empty or segment.next_offset <= log_start_offset
                    or (best is not None and segment.max_timestamp_ms <= best[0])):
                continue
            if segment.base_offset >= upto_offset:
                break
            found = segment.max_timestamp_batch(log_start_offset, upto_offset)
            if found is not None and (best is None or found[0] > best[0]):
                best = found
        if best is None:
            return None
        timestamp_ms, batch = best
        parsed = parse_batch(batch, check_crc=False)
        for offset, stamp in zip(
            parsed.offsets.tolist(), parsed.timestamps_ms.tolist(), strict=True
        ):
            if stamp == timestamp_ms and log_start_offset <= offset < upto_offset:
                return int(offset), int(stamp)
        raise AssertionError(f"no record of {timestamp_ms} in the batch that holds it")

    def publish_high_watermark(self, offset: int) -> None:
        """Where committed records end: for readers of the ring on this host
        (`client/local_ring.py`: none of theirs reaches `offset`), and the bound of what
        retention and DeleteRecords may delete."""
        self._high_watermark = offset
        self._ring.publish_high_watermark(offset)

    @property
    def published_high_watermark(self) -> int | None:
        """The last high watermark published in the ring, by this process or by one killed
        before it reopened the log (None: none)."""
        return self._ring.published_high_watermark

    # ------------------------------------------------------------------ cutting

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset >= `offset` (a follower's divergent tail)."""
        if offset >= self.log_end_offset:
            return
        self.flush()
        if offset <= self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        self._segments.truncate_to(offset)
        self._ring.reset(self._active.next_offset)
        if self._active.next_offset < self._log_start_offset:
            # The batch holding the log start was cut: the log is now empty at its end.
            self._log_start_offset = self._active.next_offset
            self._write_log_start()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop all data; the log restarts empty at `offset` (a follower far behind a leader)."""
        assert offset >= 0
        self.flush()
        self._segments.restart_at(offset)
        self._log_start_offset = offset
        self._write_log_start()
        self._ring.reset(offset)

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset (Kafka DeleteRecords); returns the new log start.

        Only up to the high watermark, as Kafka's `Partition.deleteRecordsOnLeader`: records
        above it may not be on every in-sync replica yet. The new log start is on disk
        (fsynced) before any segment goes, so deleted records never come back, not after a
        power loss either; a log start inside a segment hides that segment's records below it.
        """
        end = self.log_end_offset
        if offset < 0 or offset > end:
            raise ZlogError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"cannot delete records before {offset}: the log ends at {end}",
            )
        if offset > self._high_watermark:
            raise ZlogError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"cannot delete records before {offset}: above the high watermark "
                f"{self._high_watermark}",
            )
        if offset <= self._log_start_offset:
            return self._log_start_offset
        previous, self._log_start_offset = self._log_start_offset, offset
        try:
            self._write_log_start(durable=True)
        except OSError:
            self._log_start_offset = previous  # not stored: nothing is deleted
            raise
        if self._flush_if_possible():  # a full disk: the sealed segments below still go
            if self._ring.tail_offset < offset:
                # Readers of the ring on this host (local consumers) must not find what is
                # gone: all of it is in the segment now, so it restarts empty at the log end.
                self._ring.reset(self._active.next_offset)
            if offset >= self._active.next_offset and self._active.size_bytes:
                self.roll()
        self._delete_oldest(self._segments.count_below(offset))
        return self._log_start_offset

    def _delete_oldest(self, count: int) -> None:
        if count <= 0:
            return
        self._segments.delete_oldest(count)
        if self._segments.first_base_offset > self._log_start_offset:
            self._log_start_offset = self._segments.first_base_offset
            self._write_log_start()

    # ------------------------------------------------------------------ retention

    def sealed_segment_infos(self) -> list[SegmentInfo]:
        return self._segments.sealed_infos()

    def enforce_retention(self, *, keep_from_offset: int | None = None) -> int:
        """Delete the oldest sealed segments that retention says to, of those wholly below
        the high watermark and `keep_from_offset` (where the broker's producer table can be
        rebuilt from: producer_snapshots.py); returns how many.

        Runs even when the ring cannot be flushed: deleting old segments may be what frees
        the disk. Segments due but not below the high watermark wait for the followers
        (retention.py), which is logged once per episode: a follower that holds the HW back
        lets the log outgrow its retention until it catches up or leaves the ISR.
        """
        self._flush_if_possible()
        sealed = self.sealed_segment_infos()
        due = segments_due(sealed, self._active.size_bytes, self.config.retention,
                           self.clock.wall_ms())
        upto = self._high_watermark
        below_hw = wholly_below(sealed, due, upto)
        count = below_hw if keep_from_offset is None else wholly_below(
            sealed, below_hw, min(upto, keep_from_offset))
        self._delete_oldest(count)
        self._note_retention_wait(due - below_hw)
        return count

    def _note_retention_wait(self, waiting: int) -> None:
        if waiting and not self._retention_waits:
            log.warning("%s-%d: retention waits for the high watermark %d: %d segments past "
                        "retention hold records not every in-sync replica has; they go once "
                        "the followers fetch them or leave the ISR", self.topic,
                        self.partition, self._high_watermark, waiting)
        elif not waiting and self._retention_waits:
            log.info("%s-%d: retention no longer waits for the high watermark", self.topic,
                     self.partition)
        self._retention_waits = waiting > 0

    @property
    def size_bytes(self) -> int:
        return self._segments.size_bytes

    @property
    def ring_fill_bytes(self) -> tuple[int, int]:
        """(bytes in the ring not yet in a segment, the ring's capacity)."""
        return self._ring.unflushed_bytes(), self._ring.capacity_bytes

    @property
    def segment_count(self) -> int:
        return self._segments.count

    def segments_snapshot(self) -> list[Segment]:
        """The current segments, oldest first (compaction reads the sealed ones)."""
        return self._segments.snapshot()

    def swap_compacted(self, old: Segment, cleaned_path: Path) -> bool:
        """Put a compacted copy of a sealed segment in its place (`LogSegments.swap_compacted`);
        False when the segment is no longer in the log."""
        return self._segments.swap_compacted(old, cleaned_path)

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Flush the ring into the segment and release the partition.

        What a full disk keeps from being flushed stays in the ring for the next writer.
        """
        if self._closed:
            return
        try:
            if self._flush_if_possible() and self._syncing:
                self._active.sync()
        finally:
            self._segments.close()
            self._ring.close()
            self._closed = True

    def delete(self) -> None:
        """Remove the partition's data and ring for good (topic deletion)."""
        if not self._closed:
            self._segments.close()
            self._ring.unlink()
            self._closed = True
        else:
            self.ring_path.unlink(missing_ok=True)
        shutil.rmtree(self.directory, ignore_errors=True)

    @staticmethod
    def remove(data_dir: Path, topic: str, partition: int, ring_dir: Path | None = None) -> None:
        """Remove a partition's data and ring without opening it (a deleted topic's leftovers).

        Opening could fail for the very reason the data must go (a full disk, a name the file
        system refuses), so nothing is read. The ring's lock is taken first: a live writer
        elsewhere keeps its partition (RingLockedError).
        """
        directory = Path(data_dir) / partition_dir_name(topic, partition)
        ring_path = ring_path_for(ring_dir or default_ring_dir(Path(data_dir)), topic, partition)
        with contextlib.suppress(FileNotFoundError), RingWriter.locked(ring_path):
            ring_path.unlink(missing_ok=True)
        if directory.is_dir() and not directory.is_symlink():
            shutil.rmtree(directory, ignore_errors=True)
        else:
            directory.unlink(missing_ok=True)

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
