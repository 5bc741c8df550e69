"""Whether a client error means the operation did not happen (fail) or might have (info).

The checker trusts a `fail` completely: a value whose send failed and is read later is an
aborted read, a broker bug. So a client may record `fail` only when the broker has proved
that nothing was appended, that is for the codes a broker gives before it appends anything.
Everything else (a timeout, a lost connection, NOT_LEADER_OR_FOLLOWER, which Kafka has been
seen to answer for a send it had appended, NOT_ENOUGH_REPLICAS_AFTER_APPEND, an error nobody
knows) is `info`: indefinite, possibly applied. docs/reliability.md §8.2.
"""

from __future__ import annotations

from typing import Final, Literal

from zlog.errors import ErrorCode, ZlogError

Outcome = Literal["fail", "info"]

DEFINITE_FAILURES: Final[frozenset[ErrorCode]] = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.INVALID_REQUIRED_ACKS,
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.INVALID_RECORD,
    }
)
"""The codes a broker answers before appending anything: the send certainly did not happen."""


def outcome_of(error: ErrorCode | BaseException) -> Outcome:
    """`fail` for a definite error code, `info` for everything else, exceptions included."""
    if isinstance(error, ZlogError):
        error = error.code
    if isinstance(error, ErrorCode):
        return "fail" if error in DEFINITE_FAILURES else "info"
    return "info"  # a timeout, a disconnect, anything unexpected: the outcome is unknown


def error_name(error: ErrorCode | BaseException) -> str:
    """What a history's `error` field says: the Kafka code's name, or the exception's kind."""
    if isinstance(error, ZlogError):
        return error.code.name
    if isinstance(error, ErrorCode):
        return error.name
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
