"""Bounded reading of wire bytes: the one place where lengths from the network are checked.

Every decoder reads through a `Cursor`, which refuses to read past the end of its frame and
turns every malformed input into a `ZlogError` carrying the caller's code (INVALID_REQUEST when
a server decodes a request, UNKNOWN_SERVER_ERROR when a client decodes a response). So no
IndexError, struct.error or UnicodeDecodeError ever escapes a decoder, and a claimed length is
compared with the bytes actually present before anything is allocated for it.
"""

from __future__ import annotations

import struct
from typing import Final, Protocol, TypeAlias

from zlog.errors import ErrorCode, ZlogError

Buffer: TypeAlias = bytes | bytearray | memoryview

INT8_MIN: Final = -(2**7)
INT8_MAX: Final = 2**7 - 1
UINT16_MAX: Final = 0xFFFF
INT16_MIN: Final = -(2**15)
INT16_MAX: Final = 2**15 - 1
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

_STRING_LENGTH: Final = struct.Struct(">H")


class FrameLike(Protocol):
    """What a received zmq.Frame offers: a memoryview of its bytes (no copy)."""

    @property
    def buffer(self) -> memoryview: ...


def frame_view(frame: Buffer | FrameLike) -> memoryview:
    """A flat byte view of a frame, whether bytes, a memoryview or a zmq.Frame; never a copy."""
    plain = isinstance(frame, bytes | bytearray | memoryview)
    view = memoryview(frame) if plain else frame.buffer  # type: ignore[arg-type,union-attr]
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view


class Cursor:
    """Reads fields from one frame front to back; every read is bounds-checked first."""

    __slots__ = ("_code", "_pos", "_view", "_what")

    def __init__(self, view: memoryview, code: ErrorCode, what: str) -> None:
        assert view.ndim == 1 and view.itemsize == 1, "cursors read flat byte views"
        self._view = view
        self._pos = 0
        self._code = code
        self._what = what

    @property
    def remaining_bytes(self) -> int:
        return self._view.nbytes - self._pos

    def fail(self, message: str) -> ZlogError:
        """The error for malformed input at the cursor: the caller raises it."""
        return ZlogError(self._code, f"{self._what}: {message} (at byte {self._pos})")

    def unpack(self, layout: struct.Struct) -> tuple[int, ...]:
        if layout.size > self.remaining_bytes:
            raise self.fail(f"needs {layout.size} bytes, {self.remaining_bytes} remain")
        fields = layout.unpack_from(self._view, self._pos)
        self._pos += layout.size
        return fields

    def text(self, length_bytes: int, field_name: str) -> str:
        """`length_bytes` of UTF-8, checked against the bytes present before decoding."""
        assert length_bytes >= 0, "lengths on the wire are unsigned"
        if length_bytes > self.remaining_bytes:
            raise self.fail(
                f"{field_name} claims {length_bytes} bytes, {self.remaining_bytes} remain"
            )
        raw = self._view[self._pos : self._pos + length_bytes]
        self._pos += length_bytes
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as error:
            raise self.fail(f"{field_name} is not UTF-8 ({error.reason})") from None

    def short_text(self, field_name: str) -> str:
        """A `>H` length followed by that many UTF-8 bytes."""
        (length_bytes,) = self.unpack(_STRING_LENGTH)
        return self.text(length_bytes, field_name)

    def count(self, claimed: int, item_bytes_min: int, field_name: str) -> int:
        """A claimed item count, refused unless that many items could fit in what remains."""
        assert item_bytes_min > 0
        if claimed < 0 or claimed * item_bytes_min > self.remaining_bytes:
            raise self.fail(
                f"{field_name} {claimed} cannot fit in {self.remaining_bytes} bytes"
            )
        return claimed

    def expect_end(self) -> None:
        if self.remaining_bytes != 0:
            raise self.fail(f"{self.remaining_bytes} unexpected trailing bytes")


def encode_text(text: str, field_name: str, *, code: ErrorCode) -> bytes:
    """UTF-8 bytes of a string that the wire prefixes with a uint16 length."""
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ZlogError(code, f"{field_name} is not encodable as UTF-8 ({error.reason})") from None
    if len(raw) > UINT16_MAX:
        raise ZlogError(code, f"{field_name} of {len(raw)} bytes exceeds {UINT16_MAX} bytes")
    return raw


UTF8_BYTES_PER_CHAR_MAX: Final = 4


def utf8_longer_than(text: str, max_bytes: int) -> bool:
    """Whether `text` takes more than `max_bytes` in UTF-8 (a lone surrogate counted as the 3
    bytes it encodes to), encoding it only when its length in characters allows that: the
    limits checked on every commit are far above what an id or metadata usually takes."""
    if len(text) * UTF8_BYTES_PER_CHAR_MAX <= max_bytes:
        return False
    return len(text.encode("utf-8", "surrogatepass")) > max_bytes


def clip_message(message: str) -> bytes:
    """An error message as UTF-8, cut (at a character boundary) to fit a uint16 length."""
    raw = message.encode("utf-8", "replace")
    if len(raw) <= UINT16_MAX:
        return raw
    return raw[:UINT16_MAX].decode("utf-8", "ignore").encode("utf-8")


def check_range(value: int, low: int, high: int, field_name: str, *, code: ErrorCode) -> int:
    """Refuse a value that its wire field cannot hold, before struct.pack would raise."""
    if not low <= value <= high:
        raise ZlogError(code, f"{field_name} {value} is outside {low}..{high}")
    return value
