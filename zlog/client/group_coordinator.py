"""The way to a group's coordinator: found with FindCoordinator, asked again when it moves.

A group's coordinator is the worker leading its `__consumer_offsets` partition
(docs/groups.md §1). Any broker's control endpoint answers FindCoordinator with that worker's
data endpoint; COORDINATOR_NOT_AVAILABLE (15) means the offsets topic is being created or the
partition has no leader yet, so the question is asked again after a backoff. A coordinator
that answers NOT_COORDINATOR (16), or a connection that fails, sends the caller back to
FindCoordinator; COORDINATOR_LOAD_IN_PROGRESS (14) is the same coordinator asked again later.
`call` does all of that within one timeout, so a caller never sees those errors unless the
timeout runs out; `send_once` is one attempt, for the heartbeat thread, whose member decides.

One CoordinatorLink per thread: it uses its owner's Connections (zmq sockets belong to one
thread).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final, TypeVar, cast

from zlog.client.cluster import Connections
from zlog.clock import monotonic_ms
from zlog.errors import ErrorCode, ZlogError, for_code
from zlog.transport.group_messages import (
    GROUP_RESPONSE_TYPES,
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    FindCoordinatorRequestV0,
    FindCoordinatorResponseV0,
    GroupRequest,
    GroupResponse,
)

log = logging.getLogger("zlog.client.group_coordinator")

R = TypeVar("R", bound=GroupResponse)

MOVED_CODES: Final = frozenset({
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT,
})
"""The coordinator is elsewhere, or out of reach: find it again."""

RETRY_CODES: Final = MOVED_CODES | {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REBALANCE_IN_PROGRESS,
}
"""Retried inside the client (docs/groups.md, "Client"), never raised before the timeout."""


def response_error(response: GroupResponse) -> ErrorCode:
    """The top-level error of a group response; for DescribeGroups and DeleteGroups, which
    answer per group, a per-group error that sends the caller elsewhere (the coordinator
    moved between FindCoordinator and the call) counts as one."""
    if isinstance(response, DescribeGroupsResponse):
        codes = [ErrorCode(group.error) for group in response.groups]
    elif isinstance(response, DeleteGroupsResponse):
        codes = [ErrorCode(code) for _, code in response.results]
    else:
        return ErrorCode(response.error)
    return next((code for code in codes if code in RETRY_CODES), ErrorCode.NONE)


class CoordinatorLink:
    """Calls to one group's coordinator over the owner's connections."""

    def __init__(self, connections: Connections, group_id: str, *, request_timeout_ms: int,
                 retry_backoff_ms: int) -> None:
        self.connections = connections
        self.group_id = group_id
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.endpoint: str | None = None

    def find(self, timeout_ms: int) -> str:
        """The coordinator's data endpoint, asked of the control plane until it names one."""
        deadline_ms = monotonic_ms() + timeout_ms
        while True:
            remaining_ms = max(deadline_ms - monotonic_ms(), 1)
            response = self.connections.call_control(
                FindCoordinatorRequestV0(self.group_id), remaining_ms)
            if not isinstance(response, FindCoordinatorResponseV0):
                raise ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                f"FindCoordinator answered with {type(response).__name__}")
            if response.error_code == ErrorCode.NONE and response.endpoint:
                self.endpoint = response.endpoint
                return response.endpoint
            error = for_code(response.error_code or ErrorCode.COORDINATOR_NOT_AVAILABLE,
                             response.error_message or
                             f"no coordinator for group {self.group_id!r} yet")
            if error.code not in RETRY_CODES or monotonic_ms() >= deadline_ms:
                raise error
            log.debug("group %s: %s; asking again", self.group_id, error)
            time.sleep(self.retry_backoff_ms / 1000)

    def send_once(self, request: GroupRequest, timeout_ms: int, *,
                  cancelled: Callable[[], bool] | None = None) -> GroupResponse:
        """One attempt; a failed connection or a timeout raises (and forgets the coordinator).
        `cancelled` ends it early: a JoinGroup may wait minutes for the rest of the group."""
        endpoint = self.endpoint or self.find(timeout_ms)
        try:
            response = self.connections.call_endpoint(endpoint, request, timeout_ms,
                                                      cancelled=cancelled)
        except ZlogError:
            self.endpoint = None
            raise
        if not isinstance(response, GROUP_RESPONSE_TYPES):
            raise ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR,
                            f"the coordinator answered {type(request).__name__} with "
                            f"{type(response).__name__}")
        answer = cast(GroupResponse, response)
        if response_error(answer) in MOVED_CODES:
            self.endpoint = None
        return answer

    def call(self, request: GroupRequest, expected: type[R],
             timeout_ms: int | None = None) -> R:
        """The coordinator's answer, retrying the retriable errors (RETRY_CODES) within the
        timeout; then the last one is raised. Other errors are the caller's to read."""
        deadline_ms = monotonic_ms() + (timeout_ms or self.request_timeout_ms)
        while True:
            remaining_ms = max(deadline_ms - monotonic_ms(), 1)
            try:
                response = self.send_once(request, remaining_ms)
                code = response_error(response)
                if code not in RETRY_CODES:
                    if not isinstance(response, expected):
                        raise ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                        f"expected {expected.__name__}, the coordinator sent "
                                        f"{type(response).__name__}")
                    return response
                failure = for_code(code, f"group {self.group_id!r}: {code.name.lower()}")
            except ZlogError as error:
                if error.code not in RETRY_CODES:
                    raise
                failure = error
            if monotonic_ms() + self.retry_backoff_ms >= deadline_ms:
                raise failure
            log.debug("group %s: %s; trying again", self.group_id, failure)
            time.sleep(self.retry_backoff_ms / 1000)
