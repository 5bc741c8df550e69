"""Consumers on this host parked on a partition's ring, woken by the worker that appends to it.

A local consumer (`Consumer(local=True)`) reads a leader's ring straight from shared memory;
with nothing new there it parks. It connects to the worker's doorbell socket as a reader
(zlog/transport/local_channel.py) and says, per partition, the offset it parks at. The worker
rings it once that partition's high watermark passes the offset (records there are readable in
the ring), which `wake` checks after each turn of its loop, and then forgets the wait: the
consumer says again where it parks next. A wait for a partition this worker no longer holds is
rung too, so that the consumer looks again (and finds the ring's writer gone, or the leader
moved). A reader that goes away is dropped at its end of file; nothing a reader sends can take
more of the worker than a dictionary entry per partition it names.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping

from zlog.broker.data.partition import Partition
from zlog.transport import local_channel
from zlog.types import TopicPartition

log = logging.getLogger("zlog.broker.data.local_readers")


class LocalReaders:
    """Reader connections, and the waits they told; see the module docstring."""

    def __init__(self) -> None:
        self._connections: dict[int, socket.socket] = {}  # by fd
        self._waits: dict[TopicPartition, dict[int, int]] = {}  # tp -> reader fd -> offset
        self.version = 0  # moves when a reader comes or goes (0: never any)

    def fds(self) -> set[int]:
        return set(self._connections)

    def adopt(self, connection: socket.socket) -> None:
        """A connection whose hello said it reads."""
        self._connections[connection.fileno()] = connection
        self.version += 1

    def on_readable(self, fd: int) -> None:
        """Take the reader's waits; drop it at its end of file."""
        connection = self._connections[fd]
        messages = local_channel.receive(connection)
        if messages is None:
            self._drop(fd)
            return
        for message in messages:
            wait = local_channel.parse_wait(message)
            if wait is None:
                log.debug("local reader sent an unknown message %r", message[:40])
                continue
            topic, partition, offset = wait
            self._waits.setdefault(TopicPartition(topic, partition), {})[fd] = offset

    def wake(self, partitions: Mapping[TopicPartition, Partition]) -> None:
        """Ring every reader whose partition's high watermark passed its offset."""
        if not self._waits:
            return
        for tp in list(self._waits):
            partition = partitions.get(tp)
            waiting = self._waits[tp]
            for fd, offset in list(waiting.items()):
                if partition is None or partition.high_watermark > offset:
                    del waiting[fd]
                    if not local_channel.ring(self._connections[fd]):
                        self._drop(fd)
            if not waiting:
                self._waits.pop(tp, None)

    def close(self) -> None:
        for fd in list(self._connections):
            self._drop(fd)

    def _drop(self, fd: int) -> None:
        connection = self._connections.pop(fd, None)
        self.version += 1
        for waiting in self._waits.values():
            waiting.pop(fd, None)
        if connection is not None:
            local_channel.close(connection)
