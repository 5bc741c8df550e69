"""Where the producer's I/O thread sleeps: one poll set over a wake-up pipe and the ZMQ_FD of
every connection, so an answer, a connection event or any thread's wake-up ends the wait.

ZMQ_FD only signals that a socket's ZMQ_EVENTS may have changed; the sender reads ZMQ_EVENTS
itself before it sleeps (`sender.py`). The poll set is built once and rebuilt only when the
connections change (`Connections.generation`), not on every pass.
"""

from __future__ import annotations

import contextlib
import os
import select

import zmq

from zlog.client.cluster import Connections
from zlog.transport.rpc import RpcClient


class WakeablePoll:
    """The wake-up pipe and the poll set; `wake` may be called from any thread."""

    def __init__(self) -> None:
        self._closed = False
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._poller = select.poll()
        self._polled_generation = -1
        self._parking: list[RpcClient] = []  # connections that spin, then park (raw_fds)

    def wake(self) -> None:
        """Cut the current or next wait short."""
        if self._closed:
            return
        with contextlib.suppress(BlockingIOError):  # full: a wake-up is pending already
            os.write(self._wake_write, b"w")

    def stale(self, connections: Connections) -> bool:
        """Whether connections opened or closed since the poll set was built."""
        return self._polled_generation != connections.generation

    def rebuild(self, connections: Connections) -> None:
        """Poll the wake-up pipe and every connection's ZMQ_FD (a socket with nothing in
        flight is still drained when something arrives on it: a late answer)."""
        poller = select.poll()
        poller.register(self._wake_read, select.POLLIN)
        self._parking = []
        for rpc in connections.clients():
            for sock in rpc.sockets:  # the DEALER and its connection monitor
                fd = sock.getsockopt(zmq.FD)
                assert isinstance(fd, int)
                poller.register(fd, select.POLLIN)
            for fd in rpc.raw_fds:  # a local producer's doorbell (local_produce.py)
                poller.register(fd, select.POLLIN)
                self._parking.append(rpc)
        self._poller = poller
        self._polled_generation = connections.generation

    def wait(self, wait_ms: int) -> None:
        """Sleep until a socket signals, a wake-up or `wait_ms` (not at all when a local
        connection's answer came while it got ready to park)."""
        for rpc in self._parking:
            if not rpc.ready_to_park():
                return
            wait_ms = rpc.park_ms(wait_ms)
        ready = self._poller.poll(wait_ms)
        if any(fd == self._wake_read for fd, _events in ready):
            with contextlib.suppress(BlockingIOError):  # another pass drained it already
                os.read(self._wake_read, 4096)

    def wait_wake_only(self, wait_ms: int) -> None:
        """Sleep until a wake-up or `wait_ms`, not watching the connections."""
        poller = select.poll()
        poller.register(self._wake_read, select.POLLIN)
        if poller.poll(wait_ms):
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_read, 4096)

    def close(self) -> None:
        """Close the pipe; only once no thread waits or wakes any more."""
        if not self._closed:
            self._closed = True
            os.close(self._wake_read)
            os.close(self._wake_write)
