"""Client operations: each invocation paired with its completion.

The checks reason about operations, not lines. An operation's type is its completion's; one
that never completed (the run was killed first) is `info`, since it may have happened. A
completion whose operation was not invoked, by that process, is a broken history and refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zlog_jepsen.history import (
    Event,
    EventType,
    Function,
    HistoryFormatError,
    Polled,
    Process,
    SendRecord,
    polled,
    sends,
)


@dataclass(frozen=True)
class Op:
    """One client operation. `index` is its completion's line (its invocation's if pending)."""

    process: Process
    type: EventType
    f: Function
    invoke: Event
    completion: Event | None
    writes: list[SendRecord] = field(default_factory=list)
    reads: Polled = field(default_factory=dict)

    @property
    def index(self) -> int:
        return (self.completion or self.invoke).index

    @property
    def last(self) -> Event:
        """The event that ends the operation as far as the history knows."""
        return self.completion or self.invoke

    def rebalanced(self, key: int) -> bool:
        return self.completion is not None and self.completion.rebalanced(key)


def client_ops(history: list[Event]) -> list[Op]:
    """Every client operation, in completion order; pending ones last, as `info`."""
    pending: dict[Process, Event] = {}
    done: list[Op] = []
    for event in sorted(history, key=lambda e: e.index):
        if not event.is_client:
            continue
        if event.type == "invoke":
            if event.process in pending:
                raise HistoryFormatError(
                    f"event {event.index}: process {event.process} invokes while event "
                    f"{pending[event.process].index} has not completed"
                )
            pending[event.process] = event
            continue
        invoke = pending.pop(event.process, None)
        if invoke is None or invoke.f != event.f:
            raise HistoryFormatError(
                f"event {event.index}: a {event.type} {event.f} that process {event.process} "
                "did not invoke"
            )
        done.append(_op(invoke, event))
    done.extend(_op(invoke, None) for invoke in sorted(pending.values(), key=lambda e: e.index))
    return done


def _op(invoke: Event, completion: Event | None) -> Op:
    end = completion or invoke
    writes: list[SendRecord] = []
    reads: Polled = {}
    if invoke.f == "send":
        # a fail or info completion may carry no value of its own: the invocation's then
        writes = sends(completion) if completion and completion.value else sends(invoke)
    elif invoke.f == "poll" and completion is not None:
        reads = polled(completion)
    return Op(
        process=invoke.process,
        type="info" if completion is None else end.type,
        f=invoke.f,
        invoke=invoke,
        completion=completion,
        writes=writes,
        reads=reads,
    )
