"""What a client does after a failure, and the loop that retries a call within its timeout.

Kafka's rule, kept by every client class: an error Kafka marks retriable
(`zlog.errors.is_retriable`) is retried inside the client until the call's own timeout
(`request_timeout_ms`, `delivery_timeout_ms`, a poll's timeout) is spent, and reaches the
caller only then, as the last cause it met; any other error reaches the caller at once. Where
the retry goes depends on what answered:

* a partition's leader (Produce, Fetch, ListOffsets), or the call to it that failed: an error
  saying the client's metadata is stale (Kafka's InvalidMetadataException: the leader moved or
  is not elected yet, a worker that does not hold the partition yet, a connection lost) or a
  timeout makes the client ask for the topic's metadata again first (RELEARN); the other
  retriable errors (NOT_ENOUGH_REPLICAS, OFFSET_NOT_AVAILABLE while a new leader's high
  watermark catches up, ...) are the same request to the same leader again (RETRY);
* a control endpoint, about the cluster's topics: its UNKNOWN_TOPIC_OR_PARTITION is the
  metadata log's word, not a replica that has not caught up, so it reaches the caller at once
  (`DefiniteError`): a misspelt topic fails fast, a topic deleted under a producer fails its
  records;
* a group's coordinator: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost connection or a
  timeout mean it moved or is out of reach, so it is found again (RELEARN);
  COORDINATOR_LOAD_IN_PROGRESS and the other retriable errors go to the same one (RETRY).

Pure: codes in, decisions out; `retry_within` takes its clock and its sleep as arguments.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from typing import Final, TypeVar

from zlog.clock import monotonic_ms
from zlog.errors import ErrorCode, ZlogError, is_invalid_metadata, is_retriable

T = TypeVar("T")


class Next(enum.Enum):
    """After a failed attempt."""

    FAIL = "fail"
    """The caller hears it now."""
    RETRY = "retry"
    """The same request to the same place, after a backoff."""
    RELEARN = "relearn"
    """Learn again where to send it (metadata, the coordinator), then retry."""


COORDINATOR_MOVED: Final = frozenset({
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT,
})
"""The coordinator is elsewhere, or out of reach: find it again."""


class DefiniteError(ZlogError):
    """An error to hand to the caller at once although Kafka calls its code retriable: the
    control plane saying a topic or partition does not exist. Caught as the ZlogError it is;
    `retriable` is False, so no retry loop goes round on it."""

    def __init__(self, error: ZlogError) -> None:
        super().__init__(error.code, error.message)

    @property
    def retriable(self) -> bool:
        return False


def after_leader_error(code: ErrorCode) -> Next:
    """After a partition leader's error, or a failed call to it."""
    if not is_retriable(code):
        return Next.FAIL
    if is_invalid_metadata(code) or code == ErrorCode.REQUEST_TIMED_OUT:
        return Next.RELEARN
    return Next.RETRY


def after_control_error(code: ErrorCode) -> Next:
    """After a control endpoint's error about the cluster's topics (see the module
    docstring); the control plane itself is gone round by `Connections.call_control`."""
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or not is_retriable(code):
        return Next.FAIL
    return Next.RETRY


def after_coordinator_error(code: ErrorCode) -> Next:
    """After a group coordinator's error, or a failed call to it."""
    if code in COORDINATOR_MOVED:
        return Next.RELEARN
    return Next.RETRY if is_retriable(code) else Next.FAIL


def definite_if_control_says(error: ZlogError) -> ZlogError:
    """`error` as the control plane's answer: a DefiniteError where it must reach the caller
    at once although its code is retriable."""
    if error.retriable and after_control_error(error.code) is Next.FAIL:
        return DefiniteError(error)
    return error


def _sleep_ms(duration_ms: int) -> None:
    time.sleep(duration_ms / 1000)


def retry_within(
    attempt: Callable[[int], T], *, timeout_ms: int, backoff_ms: int,
    next_step: Callable[[ErrorCode], Next], relearn: Callable[[ZlogError], None] | None = None,
    clock_ms: Callable[[], int] = monotonic_ms, sleep_ms: Callable[[int], None] = _sleep_ms,
) -> T:
    """`attempt(remaining_ms)`'s answer, attempted again after `backoff_ms` while it fails
    with an error `next_step` says to retry, until `timeout_ms` is spent; then the last error.

    `relearn(error)` runs before a RELEARN retry: it forgets what the attempt relied on (the
    topic's metadata, the coordinator) so that the next attempt asks again. A DefiniteError,
    or an error `next_step` says FAIL to (every code Kafka does not call retriable, for the
    decisions above), is raised at once.
    """
    deadline_ms = clock_ms() + timeout_ms
    while True:
        try:
            return attempt(max(deadline_ms - clock_ms(), 1))
        except ZlogError as error:
            step = Next.FAIL if isinstance(error, DefiniteError) else next_step(error.code)
            if step is Next.FAIL or clock_ms() + backoff_ms >= deadline_ms:
                raise
            if step is Next.RELEARN and relearn is not None:
                relearn(error)
            sleep_ms(backoff_ms)
