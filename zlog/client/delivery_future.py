"""The future a `send` returns: a `concurrent.futures.Future` that builds its lock only when used.

A standard Future builds a `threading.Condition` (an RLock and its bookkeeping) when it is made.
The producer makes one per record, and most are never waited on: the caller sends at a rate and
reads none of them, or waits on `flush`. Made, completed and checked, a Future costs 2.0 us on
the 2-vCPU machine of docs/benchmarks.md and a DeliveryFuture 0.9 us. It behaves as a Future
in every way (`result`, `exception`, callbacks, `concurrent.futures.wait` and `as_completed`),
but makes its Condition at the first operation that needs one: a wait, a callback, a cancel.

Completion without a Condition is safe against a waiter that arrives at the same moment because
both sides decide under one process-wide lock: a waiter makes the Condition under it and reads
the state under the Condition afterwards; a completion under it either finds the Condition (and
notifies through it) or sets the state before any Condition exists (and the waiter, when it then
makes one, finds the future done).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import (  # the states Future itself uses
    CANCELLED,
    CANCELLED_AND_NOTIFIED,
    FINISHED,
    PENDING,
)
from typing import Any, Final, TypeVar

T = TypeVar("T")

_CONDITION_LOCK: Final = threading.Lock()
_DONE_STATES: Final = frozenset((CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED))


class DeliveryFuture(Future[T]):
    """A Future whose Condition is made on first need (module docstring)."""

    def __init__(self) -> None:
        self._state = PENDING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Any] = []
        self.on_wait: Callable[[Future[Any], float | None], float | None] | None = None
        """Called before a caller blocks on this future with its timeout; returns what is left
        of it (the producer's caller reads its own answers meanwhile)."""

    def __getattr__(self, name: str) -> Any:
        """Called only for attributes not set: `_condition` on its first use."""
        if name != "_condition":
            raise AttributeError(name)
        with _CONDITION_LOCK:
            condition = self.__dict__.get("_condition")
            if condition is None:
                condition = self.__dict__["_condition"] = threading.Condition()
        return condition

    def done(self) -> bool:
        return self._state in _DONE_STATES  # one read: no lock needed to answer it

    def result(self, timeout: float | None = None) -> T:
        if self._state == FINISHED:  # no wait: answered without making the Condition
            if self._exception is not None:
                raise self._exception
            return self._result  # type: ignore[no-any-return]
        if self.on_wait is not None and timeout != 0:
            timeout = self.on_wait(self, timeout)
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state == FINISHED:
            return self._exception
        if self.on_wait is not None and timeout != 0:
            timeout = self.on_wait(self, timeout)
        return super().exception(timeout)

    def set_result(self, result: T) -> None:
        if not self._finish_without_condition(result, None):
            super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        if not self._finish_without_condition(None, exception):
            super().set_exception(exception)

    def _finish_without_condition(self, result: Any, exception: BaseException | None) -> bool:
        """Finish here if no Condition exists yet (so no waiter, no callback, no `wait`)."""
        with _CONDITION_LOCK:
            if "_condition" in self.__dict__:
                return False
            state = self._state
            if state not in _DONE_STATES:
                self._result = result
                self._exception = exception
                self._state = FINISHED
                return True
        raise InvalidStateError(f"{state}: {self!r}")  # repr makes the Condition: lock released
