"""The one server request path: frames in, replies out, every failure a Kafka-coded reply.

Both kinds of server (a supervisor's control endpoint, a worker's data endpoint) receive a
request the same way and must answer every way it can go wrong the same way, so that path is
written once, here:

* a message too short to hold a header has no correlation id, so nobody can be answered: it is
  dropped and counted;
* a header with a body that does not decode is answered with the decoder's code;
* an api key this endpoint does not serve is answered UNSUPPORTED_VERSION, saying where it is
  served;
* the service's own `ZlogError` is answered with its code and sentence;
* any other exception is a bug: it is logged with its traceback, counted, and answered
  UNKNOWN_SERVER_ERROR, and the server keeps serving. A failed assertion is a broken invariant
  of zlog itself: a worker lets it crash the process (docs/reliability.md §2.1: the supervisor
  restarts it and the ring gives back every acknowledged batch), a supervisor answers it like
  a bug.

Requests that expect no response (produce with acks=0) are never answered, errors included.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.codec import (
    Frame,
    HeaderError,
    RequestBodyError,
    RequestHeader,
    decode_request,
    encode_error_response,
    expects_response,
)
from zlog.transport.messages import Request
from zlog.transport.wire import Buffer

Reply = tuple[bytes, list[Buffer]]
"""(peer identity, frames): one message for a ROUTER to send."""
Dispatch = Callable[[bytes, RequestHeader, Request], list[Reply]]
"""A service: (peer identity, header, request) -> the replies it causes now (maybe none)."""


class RequestObserver(Protocol):
    """The metrics' hook (zlog/broker/worker_metrics.py): told of each request that had a
    header, with the time spent on it by its own clock (this module reads none)."""

    def clock_ns(self) -> int: ...

    def request(self, api_key: int, error: bool, elapsed_ns: int) -> None:
        """`error`: answered with an error, whole or for some partition."""


@dataclass(slots=True)
class ServerStats:
    """Counts of what a server's request path saw, and who is told of each request (the
    metrics, when the broker serves them)."""

    requests: int = 0
    dropped_messages: int = 0  # too short to hold a header: nobody to answer
    request_errors: int = 0  # answered with a whole-request error
    internal_errors: int = 0  # bugs: logged with a traceback
    entry_errors: int = 0  # answered, with an error code for some of its partitions
    observe: RequestObserver | None = None

    @property
    def errors(self) -> int:
        """Requests answered with any error: whole, or for a partition (as Kafka's
        ErrorsPerSec counts them)."""
        return self.request_errors + self.internal_errors + self.entry_errors


@dataclass(frozen=True, slots=True)
class RequestPath:
    """How one server turns frames into a call of its service."""

    apis: Collection[int]  # the api keys this endpoint serves
    served_elsewhere: str  # "the control endpoint, not a worker": where the others are
    internal_error_message: str  # what a client hears about a bug here
    log: logging.Logger
    crash_on_assertion: bool  # a worker crashes on a broken invariant; a supervisor answers

    def serve(
        self, identity: bytes, frames: Sequence[Frame], dispatch: Dispatch, stats: ServerStats
    ) -> list[Reply]:
        """Decode one request and run it; never raises but for a worker's failed assertion."""
        observer = stats.observe
        if observer is None:
            return self._serve(identity, frames, dispatch, stats)[1]
        started_ns = observer.clock_ns()
        errors_before = stats.errors
        api_key, replies = self._serve(identity, frames, dispatch, stats)
        if api_key is not None:
            observer.request(api_key, stats.errors > errors_before,
                             observer.clock_ns() - started_ns)
        return replies

    def _serve(
        self, identity: bytes, frames: Sequence[Frame], dispatch: Dispatch, stats: ServerStats
    ) -> tuple[int | None, list[Reply]]:
        """(the request's api key, None when it had no header; its replies)."""
        stats.requests += 1
        try:
            header, request = decode_request(frames)
        except HeaderError:
            stats.dropped_messages += 1
            return None, []
        except RequestBodyError as error:
            stats.request_errors += 1
            return error.header.api_key, [
                (identity, encode_error_response(error.header, error.code, error.message))]
        if header.api_key not in self.apis:
            stats.request_errors += 1
            message = f"api key {header.api_key} is served by {self.served_elsewhere}"
            return header.api_key, [(identity, encode_error_response(
                header, ErrorCode.UNSUPPORTED_VERSION, message))]
        return header.api_key, self.call(identity, header, request, dispatch, stats)

    def call(self, identity: bytes, header: RequestHeader, request: Request, dispatch: Dispatch,
             stats: ServerStats) -> list[Reply]:
        """Run a decoded request (now, or one the service held back until it could serve it)
        with every failure answered as `serve` answers it."""
        try:
            return dispatch(identity, header, request)
        except ZlogError as error:
            stats.request_errors += 1
            return self._error_reply(identity, header, request, error.code, error.message)
        except AssertionError:
            if self.crash_on_assertion:
                raise
            return self._internal_error(identity, header, request, stats)
        except Exception:
            return self._internal_error(identity, header, request, stats)

    def _internal_error(
        self, identity: bytes, header: RequestHeader, request: Request, stats: ServerStats
    ) -> list[Reply]:
        self.log.exception("request %s from %r failed", header, identity)
        stats.internal_errors += 1
        return self._error_reply(identity, header, request, ErrorCode.UNKNOWN_SERVER_ERROR,
                                 self.internal_error_message)

    @staticmethod
    def _error_reply(
        identity: bytes, header: RequestHeader, request: Request, code: ErrorCode, message: str
    ) -> list[Reply]:
        if not expects_response(request):
            return []
        return [(identity, encode_error_response(header, code, message))]
