"""The fail-vs-info rule: only an error the broker gives before appending is a definite failure."""

from __future__ import annotations

import pytest

from zlog.errors import ErrorCode, ZlogError, proves_not_appended
from zlog_jepsen.outcome import error_name, outcome_of

DEFINITE_NUMBERS = {2, 3, 10, 17, 18, 19, 21, 45, 47, 87}


def test_the_definite_failures_are_the_codes_given_before_an_append() -> None:
    assert {int(code) for code in ErrorCode if proves_not_appended(code)} == DEFINITE_NUMBERS


@pytest.mark.parametrize("number", sorted(DEFINITE_NUMBERS))
def test_a_definite_code_fails(number: int) -> None:
    assert outcome_of(ErrorCode(number)) == "fail"
    assert outcome_of(ZlogError(ErrorCode(number), "refused")) == "fail"


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.NOT_LEADER_OR_FOLLOWER,  # may follow an append (KAFKA-13574)
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.UNKNOWN_SERVER_ERROR,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FENCED_LEADER_EPOCH,
    ],
)
def test_every_other_code_is_indefinite(code: ErrorCode) -> None:
    assert outcome_of(code) == "info"
    assert outcome_of(ZlogError(code, "maybe")) == "info"


@pytest.mark.parametrize(
    "error", [TimeoutError("no answer"), ConnectionResetError(), RuntimeError("bug")]
)
def test_timeouts_disconnects_and_unknown_exceptions_are_indefinite(error: Exception) -> None:
    assert outcome_of(error) == "info"


def test_the_error_field_names_the_code_or_the_exception() -> None:
    assert error_name(ZlogError(ErrorCode.NOT_ENOUGH_REPLICAS, "isr 1")) == "NOT_ENOUGH_REPLICAS"
    assert error_name(ErrorCode.REQUEST_TIMED_OUT) == "REQUEST_TIMED_OUT"
    assert error_name(TimeoutError("after 5 s")) == "TimeoutError: after 5 s"
    assert error_name(ConnectionResetError()) == "ConnectionResetError"
