"""Reading a partition straight from its leader's shared-memory ring, for consumers on that host.

The partition worker appends every accepted batch to a ring file under /dev/shm (see
zlog/shm_segments/ring.py); Metadata names that file per partition (`ring_path`). A consumer on
the same host maps it read-only and reads committed batches with no socket and no request: the
only work is a state read, one validation and decode per batch, and the overrun check after it.

Two ways to hold what was read:
- copies (the default): each batch is copied out of the mapping before the overrun check, so
  the views a consumer returns are its own for as long as it keeps them;
- zero copy (`copy=False`): the decoded views point into the mapping itself. They were whole when
  `read` returned and stay whole until the writer reclaims their space, about a ring's capacity
  of appends later (64 MiB by default). `intact(read_from_position)` says whether that has
  happened to anything read since `forget_reads()`; a reader that uses the views and then sees
  False must throw away what it made of them and read those offsets again (from the segment
  files, through the network). This is the seqlock discipline of Aeron and Chronicle Queue
  readers. Compressed batches are decompressed into the reader's own memory either way.

`LocalRing.read(offset)` answers None whenever the ring cannot serve `offset`, and the consumer
then fetches over the network as usual:
- the file is not on this host (missing, unreadable, not a ring yet);
- `offset` is below the ring's tail (those batches live only in the segment files) or past its
  committed end;
- the writer overran the reader mid-read.
A ring that was replaced (the worker restarted and made a new file) is opened again. A ring
whose writer is gone (its broker was killed, or closed the partition) will never move again:
`writer_gone()` says so, and the consumer then asks the network, which finds the new leader.

Visibility: records at or above the ring's visible end are never returned: the high watermark
the partition's worker publishes in the ring header (records every in-sync replica holds), or
the committed `next_offset` of a ring whose writer publishes none.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import psutil

from zlog.client.fetch_buffer import trim_view
from zlog.client.ring_doorbells import RingNews
from zlog.errors import ZlogError
from zlog.record.arrays import BatchView, parse_batch
from zlog.record.header import validate_batch
from zlog.shm_segments.log import ring_path_for
from zlog.shm_segments.ring import RingOverrunError, RingReader
from zlog.transport.spin_window import MachineSpinCheck, SpinWindow

__all__ = ["Backoff", "LocalRing", "is_local_endpoint", "ring_exists", "ring_path_for"]

# How often a caught-up reader checks (one stat) whether its ring file was replaced.
_REPLACED_CHECK_INTERVAL_S: Final = 0.005
# How often a reader checks (one signal-0 call) that the ring's writer still runs.
_WRITER_CHECK_INTERVAL_S: Final = 0.02
# Waiting for the head to move, after the spin: sleep from the first to the last pause, doubling.
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
    """Waiting for a ring head to move: a bounded busy spin, then sleeps that double.

    The spin is for latency: a sleeping process needs a scheduler wake-up (tens of microseconds
    on a virtual machine), while a spinning one sees a commit within a state read. It costs a
    core while it lasts, so it is bounded per wait: by `spin_s` (0 for none), by a few of the
    recent waits (none once waits are longer than `spin_s`: a quiet ring), and never on a
    machine without a core to spare beside the ring's writer (zlog/transport/spin_window.py).
    Then the sleeps, from PAUSE_FIRST_S up to PAUSE_LAST_S, on the writers' doorbells when
    they have them (ring_doorbells.py).
    """

    def __init__(self, spin_s: float = 0.0,
                 spin_allowed: Callable[[], bool] | None = None) -> None:
        assert spin_s >= 0, spin_s
        self.spin_s = spin_s
        self.window = SpinWindow(cap_s=spin_s)  # what the waits that ended with news teach
        self._spin_allowed = spin_allowed or MachineSpinCheck().allowed
        self._spin_until: float | None = None
        self._waiting_since: float | None = None
        self._pause_s = PAUSE_FIRST_S

    def reset(self) -> None:
        self._spin_until = None
        self._waiting_since = None
        self._pause_s = PAUSE_FIRST_S

    def wait(self, remaining_s: float, news: Callable[[], bool]) -> None:
        """Return as soon as `news()` is true, or after one pause once the spin is spent."""
        now = time.perf_counter()
        if self._spin_until is None:
            self._waiting_since = now
            self.window.allowed = self.spin_s > 0 and self._spin_allowed()
            self._spin_until = now + self.window.window_s()
        spin_until = min(self._spin_until, now + max(remaining_s, 0.0))
        while now < spin_until:
            if news():
                self._waited(now)
                return
            now = time.perf_counter()
        if news():
            self._waited(now)
            return
        pause_s = max(0.0, min(self._pause_s, remaining_s))
        if isinstance(news, RingNews):  # parked on the writers' doorbells: woken by an append
            news.park(pause_s)
        else:
            time.sleep(pause_s)
        self._pause_s = min(self._pause_s * 2, PAUSE_LAST_S)

    def _waited(self, now: float) -> None:
        """News came: how long this wait lasted sets the next spin windows."""
        if self._waiting_since is not None:
            self.window.note_wait(now - self._waiting_since)
            self._waiting_since = None


class LocalRing:
    """One partition's ring, read by one consumer; follows ring positions between reads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._reader: RingReader | None = None
        self._position: int | None = None  # ring position of the batch holding self._offset
        self._offset = -1
        self._next_replaced_check = 0.0
        # The lowest position read since forget_reads(): zero-copy views from there are held.
        self.read_from_position: int | None = None
        self.high_watermark: int | None = None  # the visible end seen by the last read
        self._next_writer_check = 0.0
        self._writer_gone = False

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

    def writer_gone(self) -> bool:
        """Whether no running process writes this ring (checked at most every 20 ms).

        The writer records its pid in the header and clears it when it closes the ring; a
        pid that is no longer a process is a writer that was killed. Pids are this host's:
        a reader in another pid namespace than the broker sees every writer as gone and so
        reads over the network.
        """
        now = time.monotonic()
        if now < self._next_writer_check:
            return self._writer_gone
        self._next_writer_check = now + _WRITER_CHECK_INTERVAL_S
        self._reopen_if_replaced()
        reader = self._open()
        self._writer_gone = reader is None or not _process_runs(reader.writer_pid)
        return self._writer_gone

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
        return reader.visible_end_offset

    def has_news(self, offset: int) -> bool:
        """Whether records at or past `offset` may be readable now: one state read, no decode.

        True also when the ring cannot serve `offset` at all, so that the caller goes and finds
        out (and falls back to the network): a spinning reader calls this between reads.
        """
        reader = self._reader
        if reader is None:
            return True
        try:
            return reader.visible_end_offset != offset
        except ZlogError:
            return True

    def read(self, offset: int, max_bytes: int, *, check_crc: bool = True, copy: bool = True,
             ) -> tuple[list[BatchView], int] | None:
        """Decoded batches from `offset` and the offset after them.

        ([], offset) when caught up; None when the ring cannot serve `offset` (use the network).
        With `copy=False` the views point into the mapping: see the module docstring.
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
        start_position = self._position
        try:
            # The visible end first: batches past it are not read, so the next read starts
            # where this one stops instead of finding its place again from the tail.
            end = self.high_watermark = self._visible_end(reader)
            if copy:
                copies, next_position = reader.read(start_position, max_bytes, end)
                batches: list[memoryview] = [memoryview(data) for data in copies]
            else:
                batches, next_position = reader.read_views(start_position, max_bytes, end)
            if not batches:
                self._reopen_if_replaced()
                return [], offset
            views, next_offset, complete = _decode(batches, offset, end, check_crc)
            if not copy and not reader.intact(start_position):
                raise RingOverrunError(start_position, reader.tail_position)
        except (RingOverrunError, ValueError, ZlogError):
            self._position = None  # fell behind the tail, or the ring was reset: find again
            return None
        if self.read_from_position is None:
            self.read_from_position = start_position
        if complete:
            self._position, self._offset = next_position, next_offset
        else:
            self._position = None  # stopped at the visible end inside what was read
        return views, next_offset

    def forget_reads(self) -> None:
        """Everything read so far has been handed over (and checked) by the caller."""
        self.read_from_position = None

    def intact(self, position: int | None) -> bool:
        """Whether batches read from `position` on (a `read_from_position`) are still whole.

        Always True for copies; for zero-copy views, False once the writer has reclaimed them.
        """
        reader = self._reader
        if reader is None or position is None:
            return True
        try:
            return reader.intact(position)
        except ZlogError:
            return False

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._position = None


def _decode(batches: list[memoryview], offset: int, end: int, check_crc: bool) -> (
    tuple[list[BatchView], int, bool]
):
    """Views of the records at >= offset and < end; the offset after them; whether all fit.

    Each ring entry is exactly one batch, so it is validated once (framing, CRC) and decoded
    with that header.
    """
    views: list[BatchView] = []
    next_offset = offset
    for data in batches:
        header = validate_batch(data, strict=False, check_crc=check_crc)
        if header.next_offset > end:
            return views, next_offset, False
        next_offset = max(next_offset, header.next_offset)
        if header.next_offset <= offset or header.is_control:
            continue
        trimmed = trim_view(parse_batch(data, check_crc=False, header=header), offset)
        if trimmed is not None:
            views.append(trimmed)
    return views, next_offset, True


def _process_runs(pid: int) -> bool:
    """Whether `pid` is a live process (a killed one not yet reaped, a zombie, is not)."""
    if pid <= 0:
        return False
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process: it runs
        return True


def ring_exists(path: str) -> bool:
    """Whether `path` names a file on this host (a ring_path from another host will not)."""
    return bool(path) and os.path.isabs(path) and os.path.exists(path)
