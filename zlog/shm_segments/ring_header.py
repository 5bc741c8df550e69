"""The ring file's header page: its fields, and the state the writer publishes through it.

A ring is one file (`ring.py` maps it; the unit tests use a bytearray): this header page, then
the data area that `ring_layout.py` lays batches into. This module is pure. It owns every
byte of the page: creating and checking it, and the two-slot state that readers take without a
lock, which is the one thing here both sides of a ring touch while the other is running.

Header page (fields in native byte order: a ring never leaves its host)::

    [0, 4096)  header page
        0    magic             8 bytes, b"ZLOGRING"; written last when a ring is created
        8    layout_version    u32
        12   header_bytes      u32, always HEADER_BYTES
        16   capacity_bytes    i64, size of the data area
        24   writer_pid        i64, the process that has the ring open for writing (0: none)
        32   commit_sequence   i64, names the current state: slot[commit_sequence % 2]
        40   high_watermark+1  i64, the partition's high watermark plus one (0: none published)
        64   state slot 0      RingState, 7 x i64, on its own cache line
        128  state slot 1      RingState
    [4096, 4096 + capacity)  data area

The writer publishes a new state by filling the slot the sequence does not name and then
storing the next sequence (`commit_state`); a reader reads the sequence, that slot and the
sequence again (`read_state`). The order of stores around a commit is written at the top of
`ring.py`.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from zlog.errors import ErrorCode, ZlogError

MAGIC: Final = b"ZLOGRING"
LAYOUT_VERSION: Final = 1
HEADER_BYTES: Final = 4096
# The layout's own bounds; RingWriter applies limits.RING_SIZE_BYTES_MIN on top. Tests use tiny
# rings so that every wrap rule is hit within a few appends.
CAPACITY_BYTES_MIN: Final = 64
CAPACITY_BYTES_MAX: Final = 1 << 40
# A reader retries a state read only when a commit landed while it was reading. A commit takes
# far longer than a read, so even a busy writer cannot make a reader fail this many times.
STATE_READ_ATTEMPTS_MAX: Final = 10_000

_MAGIC_AT: Final = 0
_LAYOUT_VERSION_AT: Final = 8
_HEADER_BYTES_AT: Final = 12
_CAPACITY_AT: Final = 16
_WRITER_PID_AT: Final = 24
_SEQUENCE_AT: Final = 32
# Outside the state slots: the high watermark moves on its own schedule (a follower's fetch, an
# ISR change), not at a commit, and one aligned 8-byte store publishes it whole.
_HIGH_WATERMARK_AT: Final = 40
_SLOT_AT: Final = (64, 128)

# Native formats: CPython packs each native 8-byte field with one memcpy, which compiles to one
# aligned store, so a reader never sees half of the commit sequence, the one field it reads
# while the writer may be storing it.
_U32: Final = struct.Struct("@I")
_I64: Final = struct.Struct("@q")
_SLOT: Final = struct.Struct("@7q")

assert _SLOT.size <= _SLOT_AT[1] - _SLOT_AT[0]
assert _SLOT_AT[1] + _SLOT.size <= HEADER_BYTES
assert all(at % 8 == 0 for at in (_CAPACITY_AT, _WRITER_PID_AT, _SEQUENCE_AT,
                                  _HIGH_WATERMARK_AT, *_SLOT_AT))
assert _HIGH_WATERMARK_AT + _I64.size <= _SLOT_AT[0]


class RingState(NamedTuple):
    """One consistent view of the ring's positions, as the writer last committed it."""

    head_position: int  # after the last committed batch; nothing at or past it is readable
    flushed_position: int  # everything before it is in the segment file
    tail_position: int  # oldest readable position; bytes before it may be overwritten any time
    next_offset: int  # log offset after the last committed batch
    tail_offset: int  # base offset of the first batch at or after tail (next_offset if none)
    # Where the data of the lap before the newest lap start ends: the filler runs from here to
    # the lap start. It lets the writer cut the unflushed bytes into spans without a walk.
    wrap_position: int
    generation: int  # bumped by every reset


_TAIL_IN_SLOT: Final = RingState._fields.index("tail_position") * _I64.size


def file_size_bytes(capacity_bytes: int) -> int:
    return HEADER_BYTES + capacity_bytes


def corrupt(problem: str) -> ZlogError:
    return ZlogError(ErrorCode.KAFKA_STORAGE_ERROR, f"corrupt ring: {problem}")


def format_header(buffer: memoryview, capacity_bytes: int) -> None:
    """Make `buffer` an empty ring. The magic goes last, so nobody trusts a half-made header."""
    assert CAPACITY_BYTES_MIN <= capacity_bytes <= CAPACITY_BYTES_MAX, capacity_bytes
    assert len(buffer) == file_size_bytes(capacity_bytes), (len(buffer), capacity_bytes)
    buffer[:HEADER_BYTES] = bytes(HEADER_BYTES)
    _U32.pack_into(buffer, _LAYOUT_VERSION_AT, LAYOUT_VERSION)
    _U32.pack_into(buffer, _HEADER_BYTES_AT, HEADER_BYTES)
    _I64.pack_into(buffer, _CAPACITY_AT, capacity_bytes)
    _SLOT.pack_into(buffer, _SLOT_AT[0], *RingState(0, 0, 0, 0, 0, 0, 0))
    buffer[_MAGIC_AT : _MAGIC_AT + len(MAGIC)] = MAGIC
    assert read_capacity(buffer) == capacity_bytes


def header_is_blank(buffer: memoryview) -> bool:
    """Whether the ring was never finished being created, so no batch can be in it."""
    return len(buffer) < len(MAGIC) or buffer[: len(MAGIC)] == bytes(len(MAGIC))


def read_capacity(buffer: memoryview) -> int:
    """The capacity a valid header declares; ZlogError(KAFKA_STORAGE_ERROR) for anything else."""
    if len(buffer) < HEADER_BYTES:
        raise corrupt(f"{len(buffer)} bytes cannot hold the {HEADER_BYTES}-byte header")
    magic = bytes(buffer[_MAGIC_AT : _MAGIC_AT + len(MAGIC)])
    if magic != MAGIC:
        raise corrupt(f"magic {magic!r} is not {MAGIC!r}")
    (version,) = _U32.unpack_from(buffer, _LAYOUT_VERSION_AT)
    if version != LAYOUT_VERSION:
        raise corrupt(f"layout version {version}, this zlog reads {LAYOUT_VERSION}")
    (header_bytes,) = _U32.unpack_from(buffer, _HEADER_BYTES_AT)
    if header_bytes != HEADER_BYTES:
        raise corrupt(f"header of {header_bytes} bytes, expected {HEADER_BYTES}")
    (capacity_bytes,) = _I64.unpack_from(buffer, _CAPACITY_AT)
    if not CAPACITY_BYTES_MIN <= capacity_bytes <= CAPACITY_BYTES_MAX:
        raise corrupt(f"capacity of {capacity_bytes} bytes is out of bounds")
    if len(buffer) != file_size_bytes(capacity_bytes):
        raise corrupt(f"{len(buffer)} bytes, but the header declares {capacity_bytes} of data")
    return int(capacity_bytes)


def read_writer_pid(buffer: memoryview) -> int:
    """The pid the writer recorded, for messages; 0 when none is (or the bytes are too few)."""
    if len(buffer) < _WRITER_PID_AT + _I64.size:
        return 0
    (pid,) = _I64.unpack_from(buffer, _WRITER_PID_AT)
    return int(pid)


def read_state(buffer: memoryview) -> RingState:
    """The state as of one commit: read the sequence, its slot, and the sequence again.

    The writer only ever rewrites the slot the sequence does not name, and moves the sequence
    after it has finished the slot; seeing the same sequence twice proves the slot was whole.
    """
    for _ in range(STATE_READ_ATTEMPTS_MAX):
        (sequence,) = _I64.unpack_from(buffer, _SEQUENCE_AT)
        fields = _SLOT.unpack_from(buffer, _SLOT_AT[sequence & 1])
        (sequence_again,) = _I64.unpack_from(buffer, _SEQUENCE_AT)
        if sequence_again == sequence:
            return RingState._make(fields)
    raise _state_kept_changing()


def read_tail_position(buffer: memoryview) -> int:
    """The committed tail alone: what a reader re-checks after copying bytes."""
    for _ in range(STATE_READ_ATTEMPTS_MAX):
        (sequence,) = _I64.unpack_from(buffer, _SEQUENCE_AT)
        (tail_position,) = _I64.unpack_from(buffer, _SLOT_AT[sequence & 1] + _TAIL_IN_SLOT)
        (sequence_again,) = _I64.unpack_from(buffer, _SEQUENCE_AT)
        if sequence_again == sequence:
            return int(tail_position)
    raise _state_kept_changing()


def _state_kept_changing() -> ZlogError:
    return ZlogError(
        ErrorCode.KAFKA_STORAGE_ERROR,
        f"ring state changed during each of {STATE_READ_ATTEMPTS_MAX} reads",
    )


def state_problem(state: RingState, capacity_bytes: int) -> str | None:
    """What makes a state impossible for a correct writer, if anything."""
    if min(state) < 0:
        return f"negative field in {state}"
    if not state.tail_position <= state.flushed_position <= state.head_position:
        return f"positions out of order in {state}"
    if state.head_position - state.tail_position > capacity_bytes:
        return f"more than {capacity_bytes} bytes between tail and head in {state}"
    if state.wrap_position > state.head_position:
        return f"wrap position past head in {state}"
    if state.tail_offset > state.next_offset:
        return f"tail offset past next offset in {state}"
    return None


def read_sequence(buffer: memoryview) -> int:
    """The commit sequence as it stands: the writer's starting point when it opens the ring."""
    (sequence,) = _I64.unpack_from(buffer, _SEQUENCE_AT)
    return int(sequence)


def write_high_watermark(buffer: memoryview, high_watermark: int | None) -> None:
    """Publish the offset below which records are committed (None: withdraw it, so that
    readers see nothing until the writer publishes again)."""
    _I64.pack_into(buffer, _HIGH_WATERMARK_AT, 0 if high_watermark is None else
                   high_watermark + 1)


def read_high_watermark(buffer: memoryview) -> int | None:
    """The published high watermark; None when none is (a ring made by a writer that
    publishes none: its committed next_offset is the bound)."""
    (stored,) = _I64.unpack_from(buffer, _HIGH_WATERMARK_AT)
    return None if stored <= 0 else int(stored) - 1


def write_writer_pid(buffer: memoryview, pid: int) -> None:
    _I64.pack_into(buffer, _WRITER_PID_AT, pid)


def commit_state(buffer: memoryview, sequence: int, state: tuple[int, ...]) -> None:
    """Fill the slot `sequence` names, which readers are not using, then name it: one 8-byte
    store commits the whole state. `sequence` is the last committed one plus one; `state`
    holds RingState's fields in order (a plain tuple: this runs on every append)."""
    _SLOT.pack_into(buffer, _SLOT_AT[sequence & 1], *state)
    _I64.pack_into(buffer, _SEQUENCE_AT, sequence)
