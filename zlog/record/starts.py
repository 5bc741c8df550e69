"""Where each record of a records section starts, found without a Python loop per record.

Finding where records start is the one serial-looking step of parsing, since each record's
length says where the next begins. Most batches are regular (equal values, so equal record
sizes over long runs), so the parser first *speculates*: it predicts evenly spaced starts, checks
them all at once and re-speculates from the first miss. For irregular batches it filters every
byte position down to plausible record starts and follows their next-record pointers by pointer
doubling. A guess only ever saves time: every start is checked by decoding its record, the
records must chain exactly to the end of the data, and a batch neither method explains is walked
record by record, which also yields the precise error.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np

from zlog.errors import ErrorCode, ZlogError
from zlog.record.header import RECORD_BODY_BYTES_MIN
from zlog.record.varint import (
    VARINT_BYTES_MAX,
    BoolArray,
    Int64Array,
    UInt8Array,
    decode_varint,
    read_varints_array,
)

# Speculation re-predicts at most this often, and gives up on runs shorter than the minimum.
_SPECULATION_RUNS_MAX: Final = 4
_SPECULATION_RUN_RECORDS_MIN: Final = 16
# Pointer doubling indexes zero bytes; past this many per record the serial walk is cheaper.
_ZERO_BYTES_PER_RECORD_MAX: Final = 16
_ZERO_BYTES_SLACK: Final = 4096


def _corrupt(message: str) -> ZlogError:
    return ZlogError(ErrorCode.CORRUPT_MESSAGE, message)


# Where records start, and where their bodies (the bytes after the length varint) start.
Starts = tuple[Int64Array, Int64Array]


def _record_ends(
    records: UInt8Array, starts: Int64Array
) -> tuple[Int64Array, Int64Array, BoolArray]:
    """Body start and end of the records at `starts`, and whether each length is plausible."""
    lengths, sizes_bytes, well_formed = read_varints_array(records, starts, VARINT_BYTES_MAX)
    body_starts = starts + sizes_bytes
    ends = body_starts + lengths
    plausible = well_formed & (lengths >= RECORD_BODY_BYTES_MIN) & (ends <= records.size)
    return body_starts, ends, plausible


def record_starts(records: UInt8Array, count: int) -> Starts:
    """Every record's start, each one's length varint decoded and chained to the next start."""
    (found, found_bodies), position = _speculate(records, count)
    if found.size == count:
        if position != records.size:
            raise _corrupt(f"{records.size - position} bytes follow the last of {count} records")
        return found, found_bodies
    rest = _chain_by_doubling(records, position, count - found.size)
    if rest is None:
        rest = _chain_serially(records, position, count - found.size)
    return np.concatenate((found, rest[0])), np.concatenate((found_bodies, rest[1]))


def _speculate(records: UInt8Array, count: int) -> tuple[Starts, int]:
    """Starts of the leading records, found by predicting runs of equal-size records.

    A run is predicted from one decoded record: the records after it are assumed to repeat its
    size, which holds when their length varints repeat its bytes, and that is checked for all
    predicted starts at once. Returns the starts confirmed and the position after them.
    """
    data_bytes = records.size
    confirmed: list[Int64Array] = []
    bodies: list[Int64Array] = []
    found = 0
    position = 0
    for _run in range(_SPECULATION_RUNS_MAX):
        prefix = records[position : position + VARINT_BYTES_MAX].tobytes()
        try:
            length, body_at = decode_varint(prefix, 0, len(prefix))
        except ZlogError:
            break
        size_bytes = body_at + length
        if length < RECORD_BODY_BYTES_MIN or size_bytes > data_bytes - position:
            break
        fitting = min(count - found, (data_bytes - position) // size_bytes)
        predicted = position + size_bytes * np.arange(fitting, dtype=np.int64)
        matches = records.take(predicted) == prefix[0]
        for byte_index in range(1, body_at):
            matches &= records.take(predicted + byte_index) == prefix[byte_index]
        run = fitting if matches.all() else int(matches.argmin())
        assert run >= 1, "the first prediction is the record just decoded"
        confirmed.append(predicted[:run])
        bodies.append(predicted[:run] + body_at)
        found += run
        position += size_bytes * run
        if found == count or run < _SPECULATION_RUN_RECORDS_MIN:
            break
    if not confirmed:
        return (np.empty(0, np.int64), np.empty(0, np.int64)), 0
    return (np.concatenate(confirmed), np.concatenate(bodies)), position


def _candidate_starts(segment: UInt8Array, count: int) -> Int64Array | None:
    """Sorted positions that could start a record of under 1 MiB whose attributes byte is zero.

    Every record producers write has a zero attributes byte right after its 1-3 byte length
    varint, so candidates are found back from the zero bytes; a record this misses (non-zero
    attributes, or 1 MiB and more) is found by the serial walk instead. So is every record of a
    batch whose values are mostly zeros: None rather than eight bytes of index per zero byte.
    """
    is_zero = segment == 0
    if np.count_nonzero(is_zero) > _ZERO_BYTES_PER_RECORD_MAX * count + _ZERO_BYTES_SLACK:
        return None
    zeros = np.flatnonzero(is_zero)
    found: list[Int64Array] = []
    for size_bytes in (1, 2, 3):
        at = zeros[zeros >= size_bytes] - size_bytes
        first = segment[at]
        fits = (first & 1) == 0  # an even zigzag value: the length is not negative
        if size_bytes == 1:
            fits &= (first < 0x80) & (first >= 2 * RECORD_BODY_BYTES_MIN)
        else:
            for byte_index in range(size_bytes - 1):
                fits &= segment[at + byte_index] >= 0x80
            fits &= segment[at + size_bytes - 1] < 0x80
        found.append(at[fits])
    return np.sort(np.concatenate(found))


def _chain_by_doubling(records: UInt8Array, position: int, count: int) -> Starts | None:
    """The next `count` record starts from `position`, found by pointer doubling; None if unsure."""
    segment = records[position:]
    candidates = _candidate_starts(segment, count)
    if candidates is None or candidates.size < count or candidates[0] != 0:
        return None
    total = candidates.size
    body_starts, ends, plausible = _record_ends(segment, candidates)
    index = np.minimum(np.searchsorted(candidates, ends), total - 1)
    terminal, dead = total, total + 1
    successor = np.where(candidates[index] == ends, index, dead)
    successor[ends == segment.size] = terminal
    successor[~plausible] = dead
    jump = np.concatenate((successor, np.array([terminal, dead], np.int64)))
    chain = _follow(jump, count)
    if chain is None:
        return None
    return candidates[chain] + position, body_starts[chain] + position


def _follow(jump: Int64Array, count: int) -> Int64Array | None:
    """The `count` nodes on the path from node 0 if it then reaches the terminal node, else None.

    `jump` maps each node to its successor; its last two entries are the terminal and a dead
    node, each its own successor.
    """
    total = jump.size - 2
    terminal, dead = total, total + 1
    # Most candidates off the chain are pointed to by none: drop those twice over, and the
    # survivors usually are the chain already.
    alive = np.ones(total, np.bool_)
    for _round in range(2):
        pointed = np.zeros(total + 2, np.bool_)
        pointed[jump[:total][alive]] = True
        pointed[0] = True
        alive &= pointed[:total]
    survivors = np.flatnonzero(alive)
    if (
        survivors.size == count
        and bool((jump[survivors[:-1]] == survivors[1:]).all())
        and jump[survivors[-1]] == terminal
    ):
        return survivors
    reached = np.zeros(total + 2, np.bool_)
    reached[0] = True
    # After r rounds `reached` holds the first 2**r nodes of the path from node 0.
    for _round in range(math.ceil(math.log2(count + 1))):
        reached[jump[reached]] = True
        jump = jump[jump]
    chain = np.flatnonzero(reached[:total])
    if chain.size != count or not reached[terminal] or reached[dead]:
        return None
    return chain


def _chain_serially(records: UInt8Array, position: int, count: int) -> Starts:
    """The next `count` record starts, one length at a time: the reference and the error path."""
    data = records.tobytes()
    size = len(data)
    starts = np.empty(count, np.int64)
    body_starts = np.empty(count, np.int64)
    for index in range(count):
        starts[index] = position
        length, body_start = decode_varint(data, position, size)
        if length < RECORD_BODY_BYTES_MIN or length > size - body_start:
            raise _corrupt(f"a record at byte {position} claims {length} bytes")
        body_starts[index] = body_start
        position = body_start + length
    if position != size:
        raise _corrupt(f"{size - position} bytes follow the last of the records")
    return starts, body_starts
