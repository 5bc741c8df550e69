"""Kafka's framing: each request and response is a 4-byte big-endian size, then that many bytes.

`FrameReader` is fed whatever a socket read returned and hands back the complete frames, so
the same code serves an asyncio stream and a worker's non-blocking socket in a zmq.Poller
loop. A size that is negative, too small to hold a request header's fixed part, or larger
than `KAFKA_REQUEST_BYTES_MAX` is refused before anything is allocated for it: the
connection cannot be re-synchronised after a bad size, so its owner answers the requests
that came whole before it and closes it, and that client alone is cut off.
"""

from __future__ import annotations

import struct
from typing import Final

from zlog.limits import KAFKA_REQUEST_BYTES_MAX

SIZE: Final = struct.Struct(">i")
SIZE_BYTES: Final = SIZE.size
REQUEST_PREFIX: Final = struct.Struct(">hhi")
"""api_key, api_version, correlation_id: the fixed start of every request header version."""


class FrameSizeError(Exception):
    """A size prefix no Kafka client sends; the connection must be closed."""


def frame(payload: bytes) -> bytes:
    """The payload behind its size prefix."""
    return SIZE.pack(len(payload)) + payload


class FrameReader:
    """Reassembles one connection's request frames from the chunks its socket delivers."""

    __slots__ = ("_buffer", "_max_bytes", "_min_bytes", "refusal")

    def __init__(self, max_bytes: int = KAFKA_REQUEST_BYTES_MAX,
                 min_bytes: int = REQUEST_PREFIX.size) -> None:
        """`min_bytes`: the smallest frame, a request's fixed header by default; responses
        read from a Kafka port (a worker relaying to its gateway) can be 6 bytes."""
        self._buffer = bytearray()
        self._max_bytes = max_bytes
        self._min_bytes = min_bytes
        self.refusal: str | None = None
        """Why the stream was given up, once a bad size arrived behind whole frames: the
        owner answers those, then closes the connection."""

    @property
    def pending_bytes(self) -> int:
        """Bytes received that do not yet make a whole frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        """The frames `data` completes, in order, each without its size prefix.

        An absurd size raises FrameSizeError, unless whole frames came before it in this
        call: those are returned (they are answered, as Kafka's broker answers requests read
        before a bad one) and `refusal` says why nothing more will be; every later call
        raises.
        """
        if self.refusal is not None:
            raise FrameSizeError(self.refusal)
        buffer = self._buffer
        buffer += data
        frames: list[bytes] = []
        start = 0
        while len(buffer) - start >= SIZE_BYTES:
            (size,) = SIZE.unpack_from(buffer, start)
            if size < self._min_bytes or size > self._max_bytes:
                self.refusal = (f"a frame of {size} bytes: Kafka's are "
                                f"{self._min_bytes} to {self._max_bytes} bytes here")
                buffer.clear()
                if not frames:
                    raise FrameSizeError(self.refusal)
                return frames
            end = start + SIZE_BYTES + size
            if end > len(buffer):
                break
            frames.append(bytes(buffer[start + SIZE_BYTES:end]))
            start = end
        if start:
            del buffer[:start]
        return frames
