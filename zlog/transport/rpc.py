"""Client calls over one DEALER: correlation ids, a bounded in-flight map, deadlines in ms.

Many requests may be in flight on one connection, and responses may come back in any order
(docs/protocol.md, "Sockets and routing"), so each request gets a correlation id and waits in
a map bounded by `max_in_flight`. Two ways to use it:

* `call(msg, timeout_ms)`: send and wait for that one response (admin and metadata calls).
* `send(msg, timeout_ms)` then `poll_responses(timeout_ms)`: pipelining, as the producer and
  consumer do; each polled `RpcResult` names the request it answers.

A request with no answer by its deadline comes back as ZlogError(REQUEST_TIMED_OUT); a late
answer to it is dropped and counted. A reply whose header says the whole request failed comes
back as the ZlogError for its code.

The connection is watched (a ZeroMQ socket monitor, plus heartbeats that end a connection to a
peer gone silent): when it drops, or a connection attempt fails (refused, unreachable), every
request waiting on it fails at once with NETWORK_EXCEPTION (retriable) instead of waiting out
its deadline, and the client is *broken*: its socket is closed, so nothing it queued can reach
the server later and be applied twice after the caller's retry. The owner (`client.cluster.
Connections`) replaces a broken client with a fresh one, which connects at once; that is how a
client follows a broker that restarted within a moment of it being back.

Thread safety: none. A zmq socket belongs to one thread, and so does an RpcClient: use one per
thread (the producer's I/O thread owns its own).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import zmq

from zlog import limits
from zlog.clock import monotonic_ms
from zlog.errors import ErrorCode, ZlogError, for_code
from zlog.transport.codec import (
    HeaderError,
    decode_response,
    decode_response_header,
    encode_request,
    expects_response,
)
from zlog.transport.curve import HANDSHAKE_REFUSED_EVENTS, handshake_refused
from zlog.transport.messages import (
    ErrorBody,
    Request,
    Response,
)
from zlog.transport.messages.data import FetchResponseV2
from zlog.transport.sockets import (
    has_message,
    new_dealer,
    recv_frames,
    send_frames,
)
from zlog.transport.wire import INT32_MAX, Buffer

IN_FLIGHT_DEFAULT: Final = 64
TIMEOUT_MS_DEFAULT: Final = 30_000
CANCEL_CHECK_MS: Final = 50  # a cancellable call looks at its predicate this often
# Connection events that change what a waiting request can expect.
# "Up" means the ZMTP handshake finished: a peer that accepts TCP but never speaks ZeroMQ
# is not a connection.
_LINK_EVENTS: Final = int(
    zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED | zmq.EVENT_CONNECT_RETRIED
) | HANDSHAKE_REFUSED_EVENTS


@dataclass(frozen=True, slots=True)
class RpcResult:
    """The outcome of one sent request: exactly one of `response` and `error` is set."""

    correlation_id: int
    request: Request
    response: Response | None
    error: ZlogError | None

    def unwrap(self) -> Response:
        """The response, or raise the error."""
        if self.error is not None:
            raise self.error
        assert self.response is not None
        return self.response


@dataclass(slots=True)
class _Pending:
    request: Request
    deadline_ms: int
    timeout_ms: int  # a subscription's deadline moves this far past each of its answers


class RpcClient:
    """A DEALER to one endpoint with pipelined, correlated, deadline-bound requests."""

    def __init__(
        self,
        endpoint: str,
        *,
        max_in_flight: int = IN_FLIGHT_DEFAULT,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
        frame_bytes_max: int = limits.CLIENT_FRAME_BYTES_MAX,
        on_broken: Callable[[], None] | None = None,
    ) -> None:
        self._socket = new_dealer(context=context, frame_bytes_max=frame_bytes_max)
        # The monitor is attached before connecting, so no connection event can be missed.
        self._monitor: zmq.Socket[bytes] = self._socket.get_monitor_socket(_LINK_EVENTS)
        try:
            self._socket.connect(endpoint)
        except zmq.ZMQError:
            self._close_sockets(0)
            raise
        self._init_calls(endpoint, max_in_flight, on_broken)

    def _init_calls(self, endpoint: str, max_in_flight: int,
                    on_broken: Callable[[], None] | None) -> None:
        """The state of the calls, whatever carries them (a subclass may carry them by other
        means than a DEALER: zlog/client/local_produce.py)."""
        assert 1 <= max_in_flight <= limits.IN_FLIGHT_REQUESTS_MAX, max_in_flight
        self.endpoint = endpoint
        self.max_in_flight = max_in_flight
        self._on_broken = on_broken  # the owner's hook: this client's sockets are gone
        self._pending: dict[int, _Pending] = {}
        self._ready: deque[RpcResult] = deque()
        self._next_correlation_id = 1
        self._closed = False
        self.connected = False  # a connection is up (it may drop at any moment)
        self.broken: ZlogError | None = None  # why the connection failed; then no more sends
        self.late_responses_count = 0  # answers to requests that had already timed out
        self.malformed_responses_count = 0  # messages without a usable header

    # -- public ---------------------------------------------------------------------------

    @property
    def sockets(self) -> tuple[zmq.Socket[bytes], ...]:
        """What to wait on (with a zmq.Poller or their ZMQ_FDs) before `poll_responses`: the
        DEALER and its connection monitor; nothing once broken (the results are ready)."""
        if self._closed or self.broken is not None:
            return ()
        return (self._socket, self._monitor)

    def has_news(self) -> bool:
        """Whether `poll_responses(0)` has something to give: an answer, a connection event or
        results already waiting (ZMQ_EVENTS reads, no receive attempt)."""
        if self._ready:
            return True
        if self._closed or self.broken is not None:
            return False
        return has_message(self._socket) or has_message(self._monitor)

    @property
    def has_results(self) -> bool:
        """Results wait to be taken (a broken client keeps its failures until then)."""
        return bool(self._ready)

    @property
    def in_flight(self) -> int:
        """Requests sent whose answer has not arrived yet."""
        return len(self._pending)

    @property
    def has_capacity(self) -> bool:
        return len(self._pending) < self.max_in_flight

    def send(self, msg: Request, timeout_ms: int = TIMEOUT_MS_DEFAULT) -> int:
        """Send `msg` and return its correlation id without waiting for the answer.

        When `max_in_flight` requests are already waiting, first waits (up to `timeout_ms`)
        for answers to free a slot, then raises REQUEST_TIMED_OUT. Requests that expect no
        answer (acks=0 produce) take no slot and never show up in `poll_responses`.
        """
        assert not self._closed, "send on a closed RpcClient"
        assert timeout_ms >= 0
        self._take_link_events()
        if self.broken is not None:
            raise ZlogError(self.broken.code, self.broken.message)
        deadline_ms = monotonic_ms() + timeout_ms
        while len(self._pending) >= self.max_in_flight:
            now_ms = monotonic_ms()
            self._expire(now_ms)  # a request past its deadline frees its slot
            if len(self._pending) < self.max_in_flight:
                break
            if now_ms >= deadline_ms:
                raise ZlogError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"{self.max_in_flight} requests to {self.endpoint} are still unanswered",
                )
            self._receive(min(deadline_ms - now_ms, self._ms_to_next_deadline()))
            if self.broken is not None:
                raise ZlogError(self.broken.code, self.broken.message)
        correlation_id = self._take_correlation_id()
        frames = encode_request(correlation_id, msg)
        if not self._transmit(frames):
            raise ZlogError(
                ErrorCode.NETWORK_EXCEPTION, f"the send queue to {self.endpoint} is full"
            )
        if expects_response(msg):
            self._pending[correlation_id] = _Pending(msg, deadline_ms, timeout_ms)
        assert len(self._pending) <= self.max_in_flight
        return correlation_id

    @property
    def raw_fds(self) -> tuple[int, ...]:
        """Plain file descriptors to wait on beside `sockets` (a DEALER has none)."""
        return ()

    def ready_to_park(self) -> bool:
        """Called right before its owner sleeps on `sockets` and `raw_fds`: False when an
        answer came meanwhile and the sleep should be skipped (a DEALER has nothing to do)."""
        return True

    def park_ms(self, wait_ms: int) -> int:
        """How long its owner may then sleep at most (a DEALER's sockets always signal)."""
        return wait_ms

    def poll_responses(self, timeout_ms: int) -> list[RpcResult]:
        """Every result ready now, waiting up to `timeout_ms` for the first one.

        Results include timeouts: a pending request past its deadline is answered here with
        REQUEST_TIMED_OUT, so the caller never has to track deadlines itself.
        """
        assert not self._closed, "poll on a closed RpcClient"
        if not self._ready:
            self._receive(0)
        if not self._ready and timeout_ms > 0 and self.broken is None:
            self._receive(min(timeout_ms, self._ms_to_next_deadline()))
        self._expire(monotonic_ms())
        results = list(self._ready)
        self._ready.clear()
        return results

    def expire_due(self) -> list[RpcResult]:
        """The results ready without reading the socket: requests past their deadline.

        For a caller that polls the socket itself and saw nothing arrive on it: it still has
        to learn about timeouts, but a receive attempt on an empty socket would be wasted.
        """
        assert not self._closed, "poll on a closed RpcClient"
        self._take_link_events()
        if self._pending:
            self._expire(monotonic_ms())
        if not self._ready:
            return []
        results = list(self._ready)
        self._ready.clear()
        return results

    def call(
        self,
        msg: Request,
        timeout_ms: int = TIMEOUT_MS_DEFAULT,
        *,
        connect_timeout_ms: int | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> Response:
        """Send `msg` and wait for its response; raises ZlogError for any failure.

        `connect_timeout_ms`: give up (NETWORK_EXCEPTION, client broken) when no connection
        is up by then, so a caller with other endpoints to try does not spend its whole
        timeout on a host that never answers. `cancelled`: checked every CANCEL_CHECK_MS;
        when it turns true the call ends with NETWORK_EXCEPTION (the owner is closing).
        """
        assert expects_response(msg), "acks=0 requests have no response to wait for"
        started_ms = monotonic_ms()
        correlation_id = self.send(msg, timeout_ms)
        while True:
            for index, result in enumerate(self._ready):
                if result.correlation_id == correlation_id:
                    del self._ready[index]
                    return result.unwrap()
            pending = self._pending.get(correlation_id)
            assert pending is not None, "an unanswered request stays pending"
            now_ms = monotonic_ms()
            remaining_ms = pending.deadline_ms - now_ms
            if remaining_ms <= 0:
                self._expire(now_ms)
                continue
            if cancelled is not None:
                if cancelled():
                    self._break(ZlogError(ErrorCode.NETWORK_EXCEPTION,
                                          f"the call to {self.endpoint} was cancelled"))
                    continue
                remaining_ms = min(remaining_ms, CANCEL_CHECK_MS)
            if connect_timeout_ms is not None and not self.connected:
                connect_left_ms = started_ms + connect_timeout_ms - now_ms
                if connect_left_ms <= 0:
                    self._break(ZlogError(
                        ErrorCode.NETWORK_EXCEPTION,
                        f"no connection to {self.endpoint} within {connect_timeout_ms} ms"))
                    continue
                remaining_ms = min(remaining_ms, connect_left_ms)
            self._receive(remaining_ms)

    def close(self, linger_ms: int = 0) -> None:
        """Close the socket; unanswered requests are abandoned.

        Messages still queued to go out are dropped at once unless `linger_ms` gives them that
        long: an acks=0 producer, whose sends are done when queued, lingers so that closing it
        right after a flush does not throw its last records away.
        """
        if not self._closed:
            self._closed = True
            if self.broken is None:
                self._close_sockets(linger_ms)

    def __enter__(self) -> RpcClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------

    def _transmit(self, frames: list[Buffer]) -> bool:
        """Hand a request's frames to the transport; False when its queue is full."""
        return send_frames(self._socket, frames, block=False)

    def _take_correlation_id(self) -> int:
        # Ids wrap within int32; at most max_in_flight are taken, so a free one is near.
        for _ in range(limits.IN_FLIGHT_REQUESTS_MAX + 1):
            candidate = self._next_correlation_id
            self._next_correlation_id = 1 if candidate >= INT32_MAX else candidate + 1
            if candidate not in self._pending:
                return candidate
        raise AssertionError("no free correlation id among a bounded in-flight map")

    def _ms_to_next_deadline(self) -> int:
        if not self._pending:
            return INT32_MAX
        nearest_ms = min(p.deadline_ms for p in self._pending.values())
        return max(0, nearest_ms - monotonic_ms())

    def _expire(self, now_ms: int) -> None:
        expired = [cid for cid, p in self._pending.items() if p.deadline_ms <= now_ms]
        for correlation_id in expired:
            pending = self._pending.pop(correlation_id)
            error = ZlogError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"no answer from {self.endpoint} to {type(pending.request).__name__} "
                f"(correlation id {correlation_id}) within its deadline",
            )
            self._ready.append(RpcResult(correlation_id, pending.request, None, error))

    def _receive(self, timeout_ms: int) -> bool:
        """Wait up to `timeout_ms` for messages or a connection event, then take all that are
        waiting (bounded)."""
        if self.broken is not None:
            return False
        if timeout_ms > 0 and not (has_message(self._socket) or has_message(self._monitor)):
            zmq.select([self._socket, self._monitor], [], [], timeout_ms / 1000)
        received = self._drain_socket()
        self._take_link_events()
        return received

    def _drain_socket(self) -> bool:
        """Take the answers waiting (bounded). ZMQ_EVENTS is asked first: a receive that finds
        nothing raises, and building that exception costs several times the question."""
        received = False
        if not has_message(self._socket):
            return received
        for _ in range(limits.DRAIN_MESSAGES_MAX):
            frames = recv_frames(self._socket, block=False)
            if frames is None:
                break
            received = True
            self._accept(frames)
            if not has_message(self._socket):
                break
        return received

    def _take_link_events(self) -> None:
        """Apply what the monitor reported: up, or broken (dropped, or a failed attempt)."""
        while self.broken is None and not self._closed and has_message(self._monitor):
            frames = self._monitor.recv_multipart(zmq.NOBLOCK)
            event = int.from_bytes(frames[0][:2], "little") if frames and frames[0] else 0
            value = int.from_bytes(frames[0][2:6], "little") if frames and frames[0] else 0
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.connected = True
            elif event == zmq.EVENT_DISCONNECTED:
                self._break(ZlogError(ErrorCode.NETWORK_EXCEPTION,
                                      f"the connection to {self.endpoint} was lost"))
            elif event == zmq.EVENT_CONNECT_RETRIED:
                self._break(ZlogError(
                    ErrorCode.NETWORK_EXCEPTION,
                    f"cannot connect to {self.endpoint} (refused, unreachable or not resolved)"))
            elif event & HANDSHAKE_REFUSED_EVENTS and handshake_refused(event, value):
                self._break(ZlogError(
                    ErrorCode.SASL_AUTHENTICATION_FAILED,
                    f"{self.endpoint} refused this client: its key is not one the broker "
                    "lets in, or security is on at one end only (--key-file, docs/security.md)"))
            elif event & HANDSHAKE_REFUSED_EVENTS:
                self._break(ZlogError(
                    ErrorCode.NETWORK_EXCEPTION,
                    f"the connection to {self.endpoint} failed in its handshake (what listens "
                    "there is not the zlog endpoint it was)"))

    def _break(self, error: ZlogError) -> None:
        """The connection failed: answers already here are taken, every other waiting request
        fails with `error`, and the sockets close so nothing queued is delivered later."""
        if self.broken is not None or self._closed:
            return
        self._drain_socket()
        self.broken = error
        self.connected = False
        for correlation_id, pending in self._pending.items():
            self._ready.append(RpcResult(correlation_id, pending.request, None,
                                         ZlogError(error.code, error.message)))
        self._pending.clear()
        self._close_sockets(0)
        if self._on_broken is not None:
            self._on_broken()

    def _close_sockets(self, linger_ms: int) -> None:
        with contextlib.suppress(zmq.ZMQError):
            self._socket.disable_monitor()
        self._monitor.close(linger=0)
        self._socket.close(linger=linger_ms)

    def _accept(self, frames: list[zmq.Frame]) -> None:
        try:
            header, body = decode_response(frames)
        except HeaderError:
            self.malformed_responses_count += 1
            return
        except ZlogError as error:
            # The header decoded, so the body's failure belongs to that request.
            self._resolve(decode_response_header(frames).correlation_id, None, error)
            return
        if isinstance(body, ErrorBody):
            self._resolve(header.correlation_id, None, for_code(body.error_code, body.message))
        else:
            self._resolve(header.correlation_id, body, None)

    def forget(self, correlation_id: int) -> None:
        """Stop waiting for a request's answers (a subscription its caller cancelled): any
        that still come are dropped as late."""
        self._pending.pop(correlation_id, None)

    def _resolve(self, correlation_id: int, response: Response | None,
                 error: ZlogError | None) -> None:
        if isinstance(response, FetchResponseV2) and response.more:
            # One answer of a subscription: it stays in flight, its deadline renewed.
            waiting = self._pending.get(correlation_id)
            if waiting is None:
                self.late_responses_count += 1
                return
            waiting.deadline_ms = monotonic_ms() + waiting.timeout_ms
            self._ready.append(RpcResult(correlation_id, waiting.request, response, None))
            return
        pending = self._pending.pop(correlation_id, None)
        if pending is None:
            self.late_responses_count += 1
            return
        self._ready.append(RpcResult(correlation_id, pending.request, response, error))
