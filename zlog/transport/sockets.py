"""ZeroMQ sockets as zlog uses them: setup with every bound set, and frame moving without copies.

Servers bind ROUTER, clients connect DEALER (DESIGN.md section 3). This module only moves
frames; `codec.py` turns them into messages. Settings and why (the bounds themselves are in
`zlog/limits.py`):

* linger 0: closing a socket never blocks the process on unsent messages; an unanswered
  request is the client's timeout to handle, not a hang at shutdown.
* send/receive high-water marks: bound the messages queued per peer, so a slow or dead peer
  costs bounded memory.
* MAXMSGSIZE: bounds each received frame, so a peer cannot make us allocate more than one
  batch-sized frame (zmq drops the connection of a peer that sends more).
* ROUTER_MANDATORY: a reply to a peer that has gone away fails at once (EHOSTUNREACH) instead
  of vanishing silently; `send_routed` reports it as False and the server moves on.
* heartbeats on client connections: a server that stops answering without closing the
  connection (a host that died, a cut network) ends the connection within
  HEARTBEAT_TIMEOUT_MS, so the client's monitor sees it drop (`rpc.py`).
* CURVE, once the process turned security on (`curve.py`): every socket made here that binds
  is a CURVE server behind the ZAP handler, every one that connects a CURVE client. They are
  all made here, so none can be left in the clear.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import zmq

from zlog import limits
from zlog.errors import ZlogError
from zlog.transport.curve import secure_client, secure_server
from zlog.transport.wire import Buffer

RECONNECT_INTERVAL_MS: Final = 100
RECONNECT_INTERVAL_MS_MAX: Final = 2_000
PEER_RECONNECT_INTERVAL_MS: Final = 20  # Raft peers: an election must not wait on a reconnect
PEER_RECONNECT_INTERVAL_MS_MAX: Final = 200
HEARTBEAT_INTERVAL_MS: Final = 1_000  # a ZMTP PING when the connection has been quiet this long
HEARTBEAT_TIMEOUT_MS: Final = 3_000  # no traffic at all for this long: the connection is dead

Frames = Sequence[Buffer | zmq.Frame]

# Plain ints: pyzmq's flag constants are enums, and combining them costs more than the send.
_NOBLOCK: Final = int(zmq.NOBLOCK)
_SNDMORE: Final = int(zmq.SNDMORE)
_EVENTS: Final = int(zmq.EVENTS)
_SEND: Final = zmq.backend.Socket.send
"""pyzmq's own send, without the wrapper `zmq.Socket.send` adds for the draft socket types'
routing ids and groups (unused here): a third of a small reply's sending cost."""
_POLLIN: Final = int(zmq.POLLIN)


def shared_context() -> zmq.Context[zmq.Socket[bytes]]:
    """The process-wide context: one I/O thread pool per process is what zmq recommends."""
    return zmq.Context.instance()


def _apply_common(sock: zmq.Socket[bytes], frame_bytes_max: int, hwm_messages: int) -> None:
    assert frame_bytes_max > 0 and hwm_messages > 0
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, hwm_messages)
    sock.setsockopt(zmq.RCVHWM, hwm_messages)
    sock.setsockopt(zmq.MAXMSGSIZE, frame_bytes_max)


def _bind_server(sock: zmq.Socket[bytes], endpoint: str) -> str:
    """Bind as a server (CURVE when security is on); the endpoint really bound. The socket is
    closed when it cannot bind."""
    try:
        secure_server(sock)
        sock.bind(endpoint)
    except (zmq.ZMQError, ZlogError):
        sock.close(linger=0)
        raise
    bound = sock.getsockopt(zmq.LAST_ENDPOINT)
    assert isinstance(bound, bytes)
    return bound.decode("ascii")


def new_dealer(
    *,
    context: zmq.Context[zmq.Socket[bytes]] | None = None,
    frame_bytes_max: int = limits.CLIENT_FRAME_BYTES_MAX,
    hwm_messages: int = limits.CLIENT_HWM_MESSAGES,
) -> zmq.Socket[bytes]:
    """A configured DEALER, not connected yet (attach a monitor first to see every event)."""
    sock = (context or shared_context()).socket(zmq.DEALER)
    secure_client(sock)
    _apply_common(sock, frame_bytes_max, hwm_messages)
    sock.setsockopt(zmq.RECONNECT_IVL, RECONNECT_INTERVAL_MS)
    sock.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_INTERVAL_MS_MAX)
    sock.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_INTERVAL_MS)
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
    return sock


def make_router(
    endpoint: str,
    *,
    context: zmq.Context[zmq.Socket[bytes]] | None = None,
    frame_bytes_max: int = limits.SERVER_FRAME_BYTES_MAX,
    hwm_messages: int = limits.SERVER_HWM_MESSAGES,
) -> tuple[zmq.Socket[bytes], str]:
    """A ROUTER bound to `endpoint` and the endpoint it really bound (resolves port `*`/0)."""
    if endpoint.startswith("tcp://") and endpoint.endswith(":0"):
        endpoint = endpoint[:-2] + ":*"
    sock = (context or shared_context()).socket(zmq.ROUTER)
    _apply_common(sock, frame_bytes_max, hwm_messages)
    sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
    return sock, _bind_server(sock, endpoint)


def make_channel_router(
    endpoint: str, *, context: zmq.Context[zmq.Socket[bytes]], frame_bytes_max: int
) -> tuple[zmq.Socket[bytes], str]:
    """The supervisor's end of the channel to its workers, bound; (socket, bound endpoint).

    A restarted worker reconnects with its old identity and takes it over (ROUTER_HANDOVER);
    a message to a worker that is not connected fails at once (ROUTER_MANDATORY), so the
    supervisor knows to send it again once the worker says hello.
    """
    sock = context.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
    sock.setsockopt(zmq.ROUTER_HANDOVER, 1)
    sock.setsockopt(zmq.MAXMSGSIZE, frame_bytes_max)
    return sock, _bind_server(sock, endpoint)


def make_channel_dealer(
    endpoint: str,
    identity: bytes,
    *,
    context: zmq.Context[zmq.Socket[bytes]],
    frame_bytes_max: int,
    hwm_messages: int,
) -> zmq.Socket[bytes]:
    """A worker's end of the channel to its supervisor, connected under `identity`."""
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, identity)
    secure_client(sock)
    _apply_common(sock, frame_bytes_max, hwm_messages)
    sock.setsockopt(zmq.RECONNECT_IVL, RECONNECT_INTERVAL_MS)
    sock.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_INTERVAL_MS_MAX)
    sock.connect(endpoint)
    return sock


def make_peer_router(endpoint: str, *, context: zmq.Context[Any]) -> zmq.Socket[bytes]:
    """A Raft node's ROUTER for its peers' messages, bound. No receive bound: a node reads
    every turn, and a dropped Raft message only costs a retry."""
    sock: zmq.Socket[bytes] = context.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVHWM, 0)
    _bind_server(sock, endpoint)
    return sock


def make_peer_dealer(
    endpoint: str, identity: bytes, *, context: zmq.Context[Any], hwm_messages: int,
    before_connect: Callable[[zmq.Socket[bytes]], None] | None = None,
) -> zmq.Socket[bytes]:
    """A Raft node's DEALER to one peer. ZMQ_IMMEDIATE: nothing queues for a peer that is down
    (Raft resends its state anyway), and reconnects are quick, so an election is not slowed."""
    sock: zmq.Socket[bytes] = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, identity)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.IMMEDIATE, 1)
    secure_client(sock)
    sock.setsockopt(zmq.SNDHWM, hwm_messages)
    sock.setsockopt(zmq.RECONNECT_IVL, PEER_RECONNECT_INTERVAL_MS)
    sock.setsockopt(zmq.RECONNECT_IVL_MAX, PEER_RECONNECT_INTERVAL_MS_MAX)
    if before_connect is not None:  # a monitor, say, which must not miss the first events
        before_connect(sock)
    sock.connect(endpoint)
    return sock


def _send_parts(sock: zmq.Socket[bytes], frames: Frames, flags: int) -> None:
    """What `send_multipart(copy=False)` does, minus its per-call checks and enum arithmetic.

    zmq delivers a multipart message whole or not at all: only the first part can meet a full
    queue (EAGAIN) or an unroutable peer, and then nothing was sent.
    """
    last = len(frames) - 1
    for index in range(last):
        _SEND(sock, frames[index], flags | _SNDMORE, copy=False)
    _SEND(sock, frames[last], flags, copy=False)


def send_frames(sock: zmq.Socket[bytes], frames: Frames, *, block: bool = True) -> bool:
    """Send one multipart message without copying buffers; False if it would block."""
    assert frames, "a message has at least one frame"
    try:
        _send_parts(sock, frames, 0 if block else _NOBLOCK)
    except zmq.Again:
        return False
    return True


def recv_frames(sock: zmq.Socket[bytes], *, block: bool = True) -> list[zmq.Frame] | None:
    """One multipart message as zmq.Frames (their `.buffer` is a view, not a copy).

    Each frame says whether more follow (`Frame.more`), which saves the RCVMORE query per part
    that `recv_multipart` makes.
    """
    flags = 0 if block else _NOBLOCK
    try:
        frame = sock.recv(flags, copy=False)
    except zmq.Again:
        return None
    frames = [frame]
    while frame.more:  # the rest of a multipart message has arrived with its first part
        frame = sock.recv(flags, copy=False)
        frames.append(frame)
    return frames


def has_message(sock: zmq.Socket[bytes]) -> bool:
    """Whether a message is waiting (ZMQ_EVENTS), without trying to receive one.

    Draining loops ask this after each message: it is about a third of the cost of a receive
    that fails with EAGAIN, which raises and builds a Python exception.
    """
    events = sock.get(_EVENTS)
    assert isinstance(events, int)
    return bool(events & _POLLIN)


def send_routed(sock: zmq.Socket[bytes], identity: bytes, frames: Frames) -> bool:
    """Reply through a ROUTER; False (never an exception) when the peer is gone or backed up.

    A server must keep serving others when one client vanishes or stops reading; that client
    sees a timeout and retries, as it would after a lost network packet.
    """
    assert frames, "a reply has at least its header frame"
    try:
        _SEND(sock, identity, _NOBLOCK | _SNDMORE)  # a few bytes: a copy is the cheaper send
        _send_parts(sock, frames, _NOBLOCK)
    except zmq.Again:
        return False
    except zmq.ZMQError as error:
        if error.errno == zmq.EHOSTUNREACH:
            return False
        raise
    return True


def recv_routed(
    sock: zmq.Socket[bytes], *, block: bool = True
) -> tuple[bytes, list[zmq.Frame]] | None:
    """(peer identity, the frames after it) from a ROUTER, or None if nothing is waiting."""
    frames = recv_frames(sock, block=block)
    if frames is None:
        return None
    assert frames, "a ROUTER always prefixes the peer identity"
    return frames[0].bytes, frames[1:]


def sync_polled(poller: zmq.Poller, polled: set[zmq.Socket[bytes]],
                wanted: Iterable[zmq.Socket[bytes]]) -> set[zmq.Socket[bytes]]:
    """Make `poller` watch `wanted` instead of `polled` (sockets that come and go, such as a
    connection that follows a moving leader); returns the new polled set."""
    current = set(wanted)
    for sock in polled - current:
        poller.unregister(sock)
    for sock in current - polled:
        poller.register(sock, zmq.POLLIN)
    return current
