"""Kafka's non-flexible primitive encoding, used by the offsets-log records and ConsumerProtocol
(zlog.groups), and what a listener speaking Kafka's own protocol would read and write.

Big-endian integers; a string is an int16 length and UTF-8 (-1 = null); bytes are an int32
length (-1 = null); an array is an int32 count. Reading goes through the bounded `Cursor`
(wire.py), so a malformed record raises a ZlogError (CORRUPT_MESSAGE) naming the field and the
byte, never a struct.error or an IndexError.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.wire import (
    INT8_MAX,
    INT8_MIN,
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    Buffer,
    Cursor,
    check_range,
    frame_view,
)

CORRUPT: Final = ErrorCode.CORRUPT_MESSAGE

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class KafkaWriter:
    """Appends Kafka primitives to one buffer; values out of their field's range are refused."""

    __slots__ = ("_code", "out")

    def __init__(self, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> None:
        self.out = bytearray()
        self._code = code

    def int8(self, value: int, field: str) -> None:
        self.out += _INT8.pack(check_range(value, INT8_MIN, INT8_MAX, field, code=self._code))

    def int16(self, value: int, field: str) -> None:
        self.out += _INT16.pack(check_range(value, INT16_MIN, INT16_MAX, field, code=self._code))

    def int32(self, value: int, field: str) -> None:
        self.out += _INT32.pack(check_range(value, INT32_MIN, INT32_MAX, field, code=self._code))

    def int64(self, value: int, field: str) -> None:
        self.out += _INT64.pack(check_range(value, INT64_MIN, INT64_MAX, field, code=self._code))

    def string(self, value: str | None, field: str) -> None:
        if value is None:
            self.out += _INT16.pack(-1)
            return
        raw = value.encode("utf-8", "surrogatepass")
        self.int16(len(raw), f"{field} length")
        self.out += raw

    def bytes_(self, value: bytes | None, field: str) -> None:
        if value is None:
            self.out += _INT32.pack(-1)
            return
        self.int32(len(value), f"{field} length")
        self.out += value

    def array(self, count: int, field: str) -> None:
        self.int32(count, f"{field} count")

    def int32_array(self, values: Iterable[int], field: str) -> None:
        items = list(values)
        self.array(len(items), field)
        for value in items:
            self.int32(value, field)

    def string_array(self, values: Iterable[str], field: str) -> None:
        items = list(values)
        self.array(len(items), field)
        for value in items:
            self.string(value, field)

    def done(self) -> bytes:
        return bytes(self.out)


class KafkaReader:
    """Reads Kafka primitives from one buffer, each read bounds-checked by a Cursor."""

    __slots__ = ("cursor",)

    def __init__(self, data: Buffer, what: str, code: ErrorCode = CORRUPT) -> None:
        self.cursor = Cursor(frame_view(data), code, what)

    @property
    def remaining_bytes(self) -> int:
        return self.cursor.remaining_bytes

    def fail(self, message: str) -> ZlogError:
        return self.cursor.fail(message)

    def int8(self) -> int:
        return self.cursor.unpack(_INT8)[0]

    def int16(self) -> int:
        return self.cursor.unpack(_INT16)[0]

    def int32(self) -> int:
        return self.cursor.unpack(_INT32)[0]

    def int64(self) -> int:
        return self.cursor.unpack(_INT64)[0]

    def nullable_string(self, field: str) -> str | None:
        length = self.int16()
        if length == -1:
            return None
        if length < 0:
            raise self.fail(f"{field} has negative length {length}")
        return self.cursor.text(length, field)

    def string(self, field: str) -> str:
        value = self.nullable_string(field)
        if value is None:
            raise self.fail(f"{field} is null where a string is required")
        return value

    def nullable_bytes(self, field: str) -> bytes | None:
        length = self.int32()
        if length == -1:
            return None
        if length < 0 or length > self.remaining_bytes:
            raise self.fail(f"{field} claims {length} bytes, {self.remaining_bytes} remain")
        return bytes(self.take(length))

    def bytes_(self, field: str) -> bytes:
        value = self.nullable_bytes(field)
        return b"" if value is None else value

    def take(self, length: int) -> bytes:
        layout = struct.Struct(f">{length}s")
        return bytes(self.cursor.unpack(layout)[0])

    def array(self, item_bytes_min: int, field: str) -> int:
        """An array's count; -1 (null) reads as empty."""
        claimed = self.int32()
        if claimed == -1:
            return 0
        return self.cursor.count(claimed, item_bytes_min, field)

    def int32_array(self, field: str) -> list[int]:
        return [self.int32() for _ in range(self.array(4, field))]

    def string_array(self, field: str) -> list[str]:
        return [self.string(field) for _ in range(self.array(2, field))]

    def expect_end(self) -> None:
        self.cursor.expect_end()
