"""Durable Chained-Raft state: one append-only file of CRC-framed records, one fsync per Ready.

docs/raft.md §2.3 lists what must survive a crash (term, vote, head, commit, the block
store, the snapshot) and §5 says each Ready is persisted atomically before its messages go
out: an AppendResp promises that the blocks survive, a VoteResp that the vote does. So
`save(ready)` encodes everything the Ready changes into ONE record, appends it with one
write and makes it durable with one fdatasync (group commit: a Ready already batches every
proposal and message that arrived since the last one).

A Ready that changes only the commit point or the set of pruned blocks is written but not
fsynced (etcd's MustSync rule): no message promises either, a crash that loses one merely
loads an older commit (learned again from the leader; commit is volatile in Raft) or dead
blocks that the core drops again at load. The next synced record flushes it too, and the
file is a log, so a crash can only lose a suffix of unsynced records. This takes one fsync
off every commit's critical path on both the leader and the followers.

File `raft.log` in the data directory is a sequence of frames:

    u32 body_len | u32 crc32c(body) | body
    body = u8 version | u8 kind | u8 present (1 = hard state, 2 = head, 4 = snapshot)
           | HardState? | BlockId head? | Snapshot? | u32 block_count | Block * block_count
           | u32 pruned_count | BlockId * pruned_count

A DELTA record applies on top of what came before, in this order: hard state, head, new
blocks, pruned ids, then the snapshot, which keeps only the blocks that descend from its
`last` (so it makes every earlier block obsolete, and wipes the store when a leader's
snapshot does not extend what this node holds, as §4 requires). A CHECKPOINT record first
clears everything: it is the whole state.

Preallocation. The file is grown in zero-filled chunks of `preallocate_bytes` and records are
written into that space with pwrite at the logical end. Overwriting blocks that already exist
changes no metadata, so fdatasync flushes only data pages and skips the journal commit that
every appending write needs; on the 2-core VM of docs/benchmarks.md that cut the fdatasync
p99 from ~2-4 ms to ~0.3 ms, and the fsync tail is the commit latency tail. The zero filling
costs one large write per chunk. A frame header of zeros ends the scan.

Crash safety. A kill -9 (or power cut) can leave a torn last frame; its length or CRC does not
check, so `load()` stops at the last whole frame and zeroes every non-zero byte after it
before new records are written there (a shorter new record must not leave a tail of the old
one that could parse). Frames before the last fdatasync are whole by then. When the file grows
past `rewrite_threshold_bytes` (and holds mostly obsolete records) the state is written as one
CHECKPOINT to `raft.log.tmp`, fsynced, renamed over `raft.log`, and the directory fsynced:
either the old or the new file is found after a crash, never a mix. That rewrite costs a
second fsync (of the directory), once per threshold's worth of writes.

An I/O error while saving is not recoverable here: after a failed fsync the kernel may have
dropped the dirty pages, so the caller must stop the node rather than retry (the supervisor
restarts it and it reloads what is really on disk).
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Final

import crc32c

from zlog import limits
from zlog.raft.codec import (
    BLOCK_HEADER_BYTES,
    VERSION,
    CodecError,
    Reader,
    read_block,
    read_block_id,
    read_hard_state,
    read_snapshot,
    write_block,
    write_block_id,
    write_hard_state,
    write_snapshot,
)
from zlog.raft.messages import GENESIS, Block, BlockId, HardState, PersistedState, Ready, Snapshot

LOG_NAME: Final = "raft.log"
TEMP_NAME: Final = "raft.log.tmp"
REWRITE_THRESHOLD_BYTES_DEFAULT: Final = 64 * 1024 * 1024
PREALLOCATE_BYTES_DEFAULT: Final = 4 * 1024 * 1024
_ZEROS = bytes(1024 * 1024)

_FRAME = struct.Struct(">II")
_RECORD_HEAD = struct.Struct(">BBB")
_U32 = struct.Struct(">I")
_HAS_HARD_STATE: Final = 1
_HAS_HEAD: Final = 2
_HAS_SNAPSHOT: Final = 4
_BLOCK_OVERHEAD_BYTES: Final = BLOCK_HEADER_BYTES


class RecordKind(IntEnum):
    DELTA = 1  # what one Ready changed
    CHECKPOINT = 2  # the whole state; everything before it is obsolete


@dataclass(frozen=True, slots=True)
class _Record:
    kind: RecordKind
    hard_state: HardState | None
    head: BlockId | None
    snapshot: Snapshot | None
    blocks: tuple[Block, ...]
    pruned: tuple[BlockId, ...]

    def new_blocks_or_head_or_snapshot(self) -> bool:
        return bool(self.blocks) or self.head is not None or self.snapshot is not None


@dataclass(slots=True)
class StorageStatistics:
    """Counters for tests and the benchmark: fsyncs per Ready is the figure that matters."""

    records_written: int = 0
    bytes_written: int = 0
    fsyncs: int = 0
    unsynced_records: int = 0  # commit-only or prune-only records, flushed by the next fsync
    fsync_ms_total: float = 0.0
    fsync_ms_max: float = 0.0  # the worst single fsync: the disk's share of a latency tail
    rewrites: int = 0
    torn_bytes_cut: int = 0


def _encode_record(record: _Record) -> bytes:
    present = (
        (_HAS_HARD_STATE if record.hard_state is not None else 0)
        | (_HAS_HEAD if record.head is not None else 0)
        | (_HAS_SNAPSHOT if record.snapshot is not None else 0)
    )
    body = bytearray(_RECORD_HEAD.pack(VERSION, record.kind, present))
    if record.hard_state is not None:
        write_hard_state(body, record.hard_state)
    if record.head is not None:
        write_block_id(body, record.head)
    if record.snapshot is not None:
        write_snapshot(body, record.snapshot)
    body += _U32.pack(len(record.blocks))
    for block in record.blocks:
        write_block(body, block)
    body += _U32.pack(len(record.pruned))
    for block_id in record.pruned:
        write_block_id(body, block_id)
    assert len(body) <= limits.RAFT_STORAGE_RECORD_BYTES_MAX, "record over its bound"
    return _FRAME.pack(len(body), crc32c.crc32c(body)) + bytes(body)


def _decode_body(body: memoryview) -> _Record:
    reader = Reader(body)
    version, kind, present = reader.unpack(_RECORD_HEAD)
    if version != VERSION:
        raise CodecError(f"unknown record version {version}")
    if present & ~(_HAS_HARD_STATE | _HAS_HEAD | _HAS_SNAPSHOT):
        raise CodecError(f"unknown record flags {present:#x}")
    try:
        record_kind = RecordKind(kind)
    except ValueError:
        raise CodecError(f"unknown record kind {kind}") from None
    hard_state = read_hard_state(reader) if present & _HAS_HARD_STATE else None
    head = read_block_id(reader) if present & _HAS_HEAD else None
    snapshot = read_snapshot(reader) if present & _HAS_SNAPSHOT else None
    (block_count,) = reader.unpack(_U32)
    if block_count * _BLOCK_OVERHEAD_BYTES > reader.remaining():
        raise CodecError(f"{block_count} blocks cannot fit in {reader.remaining()} bytes")
    blocks = tuple(read_block(reader) for _ in range(block_count))
    (pruned_count,) = reader.unpack(_U32)
    if pruned_count * 16 != reader.remaining():
        raise CodecError(f"{pruned_count} pruned ids do not fill {reader.remaining()} bytes")
    pruned = tuple(read_block_id(reader) for _ in range(pruned_count))
    reader.expect_end()
    return _Record(record_kind, hard_state, head, snapshot, blocks, pruned)


def _scan(data: bytes) -> tuple[list[_Record], int]:
    """Whole records from the start of `data`, and the offset where the first bad one begins."""
    records: list[_Record] = []
    view = memoryview(data)
    offset = 0
    while len(data) - offset >= _FRAME.size:
        body_len, crc = _FRAME.unpack_from(view, offset)
        end = offset + _FRAME.size + body_len
        if body_len == 0 or body_len > limits.RAFT_STORAGE_RECORD_BYTES_MAX or end > len(data):
            break  # zeros: the preallocated space after the last record
        body = view[offset + _FRAME.size : end]
        if crc32c.crc32c(body) != crc:
            break
        try:
            records.append(_decode_body(body))
        except CodecError:
            break
        offset = end
    return records, offset


def _fsync_directory(directory: Path) -> None:
    """Make a created or renamed file's directory entry durable (rename is not, by itself)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class RaftStorage:
    """The block store, hard state, head and snapshot of one node, in `directory`.

    Single-threaded: the runner's loop is the only caller. Call `load()` once, before the
    first `save()`; it also repairs a torn tail so that new records follow whole ones.
    """

    def __init__(
        self,
        directory: Path,
        *,
        rewrite_threshold_bytes: int = REWRITE_THRESHOLD_BYTES_DEFAULT,
        preallocate_bytes: int = PREALLOCATE_BYTES_DEFAULT,
        fsync: bool = True,
    ) -> None:
        assert rewrite_threshold_bytes > 0, "rewrite threshold must be positive"
        assert preallocate_bytes >= 0, "preallocation cannot be negative"
        self.directory = Path(directory)
        self.rewrite_threshold_bytes = rewrite_threshold_bytes
        self.preallocate_bytes = preallocate_bytes
        self.fsync = fsync  # off only for tests that measure something other than the disk
        self.statistics = StorageStatistics()
        self._fd: int | None = None
        self._file_bytes = 0  # the logical end: where the next record goes
        self._allocated_bytes = 0  # the file's size; zeros from _file_bytes on
        self._hard_state: HardState | None = None
        self._head: BlockId | None = None
        self._snapshot: Snapshot | None = None
        self._blocks: dict[BlockId, Block] = {}
        self._live_bytes = 0  # encoded size of the state: what a checkpoint would write

    @property
    def path(self) -> Path:
        return self.directory / LOG_NAME

    @property
    def logical_bytes(self) -> int:
        """Where the records end (the file is longer: preallocated zeros follow)."""
        return self._file_bytes

    @property
    def block_count(self) -> int:
        return len(self._blocks)

    @property
    def live_bytes(self) -> int:
        """About how many bytes the live state takes; the runner compacts when it is large."""
        return self._live_bytes

    def load(self) -> PersistedState | None:
        """Read the log back, cut a torn tail, and return the state (None for a new node)."""
        assert self._fd is None, "load() runs once, before save()"
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / TEMP_NAME).unlink(missing_ok=True)  # a rewrite that never renamed
        created = not self.path.exists()
        data = b"" if created else self.path.read_bytes()
        records, good_bytes = _scan(data)
        for record in records:
            self._apply(record)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        torn_bytes = len(data[good_bytes:].rstrip(b"\0"))
        if torn_bytes:
            self.statistics.torn_bytes_cut += torn_bytes
            self._write_zeros(self._fd, good_bytes, good_bytes + torn_bytes)
            self._sync(self._fd)
        if created:
            _fsync_directory(self.directory)
        self._file_bytes = good_bytes
        self._allocated_bytes = len(data)
        return self.state()

    def state(self) -> PersistedState | None:
        """What load() would return now: the state as of the last save()."""
        nothing_saved = self._hard_state is None and self._head is None
        if nothing_saved and not self._blocks and self._snapshot is None:
            return None
        base = self._snapshot.last if self._snapshot is not None else GENESIS
        hard_state = self._hard_state or HardState(term=0, vote=None, commit=base)
        return PersistedState(
            hard_state=hard_state,
            head=self._head or base,
            blocks=tuple(sorted(self._blocks.values(), key=lambda block: block.id)),
            snapshot=self._snapshot,
        )

    def save(self, ready: Ready) -> None:
        """Persist what `ready` changes with one write and at most one fsync.

        A Ready that changes nothing durable (only messages, committed blocks or read states)
        writes nothing; one that changes only commit or pruned ids is not fsynced.
        """
        assert self._fd is not None, "load() before save()"
        record = _Record(
            RecordKind.DELTA, ready.hard_state, ready.head, ready.snapshot, ready.new_blocks,
            ready.pruned,
        )
        if record == _Record(RecordKind.DELTA, None, None, None, (), ()):
            return
        must_sync = self._must_sync(record)
        self._apply(record)
        encoded = _encode_record(record)
        if self._should_rewrite(len(encoded)):
            self._rewrite()
            return
        self._write_record(encoded)
        if must_sync:
            self._sync(self._fd)
        else:
            self.statistics.unsynced_records += 1
        self.statistics.records_written += 1

    def _must_sync(self, record: _Record) -> bool:
        """Whether a message may depend on this record: new term or vote, blocks, head,
        snapshot. Commit and pruned ids alone promise nothing to anyone."""
        if record.new_blocks_or_head_or_snapshot():
            return True
        hard, durable = record.hard_state, self._hard_state
        if hard is None:
            return False
        return durable is None or (hard.term, hard.vote) != (durable.term, durable.vote)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _should_rewrite(self, record_bytes: int) -> bool:
        """Rewrite when the file passes the threshold and is mostly obsolete records."""
        grown_bytes = self._file_bytes + record_bytes
        return grown_bytes > self.rewrite_threshold_bytes and grown_bytes > 2 * self._live_bytes

    def _rewrite(self) -> None:
        assert self._fd is not None
        checkpoint = _encode_record(
            _Record(
                RecordKind.CHECKPOINT, self._hard_state, self._head, self._snapshot,
                tuple(self._blocks.values()), (),
            )
        )
        temp_path = self.directory / TEMP_NAME
        temp_fd = os.open(temp_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        allocated_bytes = len(checkpoint) + self.preallocate_bytes
        try:
            self._write_at(temp_fd, checkpoint, 0)
            self._write_zeros(temp_fd, len(checkpoint), allocated_bytes)
            self._sync(temp_fd)
        except BaseException:
            os.close(temp_fd)
            raise
        os.replace(temp_path, self.path)
        _fsync_directory(self.directory)
        os.close(self._fd)
        self._fd = temp_fd
        self._file_bytes = len(checkpoint)
        self._allocated_bytes = allocated_bytes
        self.statistics.rewrites += 1
        self.statistics.records_written += 1

    def _apply(self, record: _Record) -> None:
        if record.kind == RecordKind.CHECKPOINT:
            self._hard_state, self._head, self._snapshot = None, None, None
            self._blocks.clear()
            self._live_bytes = 0
        if record.hard_state is not None:
            self._hard_state = record.hard_state
        if record.head is not None:
            self._head = record.head
        for block in record.blocks:
            if block.id not in self._blocks:
                self._live_bytes += _BLOCK_OVERHEAD_BYTES + len(block.payload)
            self._blocks[block.id] = block
        for block_id in record.pruned:
            removed = self._blocks.pop(block_id, None)
            if removed is not None:
                self._live_bytes -= _BLOCK_OVERHEAD_BYTES + len(removed.payload)
        if record.snapshot is not None:
            self._install(record.snapshot)
        assert self._live_bytes >= 0, "live byte count went negative"

    def _install(self, snapshot: Snapshot) -> None:
        """Keep only the blocks that descend from the snapshot's last block (§4 Snapshot)."""
        if self._snapshot is not None:
            self._live_bytes -= len(self._snapshot.data)
        self._snapshot = snapshot
        self._live_bytes += len(snapshot.data)
        kept: dict[BlockId, Block] = {}
        for block in sorted(self._blocks.values(), key=lambda b: b.id.height):
            if block.id.height > snapshot.last.height and (
                block.parent == snapshot.last or block.parent in kept
            ):
                kept[block.id] = block
        for block_id, block in self._blocks.items():
            if block_id not in kept:
                self._live_bytes -= _BLOCK_OVERHEAD_BYTES + len(block.payload)
        self._blocks = kept

    def _write_record(self, encoded: bytes) -> None:
        """Write at the logical end, first growing the zeroed space if the record needs it."""
        assert self._fd is not None
        end = self._file_bytes + len(encoded)
        if end > self._allocated_bytes:
            grown = end + self.preallocate_bytes
            self._write_zeros(self._fd, end, grown)  # the size change rides on this fsync
            self._allocated_bytes = grown
        self._write_at(self._fd, encoded, self._file_bytes)
        self._file_bytes = end

    def _write_zeros(self, fd: int, start: int, end: int) -> None:
        for offset in range(start, end, len(_ZEROS)):
            self._write_at(fd, _ZEROS[: min(len(_ZEROS), end - offset)], offset)

    def _write_at(self, fd: int, data: bytes, offset: int) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, offset)
            assert written > 0, "write made no progress"
            view = view[written:]
            offset += written
        self.statistics.bytes_written += len(data)

    def _sync(self, fd: int) -> None:
        if self.fsync:
            started = time.perf_counter()
            os.fdatasync(fd)
            elapsed_ms = (time.perf_counter() - started) * 1000
            self.statistics.fsyncs += 1
            self.statistics.fsync_ms_total += elapsed_ms
            self.statistics.fsync_ms_max = max(self.statistics.fsync_ms_max, elapsed_ms)
