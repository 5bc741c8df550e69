"""The way to a group's coordinator: found with FindCoordinator, asked again when it moves.

A group's coordinator is the worker leading its `__consumer_offsets` partition
(docs/groups.md §1). Any broker's control endpoint answers FindCoordinator with that worker's
data endpoint; COORDINATOR_NOT_AVAILABLE (15) means the offsets topic is being created or the
partition has no leader yet, so the question is asked again after a backoff, of the next
control endpoint. A coordinator that answers NOT_COORDINATOR (16), or a connection that fails
or times out, sends the caller back to FindCoordinator; COORDINATOR_LOAD_IN_PROGRESS (14), and
any other code Kafka calls retriable, is the same coordinator asked again later (retries.py).
`call` does all of that within one timeout, so a caller never sees those errors unless the
timeout runs out; `send_once` is one attempt, for the heartbeat thread, whose member decides.

One CoordinatorLink per thread: it uses its owner's Connections (zmq sockets belong to one
thread).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar, cast

from zlog.client.cluster import Connections
from zlog.client.retries import Next, after_coordinator_error, retry_within
from zlog.clock import monotonic_ms
from zlog.errors import ErrorCode, ZlogError, for_code
from zlog.transport.messages.groups import (
    GROUP_RESPONSE_TYPES,
    DeleteGroupsResponseV0,
    DescribeGroupsResponseV0,
    FindCoordinatorRequestV0,
    FindCoordinatorResponseV0,
    GroupRequest,
    GroupResponse,
)

log = logging.getLogger("zlog.client.group.coordinator")

R = TypeVar("R", bound=GroupResponse)

def is_retried(code: ErrorCode) -> bool:
    """Whether a coordinator's answer (or a failed call) is retried inside the client, never
    raised before the timeout (docs/groups.md, "Client"): every code Kafka calls retriable,
    and REBALANCE_IN_PROGRESS, which a commit meets while the group rebalances."""
    return after_call_error(code) is not Next.FAIL


def response_error(response: GroupResponse) -> ErrorCode:
    """The top-level error of a group response; for DescribeGroups and DeleteGroups, which
    answer per group, a per-group error that sends the caller elsewhere (the coordinator
    moved between FindCoordinator and the call) counts as one."""
    if isinstance(response, DescribeGroupsResponseV0):
        codes = [ErrorCode(group.error_code) for group in response.groups]
    elif isinstance(response, DeleteGroupsResponseV0):
        codes = [ErrorCode(code) for _, code in response.results]
    else:
        return ErrorCode(response.error_code)
    return next((code for code in codes if is_retried(code)), ErrorCode.NONE)


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
        """The coordinator's data endpoint, asked of the control plane until it names one.

        A control endpoint that has no coordinator to name is asked again after the next
        one: another broker may know more (Kafka asks its least loaded node each time)."""
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
            if not is_retried(error.code) or monotonic_ms() >= deadline_ms:
                raise error
            log.debug("group %s: %s; asking again", self.group_id, error)
            self.connections.skip_control_endpoint()
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
        if after_coordinator_error(response_error(answer)) is Next.RELEARN:
            self.endpoint = None
        return answer

    def call(self, request: GroupRequest, expected: type[R],
             timeout_ms: int | None = None) -> R:
        """The coordinator's answer, retrying the retriable errors (`is_retried`) within the
        timeout, the coordinator found again where it moved; then the last one is raised.
        Other errors are the caller's to read."""

        def attempt(remaining_ms: int) -> R:
            response = self.send_once(request, remaining_ms)
            code = response_error(response)
            if is_retried(code):
                raise for_code(code, f"group {self.group_id!r}: {code.name.lower()}")
            if not isinstance(response, expected):
                raise ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                f"expected {expected.__name__}, the coordinator sent "
                                f"{type(response).__name__}")
            return response

        return retry_within(attempt, timeout_ms=timeout_ms or self.request_timeout_ms,
                            backoff_ms=self.retry_backoff_ms, next_step=after_call_error,
                            relearn=self._forget)

    def _forget(self, error: ZlogError) -> None:
        log.debug("group %s: %s; finding the coordinator again", self.group_id, error)
        self.endpoint = None


def after_call_error(code: ErrorCode) -> Next:
    """`call`'s decision: a coordinator's (retries.py), and REBALANCE_IN_PROGRESS asked of
    the same coordinator again."""
    return Next.RETRY if code == ErrorCode.REBALANCE_IN_PROGRESS else after_coordinator_error(
        code)
