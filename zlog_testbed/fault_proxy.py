"""A TCP proxy that puts network faults between two zlog processes, for the fault tests and the
fault harness.

zlog's hosts talk ZeroMQ over TCP: Raft messages between supervisors, followers fetching from
leaders, supervisors calling the controller. The kernel here has no netem, so a test that wants
a slow link, a cut link or a one-way link between two particular processes points one of them
at a `FaultProxy` in front of the other and tells the proxy what the network should do:

    with FaultProxy(listen=("127.0.1.2", 0), target=("127.0.0.2", 8000)) as proxy:
        peer.connect(proxy.endpoint)   # tcp://127.0.1.2:<the port it bound>
        proxy.delay(50)                # a slow link: every chunk 50 ms late, in order
        proxy.drop()                   # a partition: silence both ways, connections kept open
        proxy.one_way("backward")      # the target hears the client, the client hears nothing
        proxy.heal()                   # forward again; connections that lost bytes are reset

Every fault applies at once to the connections already open and to new ones, and a fault
method returns only once the proxy's thread has applied it, so what the test does next meets
the new fault. Bytes the proxy handed to the kernel before that are beyond its reach, as
packets already delivered are.

A fault may hit some clients only: `client_of` names each connection's client from its
address when it is accepted (which process holds that socket, say), and a fault given
`clients=` applies to those clients' connections alone, the others keeping the proxy-wide
state. In front of a broker, that cuts other brokers off while the test's own clients
(`from_this_process`) still reach it: a partition between brokers that clients see across.

At the TCP level a partition is silence, never a reset: the proxy keeps both sockets open and
reads and discards what arrives. TCP would retransmit those bytes, but once a partition
outlasts the endpoints' heartbeats their connections die anyway; rather than emulate that, a
stream that lost bytes is never resumed with a gap (which would corrupt ZMTP's framing): when
the fault that discarded them is lifted, the proxy resets the connection and the endpoints
reconnect, as ZeroMQ does by itself.

A one-way fault is silence in one direction of each connection, "forward" (client to target)
or "backward", while the other direction delivers as before: what an application sees when
its peer's messages stop arriving but its own still do. The silenced direction swallows
everything, its end of stream (FIN) and a reset included, so its receiver hears nothing at
all, not even that the other end went away; the flowing direction passes on both as usual.
It models lost messages, not lost packets: the kernel's acknowledgements travel on each side
of the proxy, so the flowing direction does not stall after a window's worth as TCP's would
once its ACKs are lost; its connection ends only when an endpoint gives up on the silence
(ZeroMQ's heartbeats, say). Any later fault under which a direction that lost bytes flows
again (heal, the reverse one-way) resets the connection, as for a partition.

One thread per proxy runs an asyncio event loop used as a reactor (readers, writers, timers;
no coroutines), and it alone touches the sockets and the connection state; other threads
reach it through `call_soon_threadsafe`. Memory is bounded: each direction of a connection
queues at most `queue_bytes_max` bytes and then stops reading its source, so a slow link
pushes back on the sender as a real one does.

`python -m zlog_testbed.fault_proxy --listen HOST:PORT --target HOST:PORT [--delay-ms N]` runs
one until SIGTERM or SIGINT, for trying a fault by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import dataclasses
import enum
import errno
import logging
import os
import random
import signal
import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Final, Literal, NamedTuple, Self, TypeVar

log = logging.getLogger(__name__)

Address = tuple[str, int]
Direction = Literal["forward", "backward"]  # forward: client -> target; backward: the reverse
DIRECTIONS: Final[tuple[Direction, ...]] = ("forward", "backward")

CHUNK_BYTES: Final = 64 * 1024  # one recv; the unit that a delay holds back
QUEUE_BYTES_MAX_DEFAULT: Final = 16 * 1024 * 1024  # per direction of a connection
LISTEN_BACKLOG: Final = 128
CALL_TIMEOUT_S: Final = 5.0  # a fault method waits this long for the proxy's thread
# SO_LINGER on, timeout 0: close() sends a RST and leaves no TIME_WAIT behind.
LINGER_RESET: Final = struct.pack("ii", 1, 0)
_CONNECT_PENDING: Final = frozenset({errno.EINPROGRESS, errno.EAGAIN, errno.EWOULDBLOCK})

_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True)
class LinkFault:
    """What the link does now: which directions deliver, and how late.

    Each of heal, delay, drop and one_way replaces the whole state (a delay does not outlive
    a drop), so a test's sequence of calls reads as the sequence of link states.
    """

    name: str = "heal"
    forward_flows: bool = True
    backward_flows: bool = True
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    seed: int = 0

    def flows(self, direction: Direction) -> bool:
        return self.forward_flows if direction == "forward" else self.backward_flows


class FaultEvent(NamedTuple):
    """One fault as the test applied it: for reports that line faults up with what followed."""

    at_s: float  # time.monotonic() when it was applied
    name: str
    args: dict[str, object]


@dataclasses.dataclass
class ProxyStats:
    """Counters since start; `stats()` hands out a copy, never the live object."""

    bytes_forward: int = 0  # delivered client -> target
    bytes_backward: int = 0  # delivered target -> client
    bytes_dropped_forward: int = 0  # discarded by a fault, or queued when a connection was reset
    bytes_dropped_backward: int = 0
    bytes_queued_forward: int = 0  # read but not delivered yet (a delay, or a slow receiver)
    bytes_queued_backward: int = 0
    connections_accepted: int = 0
    connections_open: int = 0
    connections_reset: int = 0  # reset by a fault: reset(), or a lifted fault that lost bytes
    target_connect_failures: int = 0  # the target refused or failed; the client was reset

    def __add__(self, other: ProxyStats) -> ProxyStats:
        return ProxyStats(**{
            field.name: getattr(self, field.name) + getattr(other, field.name)
            for field in dataclasses.fields(self)
        })


class _End(enum.Enum):
    """How a direction's stream ended; queued behind its bytes so a slow link delays it too."""

    EOF = "eof"  # the source shut down its side: passed on as shutdown(SHUT_WR), a FIN
    RESET = "reset"  # the source's socket failed (usually a RST): the connection is reset


@dataclasses.dataclass(eq=False)
class _Pipe:
    """One direction of one connection: what was read from `source` and is owed to `destination`."""

    connection: _Connection
    direction: Direction
    source: socket.socket
    destination: socket.socket
    jitter: random.Random
    queue: deque[tuple[float, memoryview | _End]] = dataclasses.field(default_factory=deque)
    queued_bytes: int = 0
    last_due_s: float = 0.0  # a chunk is never due before the one ahead of it: no reordering
    source_open: bool = True  # nothing has ended the source's stream yet
    finished: bool = False  # its EOF reached the destination
    lost: bool = False  # a fault discarded part of this stream: it may never resume
    reading: bool = False
    awaiting_writable: bool = False
    timer: asyncio.TimerHandle | None = None


@dataclasses.dataclass(eq=False)
class _Connection:
    number: int
    client: socket.socket
    target: socket.socket
    pipes: tuple[_Pipe, ...] = ()
    connected: bool = False  # the proxy's own connection to the target is up
    closed: bool = False
    client_name: str = ""  # who connected, as `client_of` named it


def _jitter_random(seed: int, number: int, direction: Direction) -> random.Random:
    """A generator per connection and direction, so one's draws never shift another's."""
    return random.Random(f"{seed}/{number}/{direction}")


def _sockaddr(address: Address) -> tuple[socket.AddressFamily, tuple[object, ...]]:
    family, _, _, _, sockaddr = socket.getaddrinfo(
        address[0], address[1], type=socket.SOCK_STREAM
    )[0]
    return family, sockaddr


def socket_owner(address: Address, pids: Iterable[int]) -> int | None:
    """Which of `pids` holds the IPv4 TCP socket bound to `address`, if any: the socket's
    inode from /proc/net/tcp, then the process whose descriptors name it. Linux only; cheap
    enough to call for every connection a proxy accepts (psutil's per-process scan is not)."""
    host, port = address[:2]
    try:
        packed = struct.unpack("<I", socket.inet_aton(host))[0]
    except OSError:
        return None  # not IPv4
    wanted = f"{packed:08X}:{port:04X}"
    with open("/proc/net/tcp", encoding="ascii") as table:
        inode = next((fields[9] for fields in map(str.split, table)
                      if fields[1] == wanted and fields[9] != "0"), None)
    if inode is None:
        return None
    link = f"socket:[{inode}]"
    for pid in pids:
        with contextlib.suppress(OSError):  # gone, or a descriptor closed meanwhile
            directory = f"/proc/{pid}/fd"
            for fd in os.listdir(directory):
                with contextlib.suppress(OSError):
                    if os.readlink(f"{directory}/{fd}") == link:
                        return pid
    return None


def from_this_process(client: Address) -> bool:
    """Whether `client` is the address of a TCP socket this process holds: the test's own
    clients, as opposed to the processes under test."""
    return socket_owner(client, (os.getpid(),)) is not None



def _tune(sock: socket.socket) -> None:
    """Non-blocking, and no Nagle: libzmq disables it too, and a proxy must not add latency."""
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class FaultProxy:
    """Forwards TCP connections from `listen` to `target`, with faults on demand.

    `start()` binds `listen` (port 0 picks a free port; `address` and `endpoint` tell which)
    and starts the proxy's thread; `close()` resets every connection, frees the port and stops
    the thread. It is a context manager. The fault methods may be called from any thread, at
    any time, and before `start()` too. `client_of(client address)`, called once per accepted
    connection on the proxy's thread, names the client for faults aimed at some clients only.
    """

    def __init__(
        self, listen: Address, target: Address, *,
        queue_bytes_max: int = QUEUE_BYTES_MAX_DEFAULT, name: str | None = None,
        client_of: Callable[[Address], str] | None = None,
    ) -> None:
        if queue_bytes_max <= 0:
            raise ValueError(f"queue_bytes_max must be positive, not {queue_bytes_max}")
        self.listen = listen
        self.target = target
        self.queue_bytes_max = queue_bytes_max
        self.name = name or f"{listen[0]}:{listen[1]}->{target[0]}:{target[1]}"
        self._client_of = client_of
        self._client_faults: dict[str, LinkFault] = {}  # overrides of _fault, by client
        self._lock = threading.Lock()  # guards _stats, _faults and _errors
        self._stats = ProxyStats()
        self._faults: list[FaultEvent] = []
        self._errors: list[str] = []
        self._fault = LinkFault()  # written by the proxy's thread once it runs
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._listener: socket.socket | None = None
        self._address: Address | None = None
        self._target_family = socket.AF_INET
        self._target_sockaddr: tuple[object, ...] = target
        self._connections: dict[int, _Connection] = {}
        self._connections_made = 0
        self._closed = False

    # --- life cycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind `listen` in the caller's thread (so a taken port raises here), then serve."""
        if self._closed:
            raise RuntimeError(f"fault proxy {self.name} is closed")
        if self._thread is not None:
            return self
        self._target_family, self._target_sockaddr = _sockaddr(self.target)
        listener = self._bind(self.listen)
        host, port = listener.getsockname()[:2]
        self._address = (host, port)
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(self._on_loop_error)
        self._loop = loop
        self._listener = listener
        loop.add_reader(listener, self._on_acceptable)  # the loop is not running yet: safe
        self._thread = threading.Thread(
            target=loop.run_forever, name=f"fault-proxy {self.name}", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Reset every connection (RST, so no TIME_WAIT holds the port), stop listening, stop.

        When it returns, the listening port can be bound again, even without SO_REUSEADDR.
        """
        if self._closed:
            return
        self._closed = True
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            self._run_in_loop(self._shutdown)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(CALL_TIMEOUT_S)
            if not thread.is_alive():
                loop.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def address(self) -> Address:
        """The address the proxy listens on, with the port it actually bound."""
        if self._address is None:
            raise RuntimeError(f"fault proxy {self.name} is not started")
        return self._address

    @property
    def endpoint(self) -> str:
        """`address` as a ZeroMQ endpoint, for `socket.connect`."""
        host, port = self.address
        return f"tcp://{host}:{port}"

    # --- faults -----------------------------------------------------------------------------

    # Each takes `clients`: None applies the fault to every connection, now and new (and ends
    # every fault aimed at some clients); a set of names applies it to those clients'
    # connections only (see `client_of`).

    def heal(self, clients: Collection[str] | None = None) -> None:
        """Forward normally. Connections that lost bytes to the fault before are reset."""
        self._set_fault(LinkFault("heal"), {}, clients)

    def delay(
        self, delay_ms: float, jitter_ms: float = 0.0, seed: int = 0,
        clients: Collection[str] | None = None,
    ) -> None:
        """A slow link: each chunk read is delivered `delay_ms` plus up to `jitter_ms` later.

        The jitter is uniform and drawn from a generator seeded by `seed`, the connection's
        number and the direction. Order is kept per direction: a chunk waits for the one ahead
        of it, so jitter slows a stream down but never reorders it. Chunks already queued keep
        the time they were given.
        """
        if delay_ms < 0 or jitter_ms < 0:
            raise ValueError(f"delays are not negative: delay_ms={delay_ms} jitter_ms={jitter_ms}")
        self._set_fault(
            LinkFault("delay", delay_ms=delay_ms, jitter_ms=jitter_ms, seed=seed),
            {"delay_ms": delay_ms, "jitter_ms": jitter_ms, "seed": seed}, clients,
        )

    def drop(self, clients: Collection[str] | None = None) -> None:
        """A partition: nothing is delivered either way, and nothing is closed.

        Connections stay open and new ones are accepted (and connected to the target), but
        every byte read from either side is discarded, as are the bytes still queued.
        """
        self._set_fault(
            LinkFault("drop", forward_flows=False, backward_flows=False), {}, clients
        )

    partition = drop

    def one_way(self, direction: Direction, clients: Collection[str] | None = None) -> None:
        """Discard the bytes going `direction` ("forward": client -> target, or "backward"),
        as `drop` does, while the other direction flows."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction is 'forward' or 'backward', not {direction!r}")
        self._set_fault(
            LinkFault(
                "one_way",
                forward_flows=direction != "forward",
                backward_flows=direction != "backward",
            ),
            {"direction": direction}, clients,
        )

    def reset(self) -> None:
        """Reset every open connection (RST both ways) and keep accepting new ones."""
        self._check_open()
        self._call(self._reset_all)
        self._record("reset", {})

    def refuse(self) -> None:
        """Stop listening: new connections are refused (RST); open ones are left alone."""
        self._check_started()
        self._call(self._stop_listening)
        self._record("refuse", {})

    def accept(self) -> None:
        """Listen again, on the same address and port, after `refuse`."""
        self._check_started()
        self._call(self._start_listening)
        self._record("accept", {})

    # --- reports ----------------------------------------------------------------------------

    @property
    def fault(self) -> LinkFault:
        """The link's state now (reset, refuse and accept are actions, not states)."""
        return self._fault

    @property
    def faults(self) -> list[FaultEvent]:
        """Every fault applied so far, oldest first."""
        with self._lock:
            return list(self._faults)

    @property
    def errors(self) -> list[str]:
        """Unexpected errors inside the proxy's thread; a test may insist there are none."""
        with self._lock:
            return list(self._errors)

    def stats(self) -> ProxyStats:
        with self._lock:
            return dataclasses.replace(self._stats)

    # --- calling into the proxy's thread ------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"fault proxy {self.name} is closed")

    def _check_started(self) -> None:
        self._check_open()
        if self._thread is None:
            raise RuntimeError(f"fault proxy {self.name} is not started")

    def _set_fault(
        self, fault: LinkFault, args: dict[str, object], clients: Collection[str] | None
    ) -> None:
        self._check_open()
        aimed = None if clients is None else frozenset(clients)
        self._call(lambda: self._apply_fault(fault, aimed))
        self._record(fault.name, _aimed(args, aimed))

    def _record(self, name: str, args: dict[str, object]) -> None:
        with self._lock:
            self._faults.append(FaultEvent(time.monotonic(), name, args))

    def _call(self, function: Callable[[], _T]) -> _T:
        """Run `function` on the proxy's thread and wait for it: once a fault method returns,
        the fault is in force. Before `start` there is no thread and no connection yet."""
        if self._thread is None:
            return function()
        return self._run_in_loop(function)

    def _run_in_loop(self, function: Callable[[], _T]) -> _T:
        loop, thread = self._loop, self._thread
        assert loop is not None and thread is not None
        if threading.current_thread() is thread:
            return function()
        done: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(function())
            except Exception as error:
                done.set_exception(error)

        loop.call_soon_threadsafe(run)
        return done.result(timeout=CALL_TIMEOUT_S)

    def _on_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        message = str(context.get("message"))
        if (exception := context.get("exception")) is not None:
            message = f"{message}: {exception!r}"
        log.error("fault proxy %s: %s", self.name, message)
        with self._lock:
            self._errors.append(message)

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(self._stats, name, getattr(self._stats, name) + delta)

    # --- everything below runs on the proxy's thread ------------------------------------------

    @property
    def _reactor(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None
        return self._loop

    def _bind(self, address: Address) -> socket.socket:
        family, sockaddr = _sockaddr(address)
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            # A port whose accepted connections sit in TIME_WAIT can still be listened on:
            # accept() after refuse() must get the same port back.
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(sockaddr)
            listener.listen(LISTEN_BACKLOG)
            listener.setblocking(False)
        except BaseException:
            listener.close()
            raise
        return listener

    def _start_listening(self) -> None:
        if self._listener is None:
            self._listener = self._bind(self.address)
            self._reactor.add_reader(self._listener, self._on_acceptable)

    def _stop_listening(self) -> None:
        if self._listener is not None:
            self._reactor.remove_reader(self._listener)
            self._listener.close()  # the backlog's connections are reset, later ones refused
            self._listener = None

    def _shutdown(self) -> None:
        for connection in list(self._connections.values()):
            self._abort(connection, by_fault=False)
        self._stop_listening()

    def _reset_all(self) -> None:
        for connection in list(self._connections.values()):
            self._abort(connection, by_fault=True)

    def _fault_of(self, connection: _Connection) -> LinkFault:
        return self._client_faults.get(connection.client_name, self._fault)

    def _apply_fault(self, fault: LinkFault, clients: frozenset[str] | None) -> None:
        if clients is None:
            self._fault = fault
            self._client_faults.clear()
        else:
            self._client_faults.update(dict.fromkeys(clients, fault))
        for connection in list(self._connections.values()):
            if clients is not None and connection.client_name not in clients:
                continue
            for pipe in connection.pipes:
                if fault.jitter_ms > 0:
                    pipe.jitter = _jitter_random(fault.seed, connection.number, pipe.direction)
                if not fault.flows(pipe.direction):
                    self._discard(pipe)
            if any(pipe.lost and fault.flows(pipe.direction) for pipe in connection.pipes):
                self._abort(connection, by_fault=True)  # never resume a stream with a gap
                continue
            for pipe in connection.pipes:
                self._pump(pipe)
                self._update_reading(pipe)

    def _on_acceptable(self) -> None:
        while self._listener is not None:
            try:
                client, peer = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # out of descriptors, say: leave the rest in the backlog
                log.warning("fault proxy %s: accept failed: %s", self.name, error)
                return
            name = "" if self._client_of is None else self._client_of(peer[:2])
            self._open(client, name)

    def _open(self, client: socket.socket, client_name: str) -> None:
        target = socket.socket(self._target_family, socket.SOCK_STREAM)
        _tune(client)
        _tune(target)
        number = self._connections_made
        self._connections_made += 1
        connection = _Connection(number, client, target, client_name=client_name)
        seed = self._fault.seed
        connection.pipes = (
            _Pipe(connection, "forward", client, target, _jitter_random(seed, number, "forward")),
            _Pipe(connection, "backward", target, client, _jitter_random(seed, number, "backward")),
        )
        self._connections[number] = connection
        self._count(connections_accepted=1, connections_open=1)
        status = target.connect_ex(self._target_sockaddr)
        if status == 0:
            self._on_connected(connection)
        elif status in _CONNECT_PENDING:
            self._reactor.add_writer(target, self._on_connect_done, connection)
        else:
            self._connect_failed(connection, status)

    def _on_connect_done(self, connection: _Connection) -> None:
        self._reactor.remove_writer(connection.target)
        status = connection.target.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if status == 0:
            self._on_connected(connection)
        else:
            self._connect_failed(connection, status)

    def _on_connected(self, connection: _Connection) -> None:
        connection.connected = True
        for pipe in connection.pipes:
            self._update_reading(pipe)

    def _connect_failed(self, connection: _Connection, status: int) -> None:
        log.info("fault proxy %s: target refused: %s", self.name, errno.errorcode.get(status))
        self._count(target_connect_failures=1)
        self._abort(connection, by_fault=False)

    def _on_readable(self, pipe: _Pipe) -> None:
        fault = self._fault_of(pipe.connection)
        flows = fault.flows(pipe.direction)
        size = CHUNK_BYTES if not flows else min(
            CHUNK_BYTES, self.queue_bytes_max - pipe.queued_bytes
        )
        item: memoryview | _End
        try:
            data = pipe.source.recv(size) if size > 0 else None
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            item = _End.RESET
        else:
            if data is None:  # the queue is full: stop reading until it drains
                self._update_reading(pipe)
                return
            item = memoryview(data) if data else _End.EOF
        if isinstance(item, _End):
            pipe.source_open = False
        size_read = len(item) if isinstance(item, memoryview) else 0
        if not flows:
            pipe.lost = True
            self._count(**{f"bytes_dropped_{pipe.direction}": size_read})
            self._update_reading(pipe)
            return
        due_s = self._reactor.time()
        if fault.delay_ms > 0 or fault.jitter_ms > 0:
            jitter_ms = pipe.jitter.uniform(0.0, fault.jitter_ms) if fault.jitter_ms > 0 else 0.0
            due_s += (fault.delay_ms + jitter_ms) / 1000.0
        due_s = max(due_s, pipe.last_due_s)
        pipe.last_due_s = due_s
        pipe.queue.append((due_s, item))
        pipe.queued_bytes += size_read
        self._count(**{f"bytes_queued_{pipe.direction}": size_read})
        self._pump(pipe)
        self._update_reading(pipe)

    def _pump(self, pipe: _Pipe) -> None:
        """Deliver what is due, in order, as far as the destination takes it."""
        connection = pipe.connection
        if connection.closed or not connection.connected or pipe.awaiting_writable:
            return
        if not self._fault_of(connection).flows(pipe.direction):
            return
        now_s = self._reactor.time()
        while pipe.queue:
            due_s, item = pipe.queue[0]
            if due_s > now_s:
                if pipe.timer is None:
                    pipe.timer = self._reactor.call_at(due_s, self._on_due, pipe)
                return
            if item is _End.EOF:
                pipe.queue.popleft()
                with contextlib.suppress(OSError):
                    pipe.destination.shutdown(socket.SHUT_WR)
                pipe.finished = True
                if all(each.finished for each in connection.pipes):
                    self._finish(connection)
                return
            if item is _End.RESET:
                self._abort(connection, by_fault=False)
                return
            assert isinstance(item, memoryview)
            try:
                sent = pipe.destination.send(item)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self._destination_failed(pipe)
                return
            pipe.queued_bytes -= sent
            self._count(**{
                f"bytes_{pipe.direction}": sent, f"bytes_queued_{pipe.direction}": -sent,
            })
            if sent < len(item):
                pipe.queue[0] = (due_s, item[sent:])
                pipe.awaiting_writable = True
                self._reactor.add_writer(pipe.destination, self._on_writable, pipe)
                return
            pipe.queue.popleft()

    def _on_due(self, pipe: _Pipe) -> None:
        pipe.timer = None
        self._pump(pipe)
        self._update_reading(pipe)

    def _on_writable(self, pipe: _Pipe) -> None:
        self._reactor.remove_writer(pipe.destination)
        pipe.awaiting_writable = False
        self._pump(pipe)
        self._update_reading(pipe)

    def _update_reading(self, pipe: _Pipe) -> None:
        """Read while there is room, unless the destination is not taking bytes (backpressure).

        A direction that does not flow reads and discards regardless, as a cut link swallows
        whatever is sent into it.
        """
        connection = pipe.connection
        want = (
            not connection.closed and connection.connected and pipe.source_open
            and (
                not self._fault_of(connection).flows(pipe.direction)
                or (pipe.queued_bytes < self.queue_bytes_max and not pipe.awaiting_writable)
            )
        )
        if want and not pipe.reading:
            self._reactor.add_reader(pipe.source, self._on_readable, pipe)
            pipe.reading = True
        elif not want and pipe.reading:
            self._reactor.remove_reader(pipe.source)
            pipe.reading = False

    def _discard(self, pipe: _Pipe) -> None:
        """Throw away what `pipe` holds; if that was anything, its stream now has a gap."""
        if pipe.timer is not None:
            pipe.timer.cancel()
            pipe.timer = None
        if pipe.awaiting_writable:
            self._reactor.remove_writer(pipe.destination)
            pipe.awaiting_writable = False
        if pipe.queue:
            pipe.lost = True
            self._count(**{
                f"bytes_dropped_{pipe.direction}": pipe.queued_bytes,
                f"bytes_queued_{pipe.direction}": -pipe.queued_bytes,
            })
            pipe.queue.clear()
            pipe.queued_bytes = 0

    def _destination_failed(self, pipe: _Pipe) -> None:
        """The destination is gone (EPIPE, ECONNRESET). If its reset could reach the source,
        pass it on; if the link swallows that direction, the source hears nothing until the
        fault is lifted, when the connection is reset for the bytes it lost."""
        reverse = next(each for each in pipe.connection.pipes if each is not pipe)
        if self._fault_of(pipe.connection).flows(reverse.direction):
            self._abort(pipe.connection, by_fault=False)
        else:
            self._discard(pipe)
            pipe.lost = True

    def _finish(self, connection: _Connection) -> None:
        """Both sides shut down and both FINs were delivered: close quietly."""
        self._close_sockets(connection, reset=False)
        self._count(connections_open=-1)

    def _abort(self, connection: _Connection, *, by_fault: bool) -> None:
        """Reset both sides at once (SO_LINGER 0), dropping whatever is still queued."""
        if connection.closed:
            return
        for pipe in connection.pipes:
            self._discard(pipe)
        self._close_sockets(connection, reset=True)
        self._count(connections_open=-1, connections_reset=int(by_fault))

    def _close_sockets(self, connection: _Connection, *, reset: bool) -> None:
        connection.closed = True
        for pipe in connection.pipes:
            if pipe.timer is not None:
                pipe.timer.cancel()
                pipe.timer = None
            pipe.reading = pipe.awaiting_writable = False
        for sock in (connection.client, connection.target):
            self._reactor.remove_reader(sock)
            self._reactor.remove_writer(sock)
            if reset:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
            sock.close()
        self._connections.pop(connection.number, None)


class ProxyGroup:
    """Several proxies faulted as one: every port of a broker, or every link into a host.

    Each fault method applies to the proxies in order, each before the next, so when it
    returns the fault is in force on all of them.
    """

    def __init__(self, proxies: Iterable[FaultProxy]) -> None:
        self.proxies: tuple[FaultProxy, ...] = tuple(proxies)
        self._faults: list[FaultEvent] = []
        self._lock = threading.Lock()

    @classmethod
    def between(
        cls, routes: Iterable[tuple[Address, Address]], *,
        queue_bytes_max: int = QUEUE_BYTES_MAX_DEFAULT,
        client_of: Callable[[Address], str] | None = None,
    ) -> ProxyGroup:
        """One proxy per (listen, target) pair, each naming its clients by `client_of`."""
        return cls(
            FaultProxy(listen, target, queue_bytes_max=queue_bytes_max, client_of=client_of)
            for listen, target in routes
        )

    def start(self) -> Self:
        with contextlib.ExitStack() as started:
            for proxy in self.proxies:
                started.callback(proxy.close)
                proxy.start()
            started.pop_all()  # all started: keep them running
        return self

    def close(self) -> None:
        """Close every proxy, even when closing one of them fails."""
        with contextlib.ExitStack() as closing:
            for proxy in self.proxies:
                closing.callback(proxy.close)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[FaultProxy]:
        return iter(self.proxies)

    def __len__(self) -> int:
        return len(self.proxies)

    def __getitem__(self, index: int) -> FaultProxy:
        return self.proxies[index]

    def heal(self, clients: Collection[str] | None = None) -> None:
        self._each("heal", _aimed({}, clients), lambda proxy: proxy.heal(clients))

    def delay(
        self, delay_ms: float, jitter_ms: float = 0.0, seed: int = 0,
        clients: Collection[str] | None = None,
    ) -> None:
        self._each(
            "delay",
            _aimed({"delay_ms": delay_ms, "jitter_ms": jitter_ms, "seed": seed}, clients),
            lambda proxy: proxy.delay(delay_ms, jitter_ms, seed, clients),
        )

    def drop(self, clients: Collection[str] | None = None) -> None:
        self._each("drop", _aimed({}, clients), lambda proxy: proxy.drop(clients))

    partition = drop

    def one_way(self, direction: Direction, clients: Collection[str] | None = None) -> None:
        self._each("one_way", _aimed({"direction": direction}, clients),
                   lambda proxy: proxy.one_way(direction, clients))

    def reset(self) -> None:
        self._each("reset", {}, FaultProxy.reset)

    def refuse(self) -> None:
        self._each("refuse", {}, FaultProxy.refuse)

    def accept(self) -> None:
        self._each("accept", {}, FaultProxy.accept)

    @property
    def faults(self) -> list[FaultEvent]:
        """The group's own history: one event per call, not one per proxy."""
        with self._lock:
            return list(self._faults)

    def stats(self) -> ProxyStats:
        """The members' counters added up."""
        return sum((proxy.stats() for proxy in self.proxies), ProxyStats())

    def _each(
        self, name: str, args: dict[str, object], apply: Callable[[FaultProxy], None]
    ) -> None:
        at_s = time.monotonic()
        for proxy in self.proxies:
            apply(proxy)
        with self._lock:
            self._faults.append(FaultEvent(at_s, name, args))


def _aimed(args: dict[str, object], clients: Collection[str] | None) -> dict[str, object]:
    """A fault's arguments as recorded: with the clients it was aimed at, if any."""
    return args if clients is None else {**args, "clients": sorted(clients)}


def _parse_address(text: str) -> Address:
    host, separator, port = text.rpartition(":")
    if not separator or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, not {text!r}")
    return host.strip("[]"), int(port)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one proxy until SIGTERM or SIGINT; print where it listens, then its counters."""
    parser = argparse.ArgumentParser(
        prog="python -m zlog_testbed.fault_proxy",
        description="Forward TCP from --listen to --target, optionally slowed down.",
    )
    parser.add_argument("--listen", type=_parse_address, required=True, help="HOST:PORT (0: any)")
    parser.add_argument("--target", type=_parse_address, required=True, help="HOST:PORT")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queue-bytes-max", type=int, default=QUEUE_BYTES_MAX_DEFAULT)
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    # Blocked before the proxy's thread exists, so it inherits the mask and the signals wait
    # for sigwait in this thread instead of interrupting either.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    proxy = FaultProxy(options.listen, options.target, queue_bytes_max=options.queue_bytes_max)
    with proxy:
        if options.delay_ms > 0 or options.jitter_ms > 0:
            proxy.delay(options.delay_ms, options.jitter_ms, options.seed)
        host, port = proxy.address
        target_host, target_port = options.target
        print(
            f"fault proxy listening on {host}:{port}, forwarding to {target_host}:{target_port}"
            f" (delay_ms={options.delay_ms:g}, jitter_ms={options.jitter_ms:g})",
            flush=True,
        )
        received = signal.sigwait(stop_signals)
        log.info("fault proxy: %s, closing", signal.Signals(received).name)
    print(f"fault proxy counters: {proxy.stats()}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
