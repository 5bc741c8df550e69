"""Hand-written encoders of the two hot responses, Produce and Fetch, for every version served.

kio's writers are pure Python and copy record bytes into a buffer (about 24k Produce answers a
second here); these pack each response with precompiled structs, and a Fetch answer is a list
of buffers in which the stored batches appear as the log's own memoryviews, never copied or
re-encoded: the socket gathers them (`sendmsg`). The bytes are exactly kio's, which the tests
check version by version.

Flexible versions (Produce 9+, Fetch 12+) use compact arrays, strings and bytes (unsigned
varint lengths plus one) and an empty tagged-field section after each structure, and the
response header gains a tagged-field section too.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

Buffer: TypeAlias = bytes | bytearray | memoryview

PRODUCE_FIRST_FLEXIBLE: Final = 9
FETCH_FIRST_FLEXIBLE: Final = 12
NO_TIMESTAMP: Final = -1
NO_REPLICA: Final = -1

_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_SIZE_AND_CORRELATION: Final = struct.Struct(">ii")
_NO_TAGS: Final = b"\x00"
_NULL_ARRAY: Final = _INT32.pack(-1)
_EMPTY_ARRAY: Final = _INT32.pack(0)
_EMPTY_COMPACT_ARRAY: Final = b"\x01"
_NULL_STRING: Final = _INT16.pack(-1)
_NULL_COMPACT_STRING: Final = b"\x00"
# A produce partition: index, error code, base offset, log append time, log start offset.
_PRODUCE_PARTITION: Final = struct.Struct(">ihqqq")
# A fetch partition: index, error code, high watermark, last stable offset, log start offset.
_FETCH_PARTITION: Final = struct.Struct(">ihqqq")
_FETCH_TOP: Final = struct.Struct(">ihi")  # throttle time, error code, session id (v7+)


@dataclass(frozen=True, slots=True)
class ProducePartition:
    """One partition's answer to a Produce."""

    index: int
    error_code: int
    base_offset: int
    log_start_offset: int
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class FetchPartition:
    """One partition's answer to a Fetch; `chunks` are whole stored batches, in order."""

    index: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    chunks: Sequence[Buffer] = ()


def uvarint(value: int) -> bytes:
    """Kafka's unsigned varint (7 bits a byte, low first), the compact lengths' encoding."""
    assert value >= 0, value
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(text: str, flexible: bool) -> bytes:
    raw = text.encode()
    return (uvarint(len(raw) + 1) if flexible else _INT16.pack(len(raw))) + raw


def _nullable_string(text: str | None, flexible: bool) -> bytes:
    if text is None:
        return _NULL_COMPACT_STRING if flexible else _NULL_STRING
    return _string(text, flexible)


def _array_count(count: int, flexible: bool) -> bytes:
    return uvarint(count + 1) if flexible else _INT32.pack(count)


def _framed(correlation_id: int, flexible: bool, parts: list[Buffer]) -> list[Buffer]:
    """The size prefix and response header in front of `parts`, as the first buffer."""
    size_bytes = 4 + (1 if flexible else 0) + sum(len(p) if not isinstance(p, memoryview)
                                                  else p.nbytes for p in parts)
    head = _SIZE_AND_CORRELATION.pack(size_bytes, correlation_id)
    if flexible:
        head += _NO_TAGS
    if parts and not isinstance(parts[0], memoryview):
        parts[0] = head + parts[0]
        return parts
    return [head, *parts]


def encode_produce_response(
    version: int, correlation_id: int,
    topics: Sequence[tuple[str, Sequence[ProducePartition]]],
) -> bytes:
    """A whole ProduceResponse frame (size prefix included), versions 3 to 9."""
    assert 3 <= version <= PRODUCE_FIRST_FLEXIBLE, version
    flexible = version >= PRODUCE_FIRST_FLEXIBLE
    out = bytearray(_array_count(len(topics), flexible))
    for name, partitions in topics:
        out += _string(name, flexible)
        out += _array_count(len(partitions), flexible)
        for p in partitions:
            out += _PRODUCE_PARTITION.pack(p.index, p.error_code, p.base_offset, NO_TIMESTAMP,
                                           p.log_start_offset)
            if version < 5:
                del out[-8:]  # log_start_offset arrived with version 5
            if version >= 8:
                out += _EMPTY_COMPACT_ARRAY if flexible else _EMPTY_ARRAY  # record_errors
                out += _nullable_string(p.error_message, flexible)
            if flexible:
                out += _NO_TAGS
        if flexible:
            out += _NO_TAGS
    out += _INT32.pack(0)  # throttle_time_ms
    if flexible:
        out += _NO_TAGS
    return b"".join(_framed(correlation_id, flexible, [bytes(out)]))


def encode_fetch_response(
    version: int, correlation_id: int,
    topics: Sequence[tuple[str, Sequence[FetchPartition]]],
) -> list[Buffer]:
    """A whole FetchResponse frame as buffers to gather, versions 4 to 12.

    last_stable_offset is the high watermark (zlog has no open transactions), the aborted
    transactions an empty array, the preferred read replica none, and records empty bytes,
    never null, where a partition has no batch.
    """
    assert 4 <= version <= FETCH_FIRST_FLEXIBLE, version
    flexible = version >= FETCH_FIRST_FLEXIBLE
    parts: list[Buffer] = []
    out = bytearray()
    if version >= 7:
        out += _FETCH_TOP.pack(0, 0, 0)
    else:
        out += _INT32.pack(0)
    out += _array_count(len(topics), flexible)
    for name, partitions in topics:
        out += _string(name, flexible)
        out += _array_count(len(partitions), flexible)
        for p in partitions:
            out += _FETCH_PARTITION.pack(p.index, p.error_code, p.high_watermark,
                                         p.high_watermark, p.log_start_offset)
            if version < 5:
                del out[-8:]  # log_start_offset arrived with version 5
            out += _EMPTY_COMPACT_ARRAY if flexible else _EMPTY_ARRAY  # aborted_transactions
            if version >= 11:
                out += _INT32.pack(NO_REPLICA)
            records_bytes = sum(len(c) if not isinstance(c, memoryview) else c.nbytes
                                for c in p.chunks)
            out += uvarint(records_bytes + 1) if flexible else _INT32.pack(records_bytes)
            if records_bytes:
                parts.append(bytes(out))
                parts.extend(p.chunks)
                out = bytearray()
            if flexible:
                out += _NO_TAGS
        if flexible:
            out += _NO_TAGS
    if flexible:
        out += _NO_TAGS
    if out:
        parts.append(bytes(out))
    return _framed(correlation_id, flexible, parts)


def with_throttle_time(produce: bool, version: int, frames: Sequence[Buffer],
                       throttle_ms: int) -> list[Buffer]:
    """A Produce (`produce`) or Fetch answer these encoders made, its throttle_time_ms set:
    a quota held it that long (KIP-219). Only the buffer holding the field is copied."""
    parts = list(frames)
    if produce:  # the field ends the body, before the flexible versions' tag section
        at = len(parts[0]) - _INT32.size - (len(_NO_TAGS) if version >= PRODUCE_FIRST_FLEXIBLE
                                            else 0)
    else:  # the field opens the body, after the flexible versions' header tag section
        at = _SIZE_AND_CORRELATION.size + (len(_NO_TAGS) if version >= FETCH_FIRST_FLEXIBLE
                                           else 0)
    head = bytearray(parts[0])
    _INT32.pack_into(head, at, max(0, min(throttle_ms, 2**31 - 1)))
    parts[0] = bytes(head)
    return parts
