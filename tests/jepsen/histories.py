"""A terse way to write histories by hand: each call appends an operation's two events; and
the partitions the nemesis would find in a Metadata answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zlog.transport.messages.admin import PartitionMetadata
from zlog_jepsen.history import (
    Event,
    EventType,
    Function,
    Process,
    SendRecord,
    offsets_value,
    poll_value,
    send_ok_value,
    send_value,
)


class History:
    """Events numbered in call order, one nanosecond apart."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def event(self, process: Process, type: EventType, f: Function, value: Any = None,
              **fields: Any) -> History:
        n = len(self.events)
        self.events.append(Event(n, 1_000 + n, process, type, f, value, **fields))
        return self

    def op(self, process: Process, f: Function, invoke_value: Any, done: EventType,
           done_value: Any, **fields: Any) -> History:
        invoke_fields = {k: v for k, v in fields.items() if k in ("seek_to_beginning", "group")}
        self.event(process, "invoke", f, invoke_value, **invoke_fields)
        return self.event(process, done, f, done_value, **fields)

    def send(self, process: Process, key: int, pairs: Sequence[tuple[int | None, int]],
             done: EventType = "ok", **fields: Any) -> History:
        """Send values to one key; `pairs` are (acknowledged offset, value)."""
        invoke = send_value((key, v) for _, v in pairs)
        if done != "ok":
            return self.op(process, "send", invoke, done, invoke, **fields)
        acked = send_ok_value(SendRecord(key, v, o) for o, v in pairs)
        return self.op(process, "send", invoke, done, acked, **fields)

    def poll(self, process: Process, reads: Mapping[int, Sequence[tuple[int, int]]],
             done: EventType = "ok", rebalanced: Sequence[Sequence[int]] = ()) -> History:
        return self.op(process, "poll", poll_value(), done, poll_value(reads),
                       rebalance_log=tuple(tuple(ks) for ks in rebalanced))

    def assign(self, process: Process, keys: Sequence[int], seek: bool = False) -> History:
        return self.op(process, "assign", list(keys), "ok", list(keys), seek_to_beginning=seek)

    def subscribe(self, process: Process, keys: Sequence[int], group: str = "g") -> History:
        return self.op(process, "subscribe", list(keys), "ok", list(keys), group=group)

    def commit(self, process: Process, offsets: Mapping[int, int], done: EventType = "ok",
               group: str = "g") -> History:
        value = offsets_value(offsets)
        return self.op(process, "commit", value, done, value, group=group)

    def committed(self, process: Process, offsets: Mapping[int, int],
                  group: str = "g") -> History:
        return self.op(process, "committed", {}, "ok", offsets_value(offsets), group=group)

    def crash(self, process: Process) -> History:
        return self.op(process, "crash", None, "info", None)


def partition(number: int, isr: tuple[int, ...], *, replicas: tuple[int, ...] = (1, 2, 3),
              leader: int = 1, endpoint: str = "tcp://10.0.0.1:9000") -> PartitionMetadata:
    """Partition `number` as Metadata shows it: its replicas, ISR, leader (-1: none) and the
    data endpoint serving it ("" while none does)."""
    return PartitionMetadata(number, leader, 4, replicas, isr, endpoint)
