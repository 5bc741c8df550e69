"""Zigzag varints as RecordBatch v2 writes them: one value at a time, or a numpy array at once.

A record's lengths, offset delta and timestamp delta are protobuf-style base-128 varints of the
zigzag-mapped value (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...), so small magnitudes of either sign
take one byte. A *varint* holds an int32 (at most 5 bytes), a *varlong* an int64 (at most 10).

Every decoder here treats its input as untrusted: a varint that runs past its limit, uses more
bytes than its type allows or overflows its type is a CORRUPT_MESSAGE, never an IndexError.
The scalar functions serve the general codec; the array functions let the fast codec encode
and decode a field of every record of a batch with a fixed number of numpy operations.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from zlog.errors import ErrorCode, ZlogError

VARINT_BYTES_MAX: Final = 5
VARLONG_BYTES_MAX: Final = 10
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

# The last byte a varint may use carries only the bits its type has left: 32 - 4 * 7 = 4 bits
# for a varint, 64 - 9 * 7 = 1 bit for a varlong. A larger last byte would overflow the type.
_LAST_BYTE_MAX: Final = {VARINT_BYTES_MAX: 0x0F, VARLONG_BYTES_MAX: 0x01}

Int64Array = npt.NDArray[np.int64]
UInt64Array = npt.NDArray[np.uint64]
UInt8Array = npt.NDArray[np.uint8]
BoolArray = npt.NDArray[np.bool_]


def _corrupt(message: str) -> ZlogError:
    return ZlogError(ErrorCode.CORRUPT_MESSAGE, message)


# ---------------------------------------------------------------------------------------------
# One value at a time.
# ---------------------------------------------------------------------------------------------


def _encode_unsigned(zigzag: int) -> bytes:
    assert zigzag >= 0
    if zigzag < 0x80:
        return _ONE_BYTE[zigzag]
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


# Most lengths and deltas in a batch are small; a table spares them the loop above.
_ONE_BYTE: Final = tuple(bytes([value]) for value in range(0x80))


def encode_varint(value: int) -> bytes:
    """The zigzag varint of an int32 (lengths, offset deltas, header counts)."""
    assert INT32_MIN <= value <= INT32_MAX, value
    return _encode_unsigned((value << 1) ^ (value >> 31))


def encode_varlong(value: int) -> bytes:
    """The zigzag varlong of an int64 (timestamp deltas)."""
    assert INT64_MIN <= value <= INT64_MAX, value
    return _encode_unsigned((value << 1) ^ (value >> 63))


def varint_size_bytes(value: int) -> int:
    """How many bytes `encode_varint(value)` or `encode_varlong(value)` takes."""
    zigzag = (value << 1) ^ (value >> 63)
    size_bytes = 1
    while zigzag >= 0x80:
        zigzag >>= 7
        size_bytes += 1
    return size_bytes


def _decode(buf: bytes, pos: int, end: int, bytes_max: int) -> tuple[int, int]:
    """Decode one zigzag varint of at most `bytes_max` bytes from buf[pos:end]."""
    if pos >= end:
        raise _corrupt(f"a varint at byte {pos} runs past the end of its record")
    byte = buf[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    zigzag = byte & 0x7F
    shift = 7
    limit = min(end, pos + bytes_max)
    cursor = pos + 1
    while cursor < limit:
        byte = buf[cursor]
        cursor += 1
        if byte < 0x80:
            if cursor - pos == bytes_max and byte > _LAST_BYTE_MAX[bytes_max]:
                raise _corrupt(f"the varint at byte {pos} overflows its {bytes_max}-byte type")
            zigzag |= byte << shift
            return (zigzag >> 1) ^ -(zigzag & 1), cursor
        zigzag |= (byte & 0x7F) << shift
        shift += 7
    if cursor - pos < bytes_max:
        raise _corrupt(f"a varint at byte {pos} runs past the end of its record")
    raise _corrupt(f"the varint at byte {pos} is longer than {bytes_max} bytes")


def decode_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Decode an int32 varint from buf[pos:end]; return (value, position after it)."""
    return _decode(buf, pos, end, VARINT_BYTES_MAX)


def decode_varlong(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Decode an int64 varlong from buf[pos:end]; return (value, position after it)."""
    return _decode(buf, pos, end, VARLONG_BYTES_MAX)


# ---------------------------------------------------------------------------------------------
# A field of every record at once.
# ---------------------------------------------------------------------------------------------


def zigzag_encode_array(values: Int64Array) -> UInt64Array:
    """Map int64 values to their zigzag form (arithmetic shift keeps the sign in the mask)."""
    assert values.dtype == np.int64
    return ((values << 1) ^ (values >> 63)).view(np.uint64)


def zigzag_decode_array(zigzag: UInt64Array) -> Int64Array:
    assert zigzag.dtype == np.uint64
    magnitude = (zigzag >> np.uint64(1)).view(np.int64)
    sign = (zigzag & np.uint64(1)).view(np.int64)
    return magnitude ^ -sign


def varint_sizes_array(zigzag: UInt64Array) -> Int64Array:
    """The encoded size of each zigzag value, 1 to 10 bytes."""
    assert zigzag.dtype == np.uint64
    sizes_bytes = np.ones(zigzag.shape, dtype=np.int64)
    for byte_index in range(1, VARLONG_BYTES_MAX):
        longer = zigzag >= np.uint64(1 << (7 * byte_index))
        if not longer.any():
            break
        sizes_bytes += longer
    return sizes_bytes


def write_varints_array(
    out: UInt8Array, positions: Int64Array, zigzag: UInt64Array, sizes_bytes: Int64Array
) -> None:
    """Write zigzag[i] as a varint of sizes_bytes[i] bytes at out[positions[i]:]."""
    assert positions.shape == zigzag.shape == sizes_bytes.shape
    size_bytes_max = int(sizes_bytes.max()) if sizes_bytes.size else 0
    assert size_bytes_max <= VARLONG_BYTES_MAX
    if size_bytes_max == 1:
        out[positions] = zigzag.astype(np.uint8)
        return
    for byte_index in range(size_bytes_max):
        group = (zigzag >> np.uint64(7 * byte_index)) & np.uint64(0x7F)
        group |= (sizes_bytes > byte_index + 1).astype(np.uint64) << np.uint64(7)
        present = sizes_bytes > byte_index
        if byte_index == 0:
            out[positions] = group.astype(np.uint8)
        else:
            out[positions[present] + byte_index] = group[present].astype(np.uint8)


def read_varints_array(
    data: UInt8Array, positions: Int64Array, bytes_max: int
) -> tuple[Int64Array, Int64Array, BoolArray]:
    """Decode one varint at each position; return (values, sizes in bytes, well-formed mask).

    Reads past the end of `data` see its last byte instead of failing, so the caller must
    check that each varint ends inside its record; a varint that never terminates within
    `bytes_max` bytes or overflows its type is reported in the mask.
    """
    assert bytes_max in _LAST_BYTE_MAX
    assert data.dtype == np.uint8 and data.size > 0
    byte = data.take(positions, mode="clip")
    if positions.size == 0 or int(byte.max()) < 0x80:
        # Every varint is one byte (the usual case for most fields): a shorter path.
        small = byte.astype(np.int64)
        values = (small >> 1) ^ -(small & 1)
        return values, np.ones(positions.shape, np.int64), np.ones(positions.shape, np.bool_)
    zigzag = (byte & 0x7F).astype(np.uint64)
    continues = byte >= 0x80
    sizes_bytes = np.ones(positions.shape, dtype=np.int64)
    well_formed = np.ones(positions.shape, dtype=np.bool_)
    for byte_index in range(1, bytes_max):
        sizes_bytes += continues
        # Zero the bytes of varints that already ended, so they add nothing and stop here.
        byte = data.take(positions + byte_index, mode="clip") * continues
        zigzag |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * byte_index)
        if byte_index == bytes_max - 1:
            well_formed &= byte <= _LAST_BYTE_MAX[bytes_max]
        continues = byte >= 0x80
        if not continues.any():
            break
    well_formed &= ~continues
    return zigzag_decode_array(zigzag), sizes_bytes, well_formed
