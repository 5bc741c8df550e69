"""The pure retry decisions (zlog/client/retries.py): which errors a client retries, where,
and the loop that retries within a timeout, on a clock the test moves."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from zlog.client.group.coordinator import after_call_error, is_retried
from zlog.client.retries import (
    DefiniteError,
    Next,
    after_control_error,
    after_coordinator_error,
    after_leader_error,
    definite_if_control_says,
    retry_within,
)
from zlog.errors import ErrorCode, ZlogError, is_retriable

E = ErrorCode


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_retriable_code_is_retried_after_a_leader_answer_and_no_other(
        code: ErrorCode) -> None:
    assert (after_leader_error(code) is Next.FAIL) == (not is_retriable(code))
    assert (after_coordinator_error(code) is Next.FAIL) == (not is_retriable(code))


@pytest.mark.parametrize("code", [
    E.NOT_LEADER_OR_FOLLOWER, E.LEADER_NOT_AVAILABLE, E.FENCED_LEADER_EPOCH,
    E.UNKNOWN_LEADER_EPOCH, E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_ID,
    E.KAFKA_STORAGE_ERROR, E.NETWORK_EXCEPTION, E.REQUEST_TIMED_OUT, E.REPLICA_NOT_AVAILABLE,
])
def test_a_leader_that_moved_or_went_away_is_looked_up_again(code: ErrorCode) -> None:
    assert after_leader_error(code) is Next.RELEARN


@pytest.mark.parametrize("code", [
    E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.OFFSET_NOT_AVAILABLE,
    E.COORDINATOR_LOAD_IN_PROGRESS,
])
def test_a_leader_that_cannot_answer_yet_is_asked_again(code: ErrorCode) -> None:
    assert after_leader_error(code) is Next.RETRY


def test_the_control_planes_no_such_topic_is_an_answer_not_a_hiccup() -> None:
    assert after_control_error(E.UNKNOWN_TOPIC_OR_PARTITION) is Next.FAIL
    assert after_control_error(E.LEADER_NOT_AVAILABLE) is Next.RETRY  # being created
    assert after_control_error(E.NOT_CONTROLLER) is Next.RETRY
    assert after_control_error(E.INVALID_CONFIG) is Next.FAIL
    unknown = definite_if_control_says(ZlogError(E.UNKNOWN_TOPIC_OR_PARTITION, "no topic 'x'"))
    assert isinstance(unknown, DefiniteError) and not unknown.retriable
    assert unknown.code == E.UNKNOWN_TOPIC_OR_PARTITION and str(unknown).endswith("no topic 'x'")
    waiting = ZlogError(E.LEADER_NOT_AVAILABLE, "being created")
    assert definite_if_control_says(waiting) is waiting


def test_a_coordinator_that_moved_is_found_again_one_loading_is_asked_again() -> None:
    for moved in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.NETWORK_EXCEPTION,
                  E.REQUEST_TIMED_OUT):
        assert after_coordinator_error(moved) is Next.RELEARN
    assert after_coordinator_error(E.COORDINATOR_LOAD_IN_PROGRESS) is Next.RETRY
    assert after_coordinator_error(E.NOT_ENOUGH_REPLICAS) is Next.RETRY
    assert after_coordinator_error(E.UNKNOWN_MEMBER_ID) is Next.FAIL


class Clock:
    def __init__(self) -> None:
        self.now_ms = 1_000
        self.slept_ms: list[int] = []

    def __call__(self) -> int:
        return self.now_ms

    def sleep(self, duration_ms: int) -> None:
        self.slept_ms.append(duration_ms)
        self.now_ms += duration_ms


def _failing(clock: Clock, errors: list[ZlogError], answer: str = "ok",
             cost_ms: int = 10) -> tuple[list[int], Callable[[int], str]]:
    """An attempt that raises `errors` in turn, then answers; the remaining_ms it was given."""
    given: list[int] = []

    def attempt(remaining_ms: int) -> str:
        given.append(remaining_ms)
        clock.now_ms += cost_ms
        if errors:
            raise errors.pop(0)
        return answer

    return given, attempt


def test_retry_within_relearns_then_answers_within_the_timeout() -> None:
    clock = Clock()
    relearned: list[ErrorCode] = []
    given, attempt = _failing(clock, [ZlogError(E.NOT_LEADER_OR_FOLLOWER, "moved"),
                                      ZlogError(E.OFFSET_NOT_AVAILABLE, "catching up")])
    answer = retry_within(attempt, timeout_ms=1_000, backoff_ms=100,
                          next_step=after_leader_error,
                          relearn=lambda error: relearned.append(error.code),
                          clock_ms=clock, sleep_ms=clock.sleep)
    assert answer == "ok"
    assert relearned == [E.NOT_LEADER_OR_FOLLOWER]  # a RETRY relearns nothing
    assert clock.slept_ms == [100, 100]
    assert given == [1_000, 890, 780]  # each attempt gets what is left of the one timeout


def test_retry_within_gives_up_at_the_timeout_with_the_last_cause() -> None:
    clock = Clock()
    errors = [ZlogError(E.LEADER_NOT_AVAILABLE, f"still none ({n})") for n in range(100)]
    _, attempt = _failing(clock, errors)
    with pytest.raises(ZlogError) as caught:
        retry_within(attempt, timeout_ms=500, backoff_ms=100,
                     next_step=after_leader_error, clock_ms=clock, sleep_ms=clock.sleep)
    assert caught.value.code == E.LEADER_NOT_AVAILABLE
    assert clock.now_ms - 1_000 <= 500 + 10  # never past the timeout (an attempt's cost)
    assert str(caught.value).endswith(f"({len(clock.slept_ms)})")


@pytest.mark.parametrize("error", [
    ZlogError(E.INVALID_REQUEST, "bad"), ZlogError(E.OFFSET_OUT_OF_RANGE, "below the start"),
    DefiniteError(ZlogError(E.UNKNOWN_TOPIC_OR_PARTITION, "no topic 'typo'")),
])
def test_retry_within_raises_a_definite_error_at_once(error: ZlogError) -> None:
    clock = Clock()
    _, attempt = _failing(clock, [error])
    with pytest.raises(ZlogError) as caught:
        retry_within(attempt, timeout_ms=10_000, backoff_ms=100,
                     next_step=after_leader_error, clock_ms=clock, sleep_ms=clock.sleep)
    assert caught.value is error
    assert clock.slept_ms == []


def test_a_coordinator_call_retries_a_rebalance_though_kafka_would_not() -> None:
    """A commit that meets REBALANCE_IN_PROGRESS is sent again (docs/groups.md "Client"):
    the decision passed to the loop is what counts, not Kafka's retriable flag."""
    clock = Clock()
    _, attempt = _failing(clock, [ZlogError(E.REBALANCE_IN_PROGRESS, "rebalancing")])
    assert retry_within(attempt, timeout_ms=1_000, backoff_ms=100, next_step=after_call_error,
                        clock_ms=clock, sleep_ms=clock.sleep) == "ok"
    for code in ErrorCode:
        assert (after_call_error(code) is not Next.FAIL) == is_retried(code)
