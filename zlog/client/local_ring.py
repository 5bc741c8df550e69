"""Reading a partition straight from its leader's shared-memory ring, for consumers on that host.

The partition worker appends every accepted batch to a ring file under /dev/shm (see
zlog/shm_segments/ring.py); Metadata names that file per partition (`ring_path`). A consumer on
the same host maps it read-only and reads committed batches with no socket and no request: the
only work is a state read, a copy of each whole batch out of the mapping (RingReader.read copies;
the overrun check after the copy says whether the copy is whole) and the batch decode.

`LocalRing.read(offset)` answers None whenever the ring cannot serve `offset`, and the consumer
then fetches over the network as usual:
- the file is not on this host (missing, unreadable, not a ring yet);
- `offset` is below the ring's tail (those batches live only in the segment files) or past its
  committed end;
- the writer overran the reader mid-read.
A ring that was replaced (the worker restarted and made a new file) is opened again.

Visibility: records at or above the ring's committed `next_offset` are never returned. With one
broker per partition that is the high watermark. Replication will need the high watermark
published in the ring header, and `_visible_end` to read it instead.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import socket
import time
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from zlog.client.fetch_buffer import trim_view
from zlog.errors import ErrorCode, ZlogError
from zlog.shm_segments.batch import scan_batches
from zlog.shm_segments.batch_fast import BatchView, parse_batch
from zlog.shm_segments.ring import RingOverrunError, RingReader

# How often a caught-up reader checks (one stat) whether its ring file was replaced.
_REPLACED_CHECK_INTERVAL_S: Final = 0.005
# Waiting for the head to move: spin this many times, then sleep from the first to the last pause,
# doubling each time.
SPINS_BEFORE_SLEEP: Final = 200
PAUSE_FIRST_S: Final = 0.00002
PAUSE_LAST_S: Final = 0.001


@functools.cache
def _local_addresses() -> frozenset[str]:
    addresses = {"localhost", socket.gethostname()}
    with contextlib.suppress(OSError):
        addresses.update(socket.gethostbyname_ex(socket.gethostname())[2])
    return frozenset(addresses)


def is_local_endpoint(endpoint: str) -> bool:
    """Whether a data endpoint (tcp://host:port) is served from this host."""
    host = urlsplit(endpoint).hostname
    if not host:
        return False
    if host in _local_addresses():
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Backoff:
    """A bounded, adaptive wait for the ring head: a short busy spin, then tiny sleeps."""

    def __init__(self) -> None:
        self._spins = 0
        self._pause_s = PAUSE_FIRST_S

    def reset(self) -> None:
        self._spins = 0
        self._pause_s = PAUSE_FIRST_S

    def pause(self, remaining_s: float) -> None:
        if self._spins < SPINS_BEFORE_SLEEP:
            self._spins += 1
            return
        time.sleep(max(0.0, min(self._pause_s, remaining_s)))
        self._pause_s = min(self._pause_s * 2, PAUSE_LAST_S)


class LocalRing:
    """One partition's ring, read by one consumer; follows ring positions between reads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._reader: RingReader | None = None
        self._position: int | None = None  # ring position of the batch holding self._offset
        self._offset = -1
        self._next_replaced_check = 0.0
        self.high_watermark: int | None = None  # the visible end seen by the last read

    def _open(self) -> RingReader | None:
        if self._reader is None:
            try:
                self._reader = RingReader(self.path)
            except (ZlogError, OSError, ValueError):
                return None
            self._position = None
        return self._reader

    def _reopen_if_replaced(self) -> None:
        now = time.monotonic()
        if self._reader is None or now < self._next_replaced_check:
            return
        self._next_replaced_check = now + _REPLACED_CHECK_INTERVAL_S
        if self._reader.is_replaced():
            self.close()

    def covers(self, offset: int) -> bool:
        """Whether the ring holds `offset` or is where it will appear (cheap: one state read)."""
        self._reopen_if_replaced()
        reader = self._open()
        if reader is None:
            return False
        state = reader.snapshot()
        return state.tail_offset <= offset <= state.next_offset

    @staticmethod
    def _visible_end(reader: RingReader) -> int:
        # Single broker: the committed next_offset is the high watermark. With replication the
        # high watermark must be published in the ring header and read here.
        return reader.next_offset

    def read(self, offset: int, max_bytes: int, *, check_crc: bool = True) -> (
        tuple[list[BatchView], int] | None
    ):
        """Decoded batches from `offset` (copies out of the ring) and the offset after them.

        ([], offset) when caught up; None when the ring cannot serve `offset` (use the network).
        """
        reader = self._open()
        if reader is None:
            return None
        if self._position is None or self._offset != offset:
            try:
                position = reader.find(offset)
            except ZlogError:
                position = None
            if position is None:
                self._position = None
                return None
            self._position, self._offset = position, offset
        try:
            copies, next_position = reader.read(self._position, max_bytes)
        except (RingOverrunError, ValueError, ZlogError):
            self._position = None  # fell behind the tail, or the ring was reset: find again
            return None
        end = self.high_watermark = self._visible_end(reader)
        if not copies:
            self._reopen_if_replaced()
            return [], offset
        views, next_offset, complete = _decode(copies, offset, end, check_crc)
        if complete:
            self._position, self._offset = next_position, next_offset
        else:
            self._position = None  # stopped at the visible end inside what was read
        return views, next_offset

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._position = None


def _decode(copies: list[bytes], offset: int, end: int, check_crc: bool) -> (
    tuple[list[BatchView], int, bool]
):
    """Views of the records at >= offset and < end; the offset after them; whether all fit."""
    views: list[BatchView] = []
    next_offset = offset
    for copy in copies:
        data = memoryview(copy)
        found, _ = scan_batches(data, check_crc=check_crc)
        if len(found) != 1:
            raise ZlogError(ErrorCode.CORRUPT_MESSAGE, "a ring entry is not one whole batch")
        start, header = found[0]
        if header.next_offset > end:
            return views, next_offset, False
        next_offset = max(next_offset, header.next_offset)
        if header.next_offset <= offset or header.is_control:
            continue
        trimmed = trim_view(parse_batch(data[start:start + header.size_bytes], check_crc=False),
                            offset)
        if trimmed is not None:
            views.append(trimmed)
    return views, next_offset, True


def ring_exists(path: str) -> bool:
    """Whether `path` names a file on this host (a ring_path from another host will not)."""
    return bool(path) and os.path.isabs(path) and os.path.exists(path)
