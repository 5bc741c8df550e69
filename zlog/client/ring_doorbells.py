"""How a local consumer parks on rings: on the doorbells of the workers that append to them.

A consumer that found nothing new in the rings it reads (local_reads.py) used to sleep a
growing pause (local_ring.Backoff) and look again, so a record appended during a sleep waited
for its end. Now it tells each leader's worker where it parks (the doorbell socket of
zlog/transport/local_channel.py, as a reader) and sleeps on those connections for the same
pause: the worker rings as soon as the partition's high watermark passes the offset, so the
record wakes it. The pause stays the bound of every sleep, so partitions read over the network
meanwhile are looked at as often as before, and a worker that cannot be reached (a follower's
ring, a worker restarting) costs only the doorbell: the consumer sleeps as it did.

A wait told once is not told again while the consumer parks at the same offset; any bell from
a worker makes it tell that worker everything again (the worker forgets the waits it rang).
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from zlog.transport import local_channel
from zlog.types import TopicPartition

RECONNECT_INTERVAL_S: Final = 1.0
"""How often a worker that refused a reader connection is asked again."""

Wait = tuple[str, TopicPartition, int]  # the leader's worker endpoint, the partition, the offset


@dataclass(frozen=True, slots=True)
class RingNews:
    """Whether any ring moved past the consumer's position (`news()`), and how to park until
    one does (`park(pause_s)`)."""

    news: Callable[[], bool]
    park: Callable[[float], None]

    def __call__(self) -> bool:
        return self.news()


class RingDoorbells:
    """The consumer's reader connections, by worker endpoint; one thread (the consumer's)."""

    def __init__(self) -> None:
        self._connections: dict[str, socket.socket] = {}
        self._retry_at_s: dict[str, float] = {}
        self._told: dict[str, dict[TopicPartition, int]] = {}

    def park(self, waits: Sequence[Wait], pause_s: float, news: Callable[[], bool], *,
             complete: bool) -> None:
        """Tell the waits, then sleep until a bell, `news()` or `pause_s`. Not `complete`
        (a ring watched has no doorbell: a follower's), or a worker not reached: the sleep is
        the pause, as without doorbells."""
        polled: dict[int, str] = {}
        for endpoint, tp, offset in waits:
            connection = self._connection(endpoint)
            if connection is None:
                complete = False
                continue
            told = self._told.setdefault(endpoint, {})
            if told.get(tp) != offset:
                try:
                    connection.send(local_channel.wait_message(tp.topic, tp.partition, offset))
                except OSError:
                    self._drop(endpoint)
                    continue
                told[tp] = offset
            polled[connection.fileno()] = endpoint
        if news():
            return
        if not complete or not polled:
            time.sleep(pause_s)
            return
        for fd in _readable(list(polled), pause_s):
            endpoint = polled[fd]
            self._told.pop(endpoint, None)  # rung: tell it every wait again next time
            if local_channel.receive(self._connections[endpoint]) is None:
                self._drop(endpoint)

    def close(self) -> None:
        for endpoint in list(self._connections):
            self._drop(endpoint)

    def _connection(self, endpoint: str) -> socket.socket | None:
        connection = self._connections.get(endpoint)
        if connection is not None:
            return connection
        if time.monotonic() < self._retry_at_s.get(endpoint, 0.0):
            return None
        connection = local_channel.connect(endpoint)
        if connection is not None:
            try:
                connection.send(local_channel.READER_HELLO)
            except OSError:
                local_channel.close(connection)
                connection = None
        if connection is None:
            self._retry_at_s[endpoint] = time.monotonic() + RECONNECT_INTERVAL_S
            return None
        self._connections[endpoint] = connection
        return connection

    def _drop(self, endpoint: str) -> None:
        self._told.pop(endpoint, None)
        connection = self._connections.pop(endpoint, None)
        if connection is not None:
            local_channel.close(connection)
        self._retry_at_s[endpoint] = time.monotonic() + RECONNECT_INTERVAL_S


def _readable(fds: list[int], timeout_s: float) -> list[int]:
    """The fds readable within `timeout_s`, to the microsecond (select(2); poll(2) counts in
    milliseconds, rounding the first pauses of 20 us up to 1 ms)."""
    try:
        readable, _, _ = select.select(fds, [], [], timeout_s)
    except ValueError:  # an fd past FD_SETSIZE: poll, to the millisecond
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        return [fd for fd, _events in poller.poll(timeout_s * 1000)]
    return readable
