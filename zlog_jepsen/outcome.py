"""Whether a client error means the operation did not happen (fail) or might have (info).

The checker trusts a `fail` completely: a value whose send failed and is read later is an
aborted read, a broker bug. So a client may record `fail` only when the broker has proved
that nothing was appended, that is for the codes a broker gives before it appends anything
(`zlog.errors.proves_not_appended`; the producer reports one only when no earlier attempt of
the batch may have appended it). Everything else is `info`: indefinite, possibly applied.
docs/reliability.md §8.2.
"""

from __future__ import annotations

from typing import Literal

from zlog.errors import ErrorCode, ZlogError, proves_not_appended

Outcome = Literal["fail", "info"]



def outcome_of(error: ErrorCode | BaseException) -> Outcome:
    """`fail` for a definite error code, `info` for everything else, exceptions included."""
    if isinstance(error, ZlogError):
        error = error.code
    if isinstance(error, ErrorCode):
        return "fail" if proves_not_appended(error) else "info"
    return "info"  # a timeout, a disconnect, anything unexpected: the outcome is unknown


def error_name(error: ErrorCode | BaseException) -> str:
    """What a history's `error` field says: the Kafka code's name, or the exception's kind."""
    if isinstance(error, ZlogError):
        return error.code.name
    if isinstance(error, ErrorCode):
        return error.name
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
