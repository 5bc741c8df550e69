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

Thread safety: none. A zmq socket belongs to one thread, and so does an RpcClient: use one per
thread (the producer's I/O thread owns its own).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Final

import zmq

from zlog.errors import ErrorCode, ZlogError, for_code
from zlog.transport.codec import (
    HeaderError,
    decode_response,
    decode_response_header,
    encode_request,
    expects_response,
)
from zlog.transport.messages import ErrorBody, Request, Response
from zlog.transport.sockets import (
    CLIENT_FRAME_BYTES_MAX,
    DRAIN_MESSAGES_MAX,
    has_message,
    make_dealer,
    recv_frames,
    send_frames,
)
from zlog.transport.wire import INT32_MAX

IN_FLIGHT_DEFAULT: Final = 64
IN_FLIGHT_MAX: Final = 4_096
TIMEOUT_MS_DEFAULT: Final = 30_000


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


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


class RpcClient:
    """A DEALER to one endpoint with pipelined, correlated, deadline-bound requests."""

    def __init__(
        self,
        endpoint: str,
        *,
        max_in_flight: int = IN_FLIGHT_DEFAULT,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
        frame_bytes_max: int = CLIENT_FRAME_BYTES_MAX,
    ) -> None:
        assert 1 <= max_in_flight <= IN_FLIGHT_MAX, max_in_flight
        self.endpoint = endpoint
        self.max_in_flight = max_in_flight
        self._socket = make_dealer(endpoint, context=context, frame_bytes_max=frame_bytes_max)
        self._pending: dict[int, _Pending] = {}
        self._ready: deque[RpcResult] = deque()
        self._next_correlation_id = 1
        self._closed = False
        self.late_responses_count = 0  # answers to requests that had already timed out
        self.malformed_responses_count = 0  # messages without a usable header

    # -- public ---------------------------------------------------------------------------

    @property
    def socket(self) -> zmq.Socket[bytes]:
        """The DEALER, for registering with a zmq.Poller only: read through poll_responses."""
        return self._socket

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
        deadline_ms = _now_ms() + timeout_ms
        while len(self._pending) >= self.max_in_flight:
            now_ms = _now_ms()
            self._expire(now_ms)  # a request past its deadline frees its slot
            if len(self._pending) < self.max_in_flight:
                break
            if now_ms >= deadline_ms:
                raise ZlogError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"{self.max_in_flight} requests to {self.endpoint} are still unanswered",
                )
            self._receive(min(deadline_ms - now_ms, self._ms_to_next_deadline()))
        correlation_id = self._take_correlation_id()
        frames = encode_request(correlation_id, msg)
        if not send_frames(self._socket, frames, block=False):
            raise ZlogError(
                ErrorCode.NETWORK_EXCEPTION, f"the send queue to {self.endpoint} is full"
            )
        if expects_response(msg):
            self._pending[correlation_id] = _Pending(msg, deadline_ms)
        assert len(self._pending) <= self.max_in_flight
        return correlation_id

    def poll_responses(self, timeout_ms: int) -> list[RpcResult]:
        """Every result ready now, waiting up to `timeout_ms` for the first one.

        Results include timeouts: a pending request past its deadline is answered here with
        REQUEST_TIMED_OUT, so the caller never has to track deadlines itself.
        """
        assert not self._closed, "poll on a closed RpcClient"
        if not self._ready:
            self._receive(0)
        if not self._ready and timeout_ms > 0:
            self._receive(min(timeout_ms, self._ms_to_next_deadline()))
        self._expire(_now_ms())
        results = list(self._ready)
        self._ready.clear()
        return results

    def expire_due(self) -> list[RpcResult]:
        """The results ready without reading the socket: requests past their deadline.

        For a caller that polls the socket itself and saw nothing arrive on it: it still has
        to learn about timeouts, but a receive attempt on an empty socket would be wasted.
        """
        assert not self._closed, "poll on a closed RpcClient"
        if self._pending:
            self._expire(_now_ms())
        if not self._ready:
            return []
        results = list(self._ready)
        self._ready.clear()
        return results

    def call(self, msg: Request, timeout_ms: int = TIMEOUT_MS_DEFAULT) -> Response:
        """Send `msg` and wait for its response; raises ZlogError for any failure."""
        assert expects_response(msg), "acks=0 requests have no response to wait for"
        correlation_id = self.send(msg, timeout_ms)
        while True:
            for index, result in enumerate(self._ready):
                if result.correlation_id == correlation_id:
                    del self._ready[index]
                    return result.unwrap()
            pending = self._pending.get(correlation_id)
            assert pending is not None, "an unanswered request stays pending"
            remaining_ms = pending.deadline_ms - _now_ms()
            if remaining_ms <= 0:
                self._expire(_now_ms())
                continue
            self._receive(remaining_ms)

    def close(self, linger_ms: int = 0) -> None:
        """Close the socket; unanswered requests are abandoned.

        Messages still queued to go out are dropped at once unless `linger_ms` gives them that
        long: an acks=0 producer, whose sends are done when queued, lingers so that closing it
        right after a flush does not throw its last records away.
        """
        if not self._closed:
            self._closed = True
            self._socket.close(linger=linger_ms)

    def __enter__(self) -> RpcClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------

    def _take_correlation_id(self) -> int:
        # Ids wrap within int32; at most max_in_flight are taken, so a free one is near.
        for _ in range(IN_FLIGHT_MAX + 1):
            candidate = self._next_correlation_id
            self._next_correlation_id = 1 if candidate >= INT32_MAX else candidate + 1
            if candidate not in self._pending:
                return candidate
        raise AssertionError("no free correlation id among a bounded in-flight map")

    def _ms_to_next_deadline(self) -> int:
        if not self._pending:
            return INT32_MAX
        nearest_ms = min(p.deadline_ms for p in self._pending.values())
        return max(0, nearest_ms - _now_ms())

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
        """Wait up to `timeout_ms` for messages, then take all that are waiting (bounded)."""
        if timeout_ms > 0 and not self._socket.poll(timeout_ms, zmq.POLLIN):
            return False
        received = False
        for _ in range(DRAIN_MESSAGES_MAX):
            frames = recv_frames(self._socket, block=False)
            if frames is None:
                break
            received = True
            self._accept(frames)
            if not has_message(self._socket):
                break
        return received

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

    def _resolve(self, correlation_id: int, response: Response | None,
                 error: ZlogError | None) -> None:
        pending = self._pending.pop(correlation_id, None)
        if pending is None:
            self.late_responses_count += 1
            return
        self._ready.append(RpcResult(correlation_id, pending.request, response, error))
