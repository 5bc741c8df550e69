"""What wakes a consumer's poll that waits for fetches when its group has work for it.

The poll thread does a group's work (callbacks, the fetches of moved partitions) only at the
top of a poll; a poll that waits for records would otherwise notice the work only when its
wait ends, up to the whole `poll(timeout_ms)` later, and every partition the group moves waits
that long once more per step of the rebalance (a revocation that frees what a joining member
waits for, the committed offsets that let gained partitions start). The heartbeat thread and
the coordinator thread wake it through this socket pair instead; the poll waits on it beside
its fetch sockets, or alone when it has nothing to fetch.
"""

from __future__ import annotations

import contextlib
import select
import socket


class GroupWake:
    """A socket pair: `wake` from any thread, the poll thread waits on `reader`."""

    def __init__(self) -> None:
        self.reader, self._writer = socket.socketpair()
        self.reader.setblocking(False)
        self._writer.setblocking(False)
        self.fileno = self.reader.fileno()
        """What a poller reports the reader as."""

    def wake(self) -> None:
        with contextlib.suppress(OSError):  # full (a wake is pending), or closed
            self._writer.send(b"\x01")

    def drain(self) -> None:
        with contextlib.suppress(OSError):
            while self.reader.recv(4096):
                pass

    def wait(self, seconds: float) -> None:
        """Sleep up to `seconds`, less if woken."""
        ready: list[socket.socket] = []
        with contextlib.suppress(OSError, ValueError):  # closed by another thread's close()
            ready, _, _ = select.select([self.reader], [], [], seconds)
        if ready:
            self.drain()

    def close(self) -> None:
        self.reader.close()
        self._writer.close()
