"""The shared-memory ring's data area and its rules, on any buffer (DESIGN.md section 1).

A ring holds one partition's newest record batches between the worker accepting them and the
active segment file receiving them. This module is pure: it works on a memoryview that
`ring.py` maps from a file under /dev/shm and that the unit tests make from a bytearray. The
header page in front of the data area, and the state it publishes, are `ring_header.py`'s; the
publishing protocol and the memory-ordering argument are written at the top of `ring.py`.

Positions are logical byte counts that only grow; the byte at position p lives at
data[p % capacity], and each pass of the positions over the data area is a lap. The data area
holds batches back to back exactly as they will lie in the segment file: a batch delimits
itself through its batchLength (bytes 8-11), so there is no per-entry header and a flush is one
`os.write` per contiguous span. A batch never straddles the end of the data area: when it does
not fit, the writer leaves a filler and puts the batch at the next lap's start. The filler is a
PAD marker (a batch's 12-byte log overhead alone: baseOffset -1 and a batchLength that runs to
the end of the area), or nothing when fewer than 12 bytes remain; either way it always ends at
the lap's end, so skipping one costs a single read of that prefix.

The ring reads a batch only through the fields the batch header's layout places
(`zlog.record.header`): its framing, its leader epoch and its lastOffsetDelta. It never decodes
a batch; checking one is the `check` its writer is handed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Final, TypeAlias

from zlog.errors import ZlogError
from zlog.record.header import (
    LAST_OFFSET_DELTA_AT,
    LOG_OVERHEAD,
    LOG_OVERHEAD_BYTES,
    PARTITION_LEADER_EPOCH_AT,
)
from zlog.shm_segments.ring_header import (
    HEADER_BYTES,
    RingState,
    commit_state,
    corrupt,
    read_capacity,
    read_high_watermark,
    read_sequence,
    read_state,
    read_tail_position,
    state_problem,
    write_high_watermark,
    write_writer_pid,
)

BatchBytes: TypeAlias = bytes | bytearray | memoryview

PAD_BASE_OFFSET: Final = -1
# Reclaiming frees at least 1/RECLAIM_SHARE of the ring at a time, so the walk over old headers
# and the extra commit are paid once per many appends, while readers keep nearly a whole ring
# of history (all but 2 MiB of a 64 MiB ring).
RECLAIM_SHARE: Final = 32
# find() restarts from the new tail each time the writer overtakes its scan; past this many
# restarts it reports the offset as not in the ring and the caller reads the segment files.
FIND_RESTARTS_MAX: Final = 16

_BASE_OFFSET: Final = struct.Struct(">q")
_INT32: Final = struct.Struct(">i")


class RingFullError(Exception):
    """The batch fits only over bytes not yet flushed: the caller must flush, then append again."""


class RingOverrunError(Exception):
    """The writer overwrote (or reset) the bytes at `position` before the reader had copied them.

    Not an error of the ring: a reader that falls a whole ring behind loses its place. It reads
    the same offsets from the segment files, or resumes at `tail_position`.
    """

    def __init__(self, position: int, tail_position: int) -> None:
        super().__init__(
            f"ring position {position} was overwritten; the ring now starts at {tail_position}"
        )
        self.position = position
        self.tail_position = tail_position


# ---------------------------------------------------------------------------------- walking


def _filler_end(data: memoryview, capacity_bytes: int, position: int) -> int:
    """Where the filler at `position` ends (the next lap's start), or `position` for a batch.

    Only for positions below head: at or past head the bytes are stale and may look like a PAD.
    """
    physical = position % capacity_bytes
    remaining_bytes = capacity_bytes - physical
    if remaining_bytes < LOG_OVERHEAD_BYTES:
        return position + remaining_bytes
    base_offset, batch_length = LOG_OVERHEAD.unpack_from(data, physical)
    if base_offset != PAD_BASE_OFFSET:
        return position
    if batch_length != remaining_bytes - LOG_OVERHEAD_BYTES:
        raise corrupt(f"PAD at position {position} claims {batch_length} bytes")
    return position + remaining_bytes


def _batch_at(
    data: memoryview, capacity_bytes: int, position: int, head_position: int
) -> tuple[int, int]:
    """(base offset, size in bytes) of the batch at `position`, whole within its lap and head."""
    physical = position % capacity_bytes
    if capacity_bytes - physical < LOG_OVERHEAD_BYTES:
        raise corrupt(f"no room for a batch header at position {position}")
    base_offset, batch_length = LOG_OVERHEAD.unpack_from(data, physical)
    size_bytes = batch_length + LOG_OVERHEAD_BYTES
    if base_offset < 0 or batch_length < 0:
        raise corrupt(f"batch at position {position}: baseOffset {base_offset}, "
                       f"batchLength {batch_length}")
    if physical + size_bytes > capacity_bytes or position + size_bytes > head_position:
        raise corrupt(f"{size_bytes}-byte batch at position {position} runs past its lap "
                       f"or past head {head_position}")
    return base_offset, size_bytes


def _entry_end(data: memoryview, capacity_bytes: int, position: int, head_position: int) -> int:
    """Where the entry (a filler or a batch) at `position` ends."""
    filler_end = _filler_end(data, capacity_bytes, position)
    if filler_end != position:
        return filler_end
    return position + _batch_at(data, capacity_bytes, position, head_position)[1]


def _walk_batches(
    data: memoryview, capacity_bytes: int, start_position: int, end_position: int
) -> Iterator[tuple[int, int, int]]:
    """(position, base offset, size) of each batch in [start, end), fillers skipped."""
    position = start_position
    while position < end_position:
        position = _filler_end(data, capacity_bytes, position)
        if position >= end_position:
            if position > end_position:
                raise corrupt(f"a filler runs past position {end_position}")
            return
        base_offset, size_bytes = _batch_at(data, capacity_bytes, position, end_position)
        yield position, base_offset, size_bytes
        position += size_bytes


# ---------------------------------------------------------------------------------- writer


class LayoutWriter:
    """The single writer's side of a ring: append, flush bookkeeping and reset.

    The writer's own attributes are the truth; after every change it commits a copy to the
    header (a whole state slot, then the sequence that names it), and it reads the header back
    only when it opens the ring. See `ring.py` for the order of stores within an append.
    """

    def __init__(self, buffer: memoryview, writer_pid: int = 0) -> None:
        assert not buffer.readonly, "the writer needs a writable buffer"
        self.capacity_bytes = read_capacity(buffer)
        state = read_state(buffer)
        problem = state_problem(state, self.capacity_bytes)
        if problem is not None:
            raise corrupt(problem)
        # A batch of up to half the capacity fits once everything is flushed, even when it has
        # to skip almost a whole batch's worth of bytes at the end of the area.
        self.max_batch_bytes = self.capacity_bytes // 2
        self.reclaim_bytes_min = max(1, self.capacity_bytes // RECLAIM_SHARE)
        # Prove once, on open, that tail..head holds whole batches: what the segment file will
        # receive must be, and reclaiming then walks these headers without checking them again.
        data = buffer[HEADER_BYTES:]
        try:
            for _ in _walk_batches(data, self.capacity_bytes, state.tail_position,
                                   state.head_position):
                pass
        except ZlogError:
            data.release()  # so that the caller can unmap the buffer
            raise
        self._buffer = buffer
        self._data = data
        self._sequence = read_sequence(buffer)
        self._head = state.head_position
        self._flushed = state.flushed_position
        self._tail = state.tail_position
        self._next_offset = state.next_offset
        self._tail_offset = state.tail_offset
        self._wrap = state.wrap_position
        self._generation = state.generation
        write_writer_pid(buffer, writer_pid)

    def publish_high_watermark(self, high_watermark: int) -> None:
        """Readers return no record at or past `high_watermark` (with replication, the
        records every in-sync replica holds end there, below the committed next_offset)."""
        write_high_watermark(self._buffer, high_watermark)

    @property
    def published_high_watermark(self) -> int | None:
        """The high watermark in the header: this writer's, or the last one's before it was
        killed (the header outlives its writer; None when none was published)."""
        return read_high_watermark(self._buffer)

    # The names the log reads; the writer is the only one that changes them.
    @property
    def head_position(self) -> int:
        return self._head

    @property
    def flushed_position(self) -> int:
        return self._flushed

    @property
    def tail_position(self) -> int:
        return self._tail

    @property
    def next_offset(self) -> int:
        return self._next_offset

    @property
    def tail_offset(self) -> int:
        return self._tail_offset

    @property
    def generation(self) -> int:
        return self._generation

    def state(self) -> RingState:
        return RingState(
            self._head, self._flushed, self._tail, self._next_offset, self._tail_offset,
            self._wrap, self._generation,
        )

    def append(
        self,
        batch: BatchBytes,
        next_offset: int,
        *,
        base_offset: int | None = None,
        partition_leader_epoch: int | None = None,
        check: Callable[[memoryview], object] | None = None,
    ) -> int:
        """Copy one batch in and commit it; returns the position it starts at.

        `check`, when given, runs on the ring's copy before anything is committed; an
        exception from it leaves the ring as it was (the log checks the CRC there, while the
        copy is still in the CPU cache).

        `base_offset` and `partition_leader_epoch`, when given, are stamped into the ring's copy
        (both lie outside the CRC), which saves the log a copy of the batch just to stamp it.
        Raises ValueError for a batch over `max_batch_bytes` (it belongs in the segment file
        directly, followed by `reset`, so that readers of the ring do not skip it unaware) or
        under the 12 bytes that frame it, and RingFullError when only unflushed bytes could
        make room.
        """
        size_bytes = len(batch)
        if not LOG_OVERHEAD_BYTES <= size_bytes <= self.max_batch_bytes:
            raise ValueError(
                f"a {size_bytes}-byte batch does not fit a ring that takes up to "
                f"{self.max_batch_bytes} bytes; write it to the segment directly"
            )
        batch_base_offset, batch_length = LOG_OVERHEAD.unpack_from(batch)
        if base_offset is None:
            base_offset = batch_base_offset
        assert batch_length + LOG_OVERHEAD_BYTES == size_bytes, "batchLength must span the batch"
        assert self._next_offset <= base_offset < next_offset, (base_offset, next_offset)
        capacity_bytes = self.capacity_bytes
        head = self._head
        physical = head % capacity_bytes
        remaining_bytes = capacity_bytes - physical
        start = head if size_bytes <= remaining_bytes else head + remaining_bytes
        end = start + size_bytes
        if end - self._tail > capacity_bytes:
            if end - self._flushed > capacity_bytes:
                raise RingFullError(
                    f"a {size_bytes}-byte batch needs {end - self._flushed - capacity_bytes} "
                    f"more bytes flushed out of the ring"
                )
            self._reclaim(min(self._flushed, end - capacity_bytes + self.reclaim_bytes_min))
        data = self._data
        if start != head:
            if remaining_bytes >= LOG_OVERHEAD_BYTES:
                LOG_OVERHEAD.pack_into(
                    data, physical, PAD_BASE_OFFSET, remaining_bytes - LOG_OVERHEAD_BYTES
                )
            physical = 0
        data[physical : physical + size_bytes] = batch
        if check is not None:
            # Nothing is committed yet: if the check raises, the copy lies past the head,
            # where no reader looks, and the next append overwrites it.
            check(data[physical : physical + size_bytes])
        if physical == 0:
            self._wrap = head
        if base_offset != batch_base_offset:
            _BASE_OFFSET.pack_into(data, physical, base_offset)
        if partition_leader_epoch is not None:
            assert size_bytes >= PARTITION_LEADER_EPOCH_AT + _INT32.size
            _INT32.pack_into(data, physical + PARTITION_LEADER_EPOCH_AT, partition_leader_epoch)
        if self._tail == head:
            self._tail_offset = base_offset
        self._head = end
        self._next_offset = next_offset
        self._commit()
        return start

    def _reclaim(self, tail_position_min: int) -> None:
        """Move the tail over flushed entries until it reaches `tail_position_min`, and commit
        it before a single byte behind it is overwritten, so that readers can tell."""
        assert self._tail < tail_position_min <= self._flushed
        data, capacity_bytes, head = self._data, self.capacity_bytes, self._head
        tail = self._tail
        # The walk of _entry_end, inlined: this runs for every batch that ever leaves the ring.
        # It trusts headers that were checked on open or written by this writer.
        while tail < tail_position_min:  # bounded: every entry is at least one byte long
            physical = tail % capacity_bytes
            remaining_bytes = capacity_bytes - physical
            if remaining_bytes < LOG_OVERHEAD_BYTES:
                tail += remaining_bytes
                continue
            base_offset, batch_length = LOG_OVERHEAD.unpack_from(data, physical)
            assert batch_length >= 0 and (base_offset >= 0 or base_offset == PAD_BASE_OFFSET)
            if base_offset == PAD_BASE_OFFSET:
                tail += remaining_bytes
            else:
                tail += batch_length + LOG_OVERHEAD_BYTES
        assert tail <= self._flushed, "the tail never passes unflushed data"
        if tail < head:
            batch_position = _filler_end(data, capacity_bytes, tail)
            self._tail_offset = _batch_at(data, capacity_bytes, batch_position, head)[0]
        else:
            self._tail_offset = self._next_offset
        self._tail = tail
        self._commit()

    def _commit(self) -> None:
        """Publish the writer's state to readers (`ring_header.commit_state`)."""
        sequence = self._sequence + 1
        commit_state(self._buffer, sequence, (
            self._head, self._flushed, self._tail, self._next_offset, self._tail_offset,
            self._wrap, self._generation,
        ))
        self._sequence = sequence

    def _unflushed_spans(self) -> list[tuple[int, int]]:
        """(physical start, length) of the 0-2 contiguous runs of whole unflushed batches."""
        start, end = self._flushed, self._head
        if start == end:
            return []
        capacity_bytes = self.capacity_bytes
        start = _filler_end(self._data, capacity_bytes, start)
        assert start < end, "a filler below head is always followed by a batch"
        physical = start % capacity_bytes
        lap_end = start - physical + capacity_bytes
        if end <= lap_end:
            return [(physical, end - start)]
        assert start < self._wrap <= lap_end, (start, self._wrap, lap_end)
        return [(physical, self._wrap - start), (0, end - lap_end)]

    def unflushed_views(self) -> list[memoryview]:
        """The bytes to append to the segment file, as they must lie there: one write per view.

        The views alias the ring; they stay valid until their bytes are marked flushed and
        reused. Drop them before close, which otherwise leaves the mapping to the last view.
        """
        return [self._data[start : start + length] for start, length in self._unflushed_spans()]

    def unflushed_bytes(self) -> int:
        return sum(length for _, length in self._unflushed_spans())

    def unflushed_batches(self) -> Iterator[tuple[int, memoryview]]:
        """(position, view) of each unflushed batch, for callers that need per-batch facts."""
        data, capacity_bytes = self._data, self.capacity_bytes
        for position, _, size_bytes in _walk_batches(
            data, capacity_bytes, self._flushed, self._head
        ):
            physical = position % capacity_bytes
            yield position, data[physical : physical + size_bytes]

    def mark_flushed(self, position: int) -> None:
        """Record that everything before `position` is in the segment file.

        `position` must be where a batch ends (or the head). Only a cheap plausibility check is
        made: the bytes there must read as a filler or as a batch that ends by head.
        """
        if not self._flushed <= position <= self._head:
            raise ValueError(
                f"flushed position {position} is outside [{self._flushed}, {self._head}]"
            )
        if position < self._head:
            try:
                _entry_end(self._data, self.capacity_bytes, position, self._head)
            except ZlogError as error:
                raise ValueError(f"position {position} is not a batch boundary") from error
        self._flushed = position
        self._commit()
        assert self._tail <= self._flushed <= self._head

    def reset(self, next_offset: int) -> None:
        """Drop every batch and restart at `next_offset` (a new or truncated log).

        Positions jump to the next lap's start, past every position handed out so far, so a
        reader still holding one gets RingOverrunError instead of batches of another history.
        """
        assert next_offset >= 0, next_offset
        capacity_bytes = self.capacity_bytes
        position = (self._head // capacity_bytes + 1) * capacity_bytes
        self._head = self._flushed = self._tail = self._wrap = position
        self._next_offset = self._tail_offset = next_offset
        self._generation += 1
        self._commit()
        assert not self._unflushed_spans()

    def release(self, writer_pid_after: int = 0) -> None:
        """Stop using the buffer; the caller may then unmap it."""
        write_writer_pid(self._buffer, writer_pid_after)
        self._data.release()
        self._buffer.release()


# ---------------------------------------------------------------------------------- reader


class LayoutReader:
    """Any number of readers, without locks; the writer never waits for them.

    A reader copies bytes, then re-reads the tail: if the tail has passed where it started, the
    writer may have overwritten what it copied, and the copy is thrown away (RingOverrunError).
    """

    def __init__(self, buffer: memoryview) -> None:
        self.capacity_bytes = read_capacity(buffer)
        self._buffer = buffer
        self._data = buffer[HEADER_BYTES:]

    def snapshot(self) -> RingState:
        return read_state(self._buffer)

    @property
    def head_position(self) -> int:
        return read_state(self._buffer).head_position

    @property
    def tail_position(self) -> int:
        return read_state(self._buffer).tail_position

    @property
    def next_offset(self) -> int:
        return read_state(self._buffer).next_offset

    @property
    def tail_offset(self) -> int:
        return read_state(self._buffer).tail_offset

    @property
    def visible_end_offset(self) -> int:
        """The offset no returned record reaches: the committed next_offset, or the published
        high watermark when one is lower (records above it are not committed yet)."""
        next_offset = read_state(self._buffer).next_offset
        high_watermark = read_high_watermark(self._buffer)
        return next_offset if high_watermark is None else min(next_offset, high_watermark)

    @property
    def generation(self) -> int:
        return read_state(self._buffer).generation

    def read(self, position: int, max_bytes: int, end_offset: int | None = None
             ) -> tuple[list[bytes], int]:
        """Copies of the whole batches from `position`, and the position to read next.

        At least one batch comes back if any is committed, even one larger than `max_bytes`
        (Kafka's fetch rule, so a consumer always makes progress); then batches stop before
        `max_bytes` would be passed, and before a batch reaching past `end_offset` (the
        visible end: the next read starts exactly there). RingOverrunError when `position` is
        no longer in the ring.
        """
        views, next_position = self._located(position, max_bytes, end_offset)
        copies = [view.tobytes() for view in views]
        self._raise_if_overrun(position)
        return copies, next_position

    def read_views(self, position: int, max_bytes: int, end_offset: int | None = None
                   ) -> tuple[list[memoryview], int]:
        """`read` without the copy: views of the mapping itself, for readers on the hot path.

        The views are whole when this returns; they stay whole until the writer reclaims their
        space, about a ring's capacity of appends later. A reader uses them, then asks
        `intact(position)`: False means the writer may have overwritten them meanwhile, and
        what was made of them must be thrown away (the batches are in the segment files).
        """
        views, next_position = self._located(position, max_bytes, end_offset)
        self._raise_if_overrun(position)
        return views, next_position

    def intact(self, position: int) -> bool:
        """Whether bytes read from `position` onwards are still the batches that were read."""
        return read_tail_position(self._buffer) <= position

    def _located(self, position: int, max_bytes: int, end_offset: int | None
                 ) -> tuple[list[memoryview], int]:
        state = read_state(self._buffer)
        if position < state.tail_position:
            raise RingOverrunError(position, state.tail_position)
        if position > state.head_position:
            raise ValueError(f"position {position} is past the head {state.head_position}")
        try:
            return self._batch_views(position, state.head_position, max_bytes, end_offset)
        except ZlogError:
            self._raise_if_overrun(position)
            raise

    def _batch_views(
        self, position: int, head_position: int, max_bytes: int, end_offset: int | None
    ) -> tuple[list[memoryview], int]:
        """Views of the batches from `position`; they may be torn until the tail check."""
        data, capacity_bytes = self._data, self.capacity_bytes
        batches: list[memoryview] = []
        taken_bytes = 0
        while position < head_position:
            batch_position = _filler_end(data, capacity_bytes, position)
            if batch_position >= head_position:
                if batch_position > head_position:
                    raise corrupt(f"a filler at position {position} runs past head")
                return batches, batch_position
            base_offset, size_bytes = _batch_at(data, capacity_bytes, batch_position,
                                                head_position)
            if batches and taken_bytes + size_bytes > max_bytes:
                return batches, batch_position
            physical = batch_position % capacity_bytes
            if end_offset is not None and size_bytes >= LAST_OFFSET_DELTA_AT + _INT32.size:
                (last_offset_delta,) = _INT32.unpack_from(data, physical + LAST_OFFSET_DELTA_AT)
                if base_offset + last_offset_delta + 1 > end_offset:
                    return batches, batch_position
            batches.append(data[physical : physical + size_bytes])
            taken_bytes += size_bytes
            position = batch_position + size_bytes
        return batches, position

    def _raise_if_overrun(self, position: int) -> None:
        tail_position = read_tail_position(self._buffer)
        if tail_position > position:
            raise RingOverrunError(position, tail_position)

    def find(self, offset: int) -> int | None:
        """The position of the batch holding `offset`, if the ring still has it.

        The log end (`next_offset`) maps to the head: the next batch will start there. Costs a
        walk over batch headers from the tail, so callers find once and then follow positions.
        """
        for _ in range(FIND_RESTARTS_MAX):
            state = read_state(self._buffer)
            if offset == state.next_offset:
                return state.head_position
            if not state.tail_offset <= offset < state.next_offset:
                return None
            found = self._scan(offset, state)
            if found is not None:
                return found if found >= 0 else None
        return None

    def _scan(self, offset: int, state: RingState) -> int | None:
        """Walk from the tail to the last batch starting at or before `offset`.

        Returns its position, -1 when the ring's first batch already starts after `offset`, or
        None when the writer overtook the walk (the caller starts again from the new tail).
        Each header is trusted only once the tail is seen still behind it.
        """
        data, capacity_bytes, head = self._data, self.capacity_bytes, state.head_position
        position = state.tail_position
        found = -1
        while position < head:
            try:
                batch_position = _filler_end(data, capacity_bytes, position)
                base_offset, size_bytes = _batch_at(data, capacity_bytes, batch_position, head)
            except ZlogError:
                if read_tail_position(self._buffer) <= position:
                    raise  # nobody overwrote it: the ring really is corrupt
                return None
            if read_tail_position(self._buffer) > position:
                return None
            if base_offset > offset:
                return found
            found = batch_position
            position = batch_position + size_bytes
        return found

    def release(self) -> None:
        self._data.release()
        self._buffer.release()
