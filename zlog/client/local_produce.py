"""A local producer's requests to a worker on this host: a shared-memory queue, no socket.

`Producer(local=True)` sends each request to a partition's leader through a queue pair in
/dev/shm (zlog/transport/shm_queue.py) when that leader's worker runs on this host and takes
local producers (zlog/broker/data/local_producers.py), and over the network otherwise. The
request is the same request, encoded the same way, and the worker serves it on the same path as
one from its socket: validation, the producer's sequence checks (idempotence), acks and the high
watermark are the network produce's. Only the carrier differs, so `LocalRpc` is an RpcClient
whose frames go through the queues: the producer's sender uses it as it uses any connection.

Waiting for an answer: spin briefly, then park (zlog/transport/spin_window.py). The I/O thread
spins on the replies queue for its adaptive window; then it sets the queue's sleeping flag and
sleeps on the doorbell connection (zlog/transport/local_channel.py), which the worker rings
only then, and never longer than PARK_BACKSTOP_MS while a request is in flight (a lost doorbell
costs that much, never a hang).

Falling back to the network:
- the leader is elsewhere, or its worker refuses the connection (not running, no local
  producers taken): the connection is a DEALER as usual; a worker found refusing is asked again
  after RETRY_LOCAL_S, then less and less often while it keeps refusing, and the DEALER is
  given up only once the worker took the local connection;
- the leader moves: the old worker answers NOT_LEADER_OR_FOLLOWER through the queue, the sender
  learns the new leader from Metadata and sends there, through a queue or a socket;
- the worker dies: the kernel closes its end of the connection, every request in flight fails
  at once with NETWORK_EXCEPTION (retriable), and the sender retries it on a new connection:
  idempotence makes the worker answer a retry of a batch it did append with that batch's offset;
- a request larger than the queue can ever hold: the connection is given up (the request fails
  retriably, nothing of it was sent) and this endpoint is served over the network from then on.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import select
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import zmq

from zlog import limits
from zlog.client.local_ring import is_local_endpoint
from zlog.errors import ErrorCode, ZlogError
from zlog.transport import local_channel
from zlog.transport.rpc import RpcClient
from zlog.transport.shm_queue import (
    QUEUE_NAME_PREFIX,
    QueuePair,
    as_byte_views,
    queue_directory,
)
from zlog.transport.spin_window import PARK_BACKSTOP_MS, MachineSpinCheck, SpinWindow
from zlog.transport.wire import Buffer

log = logging.getLogger("zlog.client.producer")

HELLO_TIMEOUT_S: Final = 1.0
"""How long a worker may take to accept a queue pair before the producer uses the network."""
RETRY_LOCAL_S: Final = 1.0
"""After a worker refused a local producer (or was not running), how long its endpoint is
served over the network before the producer asks it again; doubled at each refusal in a row,
up to RETRY_LOCAL_MAX_S (a worker that will never take it: another user's, another network
namespace's)."""
RETRY_LOCAL_MAX_S: Final = 60.0

_names = itertools.count()
_READABLE: Final = select.POLLIN | select.POLLHUP | select.POLLERR


class LocalRpc(RpcClient):
    """Calls to one worker through a queue pair; see the module docstring."""

    def __init__(self, endpoint: str, connection: socket.socket, queues: QueuePair, *,
                 max_in_flight: int, on_broken: Callable[[], None] | None,
                 spin_check: MachineSpinCheck, on_too_large: Callable[[str], None]) -> None:
        self._connection = connection
        self._queues = queues
        self._bell = select.poll()
        self._bell.register(connection.fileno(), _READABLE)
        self._window = SpinWindow()
        self._spin_check = spin_check
        self._on_too_large = on_too_large
        self._waiting_since_s: float | None = None
        self._worker_gone = False
        self._corrupt: ZlogError | None = None  # the replies queue's framing is impossible
        self._init_calls(endpoint, max_in_flight, on_broken)
        self.connected = True

    # -- what the owner waits on ----------------------------------------------------------

    @property
    def sockets(self) -> tuple[zmq.Socket[bytes], ...]:
        return ()

    @property
    def raw_fds(self) -> tuple[int, ...]:
        """The doorbell connection: a bell, or the worker's end of file."""
        if self._closed or self.broken is not None:
            return ()
        return (self._connection.fileno(),)

    def has_news(self) -> bool:
        if self._ready:
            return True
        if self._closed or self.broken is not None:
            return False
        return not self._queues.replies.is_empty() or not self._take_bells()

    def ready_to_park(self) -> bool:
        """Spin for an answer within the window, then set the sleeping flag (module doc).

        The flag is set with nothing in flight too: a user thread may send meanwhile, and
        its answer must wake the sleeper."""
        if self._closed or self.broken is not None:
            return True
        replies = self._queues.replies
        self._window.allowed = self._spin_check.allowed()
        window_s = self._window.window_s() if self._pending else 0.0
        if window_s:
            spin_until = time.perf_counter() + window_s
            while time.perf_counter() < spin_until:
                if not replies.is_empty():
                    return False
        return replies.sleep_if_empty()

    def park_ms(self, wait_ms: int) -> int:
        """How long the owner may sleep: bounded while a request waits (a lost doorbell)."""
        return min(wait_ms, PARK_BACKSTOP_MS) if self._pending else wait_ms

    # -- the transport --------------------------------------------------------------------

    def _transmit(self, frames: list[Buffer]) -> bool:
        views = as_byte_views(frames)
        requests = self._queues.requests
        if not requests.fits(views):
            size = sum(view.nbytes for view in views)
            self._on_too_large(self.endpoint)
            error = ZlogError(
                ErrorCode.NETWORK_EXCEPTION,
                f"a request of {size} bytes is larger than the shared-memory queue to "
                f"{self.endpoint} holds ({requests.capacity} bytes): sent over the network "
                "from now on")
            self._break(error)
            raise error
        if not requests.put(views):
            return False
        if self._waiting_since_s is None:
            self._waiting_since_s = time.perf_counter()
        if requests.wake_needed() and not local_channel.ring(self._connection):
            self._take_link_events()
        return True

    def _receive(self, timeout_ms: int) -> bool:
        if self.broken is not None:
            return False
        if timeout_ms > 0 and self._queues.replies.is_empty() and self.ready_to_park():
            self._bell.poll(self.park_ms(timeout_ms))
        received = self._drain_socket()
        self._take_link_events()
        return received

    def _drain_socket(self) -> bool:
        replies = self._queues.replies
        replies.awake()
        received = False
        for _ in range(limits.DRAIN_MESSAGES_MAX):
            try:
                frames = replies.take()
            except ZlogError as error:
                if self._corrupt is None:  # _break drains once more: that drain stops here
                    self._corrupt = error
                    self._break(error)
                return received
            if frames is None:
                break
            received = True
            self._accept(frames)  # type: ignore[arg-type]
        if received and self._waiting_since_s is not None:
            self._window.note_wait(time.perf_counter() - self._waiting_since_s)
            self._waiting_since_s = time.perf_counter() if self._pending else None
        return received

    def _take_bells(self) -> bool:
        """Take the bells waiting (no system call that lets the GIL go: local_channel.ring);
        False once the worker's end closed, which is remembered."""
        if not self._worker_gone and not local_channel.drain(self._connection):
            self._worker_gone = True
        return not self._worker_gone

    def _take_link_events(self) -> None:
        """The worker's end of file: it died, or let this producer go."""
        if self.broken is not None or self._closed:
            return
        if not self._take_bells():
            self._break(ZlogError(ErrorCode.NETWORK_EXCEPTION,
                                  f"the worker at {self.endpoint} closed the shared-memory "
                                  "queue (it stopped, or died)"))

    def _close_sockets(self, linger_ms: int) -> None:
        del linger_ms  # nothing is queued outside shared memory
        local_channel.close(self._connection)
        self._queues.close()


class LocalChannels:
    """Opens a LocalRpc to a worker on this host when it takes one (the factory a
    Connections of a local producer asks first)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or queue_directory()
        self._network_until_s: dict[str, float] = {}
        self._refusals: dict[str, int] = {}  # in a row, per endpoint
        self._network_only: set[str] = set()
        self._spin_check = MachineSpinCheck()

    def may_return(self, endpoint: str, network: RpcClient) -> bool:
        """Whether a network connection to `endpoint`, made when its worker took no local
        producer, should give way to a new try (the worker restarted, the leader moved back)."""
        if isinstance(network, LocalRpc) or endpoint in self._network_only:
            return False
        if time.monotonic() < self._network_until_s.get(endpoint, 0.0):
            return False
        if not is_local_endpoint(endpoint):
            self._network_only.add(endpoint)
            return False
        return True

    def open(self, endpoint: str, *, max_in_flight: int,
             on_broken: Callable[[], None] | None) -> LocalRpc | None:
        """A LocalRpc to the worker at `endpoint`, or None to use the network."""
        if endpoint in self._network_only or not is_local_endpoint(endpoint):
            return None
        connection = local_channel.connect(endpoint)
        if connection is None:
            self._refused(endpoint)
            return None
        name = f"{QUEUE_NAME_PREFIX}{os.getpid()}-{next(_names)}-{os.urandom(4).hex()}"
        try:
            queues = QueuePair.create(self.directory, name)
        except OSError as error:
            log.warning("no shared-memory queue in %s (%s): producing to %s over the network",
                        self.directory, error, endpoint)
            local_channel.close(connection)
            self._network_only.add(endpoint)
            return None
        answer = _hello(connection, queues.path)
        if answer != local_channel.OK:
            log.info("the worker at %s took no local producer (%s): using the network",
                     endpoint, answer.decode(errors="replace") or "no answer")
            queues.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(queues.path)
            local_channel.close(connection)
            self._refused(endpoint)
            return None
        self._refusals.pop(endpoint, None)
        return LocalRpc(endpoint, connection, queues, max_in_flight=max_in_flight,
                        on_broken=on_broken, spin_check=self._spin_check,
                        on_too_large=self._network_only.add)


    def _refused(self, endpoint: str) -> None:
        refusals = self._refusals[endpoint] = self._refusals.get(endpoint, 0) + 1
        retry_s = min(RETRY_LOCAL_S * 2 ** (refusals - 1), RETRY_LOCAL_MAX_S)
        self._network_until_s[endpoint] = time.monotonic() + retry_s


def _hello(connection: socket.socket, path: Path) -> bytes:
    """Name the queue pair; the worker's answer (b"" when none came in time)."""
    try:
        connection.settimeout(HELLO_TIMEOUT_S)
        connection.send(local_channel.HELLO + str(path).encode())
        answer = connection.recv(local_channel.MESSAGE_BYTES_MAX)
    except OSError:
        return b""
    finally:
        connection.setblocking(False)
    return answer
