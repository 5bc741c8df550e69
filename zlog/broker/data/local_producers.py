"""The local producers of a worker: requests from shared-memory queues, served like a socket's.

The same doorbell socket takes the worker's local readers (local_readers.py): a connection
whose hello says it reads is handed over to them.

A producer on this host (`Producer(local=True)`, zlog/client/local_produce.py) connects to the
worker's doorbell socket (zlog/transport/local_channel.py) and names a queue pair it made in
/dev/shm (zlog/transport/shm_queue.py). From then on the worker's loop takes its requests from
the requests queue beside the requests of its data socket, hands each to the same
`DataPlane.handle` under an identity of its own (LOCAL_IDENTITY_PREFIX, which no DEALER's
identity starts with), and puts the replies, now or later (an acks=all wait, settled by a
follower's fetch), in the replies queue. Every rule of a produce is the data plane's, so it is
the same for both carriers.

Never wedged by a producer:
- the queues are bounded; a reply that does not fit (a producer that stopped reading) drops
  that producer: it sees its connection closed and retries what it waited for, as after a lost
  connection;
- a message whose framing is impossible drops the producer with a log line;
- a producer that dies is dropped at once: the kernel closes its end of the connection, the
  worker sees end of file, unmaps the queues (their file was unlinked when it was mapped: nothing
  is left in /dev/shm). A producer whose process is gone while its connection stays open (a
  child that inherited the socket) is dropped by the liveness check every LIVENESS_CHECK_MS;
- the hello is checked (local_hello.py), so a local process cannot make the worker map or
  unlink another file than its own queue pair.

Waiting: the worker spins on the queues for its adaptive window (zlog/transport/spin_window.py,
never on a machine without a core to spare), then sets each queue's sleeping flag and sleeps in
its poll, on the doorbells among its sockets. A flag it has just set may not be seen yet by a
producer putting a request at that moment, so that sleep lasts at most PARK_BACKSTOP_MS (a lost
doorbell's cost); a flag that stayed set since is seen, and an idle worker sleeps as long as
its own timers let it. The flag is cleared when the worker takes a request again.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import zmq

from zlog import limits
from zlog.broker.data.local_hello import Peer, open_queues, peer_of
from zlog.broker.data.local_readers import LocalReaders
from zlog.broker.data.partition import Partition
from zlog.errors import ZlogError
from zlog.transport import local_channel
from zlog.transport.codec import Frame
from zlog.transport.server import Reply
from zlog.transport.shm_queue import QueuePair, as_byte_views, queue_directory
from zlog.transport.spin_window import PARK_BACKSTOP_MS, MachineSpinCheck, SpinWindow
from zlog.types import TopicPartition

log = logging.getLogger("zlog.broker.data.local_producers")

LOCAL_IDENTITY_PREFIX: Final = b"\xfflocal-"
"""Identities of local producers: a ROUTER's own identities start with a zero byte."""
LIVENESS_CHECK_MS: Final = 1_000

Handler = Callable[[bytes, Sequence[Frame], int], list[Reply]]


@dataclass(slots=True)
class _Producer:
    connection: socket.socket
    identity: bytes
    peer: Peer
    queues: QueuePair | None = None  # once its hello was accepted

    @property
    def pid(self) -> int:
        return self.peer.pid


@dataclass(slots=True)
class LocalProducers:
    """The doorbell socket and the producers connected to it; see the module docstring."""

    listener: socket.socket | None
    partitions: Mapping[TopicPartition, Partition]  # the worker's own table, for its readers
    directory: Path = field(default_factory=queue_directory)
    readers: LocalReaders = field(default_factory=LocalReaders)  # consumers parked on rings
    _producers: dict[int, _Producer] = field(default_factory=dict)  # by connection fd
    _by_identity: dict[bytes, _Producer] = field(default_factory=dict)
    _polled: set[int] = field(default_factory=set)
    _connections_version: int = 0  # moves when a connection comes or goes
    _polled_version: tuple[int, int] = (-1, -1)
    _next_id: int = 0
    _window: SpinWindow = field(default_factory=SpinWindow)
    _spin_check: MachineSpinCheck = field(default_factory=MachineSpinCheck)
    _parked_since_s: float | None = None
    _next_liveness_check_s: float = 0.0

    @classmethod
    def serving(cls, endpoint: str, partitions: Mapping[TopicPartition, Partition],
                ) -> LocalProducers:
        """Take local producers (and readers) for the worker at `endpoint` (none when its
        doorbell name is taken: another process serves that endpoint on this host)."""
        try:
            return cls(local_channel.listen(endpoint), partitions)
        except OSError as error:
            log.warning("no local producers for %s: %s", endpoint, error)
            return cls(None, partitions)

    # -- the poll loop --------------------------------------------------------------------

    def watch(self, poller: zmq.Poller) -> None:
        """The poller watches the listener and exactly the connected producers and readers
        (looked at again only when one came or went)."""
        version = (self._connections_version, self.readers.version)
        if version == self._polled_version:
            return
        self._polled_version = version
        wanted = set(self._producers) | self.readers.fds()
        if self.listener is not None:
            wanted.add(self.listener.fileno())
        for fd in self._polled - wanted:
            poller.unregister(fd)
        for fd in wanted - self._polled:
            poller.register(fd, zmq.POLLIN)
        self._polled = wanted

    def poll_timeout_ms(self, timeout_ms: int) -> int:
        """The worker is about to poll for `timeout_ms`: spin, then park (module docstring).
        0 when a request is waiting already."""
        if not self._by_identity:
            return timeout_ms
        self._check_liveness()
        self._window.allowed = self._spin_check.allowed()
        window_s = self._window.window_s()
        if window_s:
            spin_until = time.perf_counter() + window_s
            while time.perf_counter() < spin_until:
                if self._any_request():
                    return 0
        flags_set_now = False
        for producer in self._by_identity.values():
            assert producer.queues is not None
            requests = producer.queues.requests
            flags_set_now |= not requests.reader_sleeping
            if not requests.sleep_if_empty():
                return 0
        self._parked_since_s = time.perf_counter()
        # Only a flag set just now can be missed by a producer putting at this moment: after
        # one backstop the worker sleeps as long as its own timers let it.
        return min(timeout_ms, PARK_BACKSTOP_MS) if flags_set_now else timeout_ms

    def serve(self, events: Mapping[object, int], handle: Handler, now_ms: int) -> list[Reply]:
        """After a poll: new producers, doorbells and ends of file, then every request waiting
        (at most DRAIN_MESSAGES_MAX per producer); the replies, local ones included."""
        if self.listener is not None and self.listener.fileno() in events:
            self._accept()
        replies: list[Reply] = []
        if not self._producers and not self.readers.version:
            return replies  # no local client ever: the network path pays nothing more
        for fd in [fd for fd in self.readers.fds() if fd in events]:
            self.readers.on_readable(fd)
        for fd in [fd for fd in self._producers if fd in events]:
            producer = self._producers[fd]
            if producer.queues is None:
                self._hello(producer)
            elif not local_channel.drain(producer.connection):
                self._drop(producer, "its connection closed")
        served = False
        for producer in list(self._by_identity.values()):
            queues = producer.queues
            assert queues is not None
            took = False
            for _ in range(limits.DRAIN_MESSAGES_MAX):
                try:
                    frames = queues.requests.take()
                except ZlogError as error:
                    self._drop(producer, error.message, misbehaved=True)
                    break
                if frames is None:
                    break
                if not took:
                    queues.requests.awake()  # at work: its producer need not ring
                took = served = True
                replies.extend(handle(producer.identity, frames, now_ms))
        if served and self._parked_since_s is not None:
            self._window.note_wait(time.perf_counter() - self._parked_since_s)
            self._parked_since_s = None
        self.readers.wake(self.partitions)  # what this turn appended (or the HW moved)
        return replies

    def deliver(self, replies: Sequence[Reply]) -> Sequence[Reply]:
        """Put the replies to local producers in their queues; the others are returned."""
        if not any(identity.startswith(LOCAL_IDENTITY_PREFIX) for identity, _ in replies):
            return replies
        others: list[Reply] = []
        for identity, frames in replies:
            if not identity.startswith(LOCAL_IDENTITY_PREFIX):
                others.append((identity, frames))
                continue
            producer = self._by_identity.get(identity)
            if producer is None:
                continue  # gone: it retries what it waited for
            assert producer.queues is not None
            replies_queue = producer.queues.replies
            views = as_byte_views(frames)
            if not replies_queue.put(views):
                self._drop(producer, "its replies queue is full (it does not read)",
                           misbehaved=True)
            elif replies_queue.wake_needed() and not local_channel.ring(producer.connection):
                self._drop(producer, "its connection closed")
        return others

    def close(self) -> None:
        self.readers.close()
        for producer in list(self._producers.values()):
            self._drop(producer, "the worker stops")
        if self.listener is not None:
            local_channel.close(self.listener)
            self.listener = None

    @property
    def connected(self) -> int:
        """Producers whose queues are mapped."""
        return len(self._by_identity)

    # -- producers coming and going -------------------------------------------------------

    def _any_request(self) -> bool:
        return any(producer.queues is not None and not producer.queues.requests.is_empty()
                   for producer in self._by_identity.values())

    def _accept(self) -> None:
        assert self.listener is not None
        for _ in range(local_channel.LISTEN_BACKLOG):
            try:
                connection, _address = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                log.warning("accepting a local producer failed: %s", error)
                return
            connection.setblocking(False)
            self._next_id += 1
            identity = LOCAL_IDENTITY_PREFIX + str(self._next_id).encode()
            self._producers[connection.fileno()] = _Producer(connection, identity,
                                                             peer_of(connection))
            self._connections_version += 1

    def _hello(self, producer: _Producer) -> None:
        try:
            message = producer.connection.recv(local_channel.MESSAGE_BYTES_MAX)
        except BlockingIOError:
            return
        except OSError:
            message = b""
        if not message:
            self._drop(producer, "it closed before its hello")
            return
        if message == local_channel.READER_HELLO:  # a consumer parking on rings
            del self._producers[producer.connection.fileno()]
            self._connections_version += 1
            self.readers.adopt(producer.connection)
            return
        try:
            producer.queues = open_queues(producer.peer, message, self.directory)
        except (ZlogError, OSError, ValueError) as error:
            reason = error.message if isinstance(error, ZlogError) else str(error)
            log.warning("local producer (pid %d) refused: %s", producer.pid, reason)
            _answer(producer.connection, local_channel.REFUSED + reason.encode())
            self._drop(producer, "its hello was refused")
            return
        self._by_identity[producer.identity] = producer
        if not _answer(producer.connection, local_channel.OK):
            self._drop(producer, "it left before the answer to its hello")
            return
        log.info("local producer (pid %d) connected", producer.pid)

    def _check_liveness(self) -> None:
        now_s = time.monotonic()
        if now_s < self._next_liveness_check_s:
            return
        self._next_liveness_check_s = now_s + LIVENESS_CHECK_MS / 1000
        for producer in list(self._by_identity.values()):
            if not _process_runs(producer.pid):
                self._drop(producer, f"its process {producer.pid} is gone")

    def _drop(self, producer: _Producer, why: str, *, misbehaved: bool = False) -> None:
        log.log(logging.WARNING if misbehaved else logging.INFO,
                "local producer (pid %d) let go: %s", producer.pid, why)
        self._producers.pop(producer.connection.fileno(), None)
        self._by_identity.pop(producer.identity, None)
        self._connections_version += 1
        if producer.queues is not None:
            producer.queues.close()
            producer.queues = None
        local_channel.close(producer.connection)


def _answer(connection: socket.socket, message: bytes) -> bool:
    try:
        connection.send(message[:local_channel.MESSAGE_BYTES_MAX], socket.MSG_DONTWAIT)
    except OSError:
        return False
    return True


def _process_runs(pid: int) -> bool:
    """Whether `pid` is a process still (one exited unreaped closed its connection already)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: it runs
        return True
    return True
