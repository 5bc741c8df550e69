"""Logs and disks: `MemoryLog` (the in-memory twin of PartitionLog) with what the simulator
needs on top.

`SimLog` keeps an index of its batches (offsets, epoch, batch id) so that reads and the
checker's questions cost little, and tells an observer (the checker) about every leader append
and every truncation before it happens. It also tracks how much of it was written back to disk
(`flushed_end`): a power loss cuts the log there, which is how zlog's page-cache writes behave
(docs/reliability.md §2: no fsync by default). A process crash keeps everything (the ring and
the page cache survive it). Retention deletes whole batches from the front (`delete_oldest`):
each batch reads as a segment of its own, and the last one, the active segment, never goes.

`SimDisk` is one broker's data directory: a log per partition and the leader-epoch checkpoint,
which zlog fsyncs on every change (epoch_checkpoint.py), so a power loss never loses it. A wipe
loses everything, and the directory comes back with a new id (meta.json's dir_id).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Protocol

from tests.memory_log import MemoryLog
from zlog.broker.data.isr import IsrChange
from zlog.errors import ErrorCode, ZlogError
from zlog.record.header import BatchHeader, read_header

BATCH_ID_BASE_MS = 1_700_000_000_000  # a batch's id is its first timestamp minus this


def batch_id_of(batch: bytes | bytearray | memoryview) -> int:
    return read_header(batch).base_timestamp_ms - BATCH_ID_BASE_MS


class LogObserver(Protocol):
    def leader_appended(self, log: SimLog, index: int) -> None: ...

    def truncating(self, log: SimLog, new_end: int) -> None: ...

    def batch_added(self, log: SimLog, index: int) -> None: ...

    def batches_removed(self, log: SimLog, removed: list[BatchInfo]) -> None: ...


@dataclass(frozen=True, slots=True)
class BatchInfo:
    base: int
    next: int
    epoch: int
    batch_id: int
    producer: tuple[int, int, int]  # (producer id, producer epoch, first sequence)


class SimLog(MemoryLog):
    def __init__(self, broker: int, partition: int, observer: LogObserver | None) -> None:
        super().__init__()
        self.broker, self.partition = broker, partition
        self.observer = observer
        self.infos: list[BatchInfo] = []
        self._bases: list[int] = []
        self.flushed_end = 0
        self.changes = 0  # bumped at every change: the checker rechecks what changed

    # -- the index ---------------------------------------------------------------------------

    def _note(self, stored: bytearray) -> None:
        header = read_header(stored)
        self.infos.append(BatchInfo(
            header.base_offset, header.next_offset, header.partition_leader_epoch,
            header.base_timestamp_ms - BATCH_ID_BASE_MS,
            (header.producer_id, header.producer_epoch, header.base_sequence)))
        self._bases.append(header.base_offset)
        self.changes += 1
        if self.observer is not None:
            self.observer.batch_added(self, len(self.infos) - 1)

    def _cut_index(self, count: int) -> None:
        removed = self.infos[count:]
        del self.infos[count:]
        del self._bases[count:]
        self.changes += 1
        if self.observer is not None and removed:
            self.observer.batches_removed(self, removed)

    def index_of(self, offset: int) -> int | None:
        """The index of the batch holding `offset`, if this log holds it."""
        i = bisect.bisect_right(self._bases, offset) - 1
        if i >= 0 and self.infos[i].base <= offset < self.infos[i].next:
            return i
        return None

    def batch_at(self, offset: int) -> BatchInfo | None:
        i = self.index_of(offset)
        return None if i is None else self.infos[i]

    def holds(self, offset: int, batch: tuple[int, int]) -> bool:
        """Whether this log holds `batch`, (batch id, leader epoch), at `offset`: an
        idempotent retry is the same batch id, appended again by another leader."""
        info = self.batch_at(offset)
        return (info is not None and info.base == offset
                and (info.batch_id, info.epoch) == batch)

    # -- LogLike -------------------------------------------------------------------------------

    def append(self, batch: bytes | memoryview | bytearray, *, leader_epoch: int = -1,
               header: BatchHeader | None = None) -> int:
        base = super().append(batch, leader_epoch=leader_epoch, header=header)
        self._note(self.batches[-1])
        if self.observer is not None:
            self.observer.leader_appended(self, len(self.batches) - 1)
        return base

    def append_replicated(
        self, batch: bytes | memoryview | bytearray, *, defer_flush: bool = False
    ) -> int:
        base = super().append_replicated(batch, defer_flush=defer_flush)
        self._note(self.batches[-1])
        return base

    def read(
        self, offset: int, max_bytes: int, upto_offset: int | None = None
    ) -> list[memoryview]:
        if not self.log_start_offset <= offset <= self.log_end_offset:
            raise ZlogError(ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {offset} is out of range")
        limit = self.log_end_offset if upto_offset is None else upto_offset
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        views: list[memoryview] = []
        used = 0
        while i < len(self.batches):
            info, stored = self.infos[i], self.batches[i]
            i += 1
            if info.next <= offset:
                continue
            if info.base >= limit or (views and used + len(stored) > max_bytes):
                break
            views.append(memoryview(stored))
            used += len(stored)
        return views

    def truncate_to(self, offset: int) -> None:
        if self.observer is not None:
            self.observer.truncating(self, offset)
        keep = 0
        while keep < len(self.infos) and self.infos[keep].next <= offset:
            keep += 1
        self.batches = self.batches[:keep]
        self._cut_index(keep)
        self.log_end_offset = (self.infos[-1].next if self.infos
                               else min(self.log_start_offset, offset))
        self.flushed_end = min(self.flushed_end, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        if self.observer is not None:
            # Below the log start, a cut of every batch; past the log end, a follower starting
            # over at its leader's log start: what it drops lies below it, and went from the
            # leader's log by retention (the checks do not ask a log for what lies below its
            # start), so nothing is cut from the end.
            self.observer.truncating(self, offset if offset < self.log_start_offset
                                     else self.log_end_offset)
        super().truncate_fully_and_start_at(offset)
        self._cut_index(0)
        self.flushed_end = offset

    def _drop_below(self, offset: int) -> None:
        """DeleteRecords, or a follower following its leader's log start: the batches wholly
        below `offset` go (the log start itself is set by the caller)."""
        count = 0
        while count < len(self.infos) and self.infos[count].next <= offset:
            count += 1
        removed = self.infos[:count]
        del self.infos[:count]
        del self._bases[:count]
        self.batches = self.batches[count:]
        self.changes += 1
        if self.observer is not None and removed:
            self.observer.batches_removed(self, removed)

    def delete_oldest(self, count: int) -> None:
        """Retention: the `count` oldest batches go, and the log starts at the next one."""
        removed = self.infos[:count]
        del self.infos[:count]
        del self._bases[:count]
        self.batches = self.batches[count:]
        self.log_start_offset = self.infos[0].base if self.infos else self.log_end_offset
        self.changes += 1
        if self.observer is not None and removed:
            self.observer.batches_removed(self, removed)

    def same_batches(self, other: SimLog) -> bool:
        """Whether the two logs end at the same offset and hold the same batches from the later
        of their starts (retention deletes each replica's front on its own)."""
        if self.log_end_offset != other.log_end_offset:
            return False
        start = max(self.log_start_offset, other.log_start_offset)
        return self._from(start) == other._from(start)

    def _from(self, offset: int) -> list[bytearray]:
        return self.batches[bisect.bisect_left(self._bases, offset):]

    # -- the disk underneath -------------------------------------------------------------------

    def flush(self) -> None:
        self.flushed_end = self.log_end_offset

    def wipe(self) -> int:
        """The disk is gone (replaced, or formatted): nothing is left. Returns the batches."""
        lost = len(self.infos)
        self.batches = []
        self._cut_index(0)
        self.log_start_offset = self.log_end_offset = self.flushed_end = 0
        return lost

    def lose_unflushed(self) -> int:
        """Power loss: whatever was not written back is gone. Returns the batches lost."""
        keep = 0
        while keep < len(self.infos) and self.infos[keep].next <= self.flushed_end:
            keep += 1
        lost = len(self.infos) - keep
        self.batches = self.batches[:keep]
        self._cut_index(keep)
        self.log_end_offset = self.infos[-1].next if self.infos else self.log_start_offset
        return lost


@dataclass(slots=True)
class SimDisk:
    broker: int
    generation: int = 0  # bumped by each wipe: a new data directory, with a new id
    logs: dict[int, SimLog] = field(default_factory=dict)
    epoch_checkpoints: dict[int, bytes] = field(default_factory=dict)  # fsynced at each write
    last_high_watermark: dict[int, int] = field(default_factory=dict)  # the ring header's HW
    isr_changes: dict[int, IsrChange] = field(default_factory=dict)  # isr-change-in-flight

    def log(self, partition: int, observer: LogObserver | None) -> SimLog:
        found = self.logs.get(partition)
        if found is None:
            found = self.logs[partition] = SimLog(self.broker, partition, observer)
        return found

    def flush(self) -> None:
        for log in self.logs.values():
            log.flush()

    def power_loss(self) -> int:
        self.last_high_watermark.clear()  # the ring header lived in /dev/shm
        self.isr_changes.clear()  # written without fsync
        return sum(log.lose_unflushed() for log in self.logs.values())

    @property
    def dir_id(self) -> str:
        """The data directory's id (meta.json's): another after each wipe."""
        return f"{self.broker:016x}{self.generation:016x}"

    def wipe(self) -> int:
        """The host's disk replaced: logs, checkpoints and the ring headers are gone, and the
        broker comes back on a new directory. Returns the batches lost."""
        self.generation += 1
        self.epoch_checkpoints.clear()
        self.last_high_watermark.clear()
        return sum(log.wipe() for log in self.logs.values())
