"""The structures every check reads: who wrote and read each value, and each key's version order.

The version order of a key maps each offset to the values seen there. It is built from every
poll result (polls are safe whatever their outcome, so failed and indefinite polls count),
from the offsets acknowledged to sends that must have happened, and from the final full read.
Offsets may be sparse, so positions are compared by dense index: the non-empty offsets
numbered 0, 1, 2, ... The distance between two values is the difference of their indexes,
taken as 1 (no anomaly) when either is unknown, so that missing information never makes a
run fail.

Records retention deleted are told apart with the log starts the brokers answered
(zlog_jepsen.checker.retention): `retained_away` and `skip_retained` say what they excuse.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from zlog_jepsen.checker.anomaly import Anomaly, Findings
from zlog_jepsen.checker.ops import Op
from zlog_jepsen.checker.retention import NO_LOG_STARTS, LogStarts
from zlog_jepsen.history import FinalRead


@dataclass
class KeyOrder:
    """One key's version order and the dense indexes derived from it."""

    values_at: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    offsets_of: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    index_of_offset: dict[int, int] = field(default_factory=dict)
    first_index: dict[int, int] = field(default_factory=dict)
    last_index: dict[int, int] = field(default_factory=dict)

    def add(self, offset: int, value: int) -> None:
        self.values_at[offset].add(value)
        self.offsets_of[value].add(offset)

    def index(self) -> None:
        for i, offset in enumerate(sorted(self.values_at)):
            self.index_of_offset[offset] = i
            for value in self.values_at[offset]:
                self.first_index.setdefault(value, i)
                self.last_index[value] = i

    def delta(self, before: int, after: int) -> int:
        """How many positions value `after` sits past value `before`: 1 is the next one, 0 or
        less is back. Used where offsets may be unknown (sends); reads compare offsets."""
        if before not in self.first_index or after not in self.first_index:
            return 1
        return self.first_index[after] - self.first_index[before]

    def offset_delta(self, before: int, after: int) -> int:
        """The same for two offsets read: a value written twice does not confuse it."""
        if before not in self.index_of_offset or after not in self.index_of_offset:
            return 1
        return self.index_of_offset[after] - self.index_of_offset[before]

    def between(self, lo_index: int, hi_index: int) -> list[int]:
        """The values strictly between two dense indexes, in order (what a skip skipped)."""
        return [
            min(self.values_at[o])
            for o, i in sorted(self.index_of_offset.items())
            if lo_index < i < hi_index
        ]


@dataclass
class Derived:
    ops: list[Op]
    final: FinalRead | None
    orders: dict[int, KeyOrder]
    writer_of: dict[int, dict[int, Op]]
    readers_of: dict[int, dict[int, list[Op]]]
    ok_read: dict[int, set[int]]
    """key -> the values ok polls and the final read returned: certainly in the log once."""
    log_starts: LogStarts = NO_LOG_STARTS

    def order(self, key: int) -> KeyOrder:
        return self.orders.get(key) or KeyOrder()

    def retained_away(self, key: int, value: int, offset: int | None = None) -> bool:
        """Whether retention may have deleted `value` of `key` as it is allowed to: at
        `offset`, or, when that is unknown, at every offset it was seen at; and no other
        value was ever seen there (a record replaced by another was truncated, not deleted)."""
        order = self.order(key)
        offsets = {offset} if offset is not None else order.offsets_of.get(value, ())
        return bool(offsets) and all(self.log_starts.retained_away(key, o)
                                     and order.values_at.get(o, set()) <= {value}
                                     for o in offsets)

    def skip_retained(self, key: int, jump: Jump, time_ns: int) -> bool:
        """Whether `jump` skips forward over records all below the log start at `time_ns`
        (a consumer whose position retention deleted starts again at the log start)."""
        order = self.order(key)
        if jump_delta(order, jump) <= 1:
            return False
        floor = self.log_starts.floor_at(key, time_ns)
        return all(offset < floor for offset in skipped_offsets(order, jump))

    def must_have_committed(self, op: Op) -> bool:
        """ok, or info with one of its values read by an ok poll: the send happened."""
        if op.type == "ok":
            return True
        return op.type == "info" and any(r.value in self.ok_read.get(r.key, ()) for r in op.writes)


def derive(ops: list[Op], final: FinalRead | None,
           log_starts: LogStarts = NO_LOG_STARTS) -> Derived:
    writer_of: dict[int, dict[int, Op]] = defaultdict(dict)
    readers_of: dict[int, dict[int, list[Op]]] = defaultdict(lambda: defaultdict(list))
    ok_read: dict[int, set[int]] = defaultdict(set)
    for op in ops:
        for record in op.writes:
            writer_of[record.key].setdefault(record.value, op)
        for key, pairs in op.reads.items():
            for _, value in pairs:
                readers_of[key][value].append(op)
                if op.type == "ok":
                    ok_read[key].add(value)
    for key, pairs in (final or {}).items():
        ok_read[key].update(value for _, value in pairs)
    derived = Derived(ops, final, defaultdict(KeyOrder), writer_of, readers_of, ok_read,
                      log_starts)
    for op in ops:
        for key, pairs in op.reads.items():
            for offset, value in pairs:
                derived.orders[key].add(offset, value)
        if derived.must_have_committed(op):
            for record in op.writes:
                if record.offset is not None:
                    derived.orders[record.key].add(record.offset, record.value)
    for key, pairs in (final or {}).items():
        for offset, value in pairs:
            derived.orders[key].add(offset, value)
    for order in derived.orders.values():
        order.index()
    return derived


Jump = tuple[tuple[int | None, int], tuple[int | None, int]]
"""Two (offset, value) records that should have been adjacent; offsets None where unknown."""


def jump_delta(order: KeyOrder, jump: Jump) -> int:
    (o1, v1), (o2, v2) = jump
    if o1 is not None and o2 is not None:
        return order.offset_delta(o1, o2)
    return order.delta(v1, v2)


def _indexes(order: KeyOrder, jump: Jump) -> tuple[int, int]:
    """The dense indexes of a jump's two records (-1 where unknown)."""
    (o1, v1), (o2, v2) = jump
    lo = order.index_of_offset.get(o1, -1) if o1 is not None else order.first_index.get(v1, -1)
    hi = order.index_of_offset.get(o2, -1) if o2 is not None else order.first_index.get(v2, -1)
    return lo, hi


def skipped_offsets(order: KeyOrder, jump: Jump) -> list[int]:
    """The offsets strictly between a jump's two records."""
    lo, hi = _indexes(order, jump)
    return [o for o, i in sorted(order.index_of_offset.items()) if lo < i < hi]


def jump_example(order: KeyOrder, op: Op, key: int, jump: Jump) -> dict[str, object]:
    """What a report shows of two values that should have been adjacent and were not."""
    (_, v1), (_, v2) = jump
    lo, hi = _indexes(order, jump)
    return {
        "key": key, "process": op.process, "values": [v1, v2],
        "delta": jump_delta(order, jump), "skipped": order.between(lo, hi), "op": op.index,
    }


def report_jump(findings: Findings, kinds: tuple[Anomaly, Anomaly], order: KeyOrder, op: Op, *,
                key: int, jump: Jump, excused: bool = False) -> None:
    """Report (or excuse) the second record of `jump` not being the one right after the first:
    `kinds` names the anomaly of a skip forward and of a step back."""
    delta = jump_delta(order, jump)
    if delta == 1:
        return
    anomaly = kinds[0] if delta > 1 else kinds[1]
    if excused:
        findings.allow(anomaly)
    else:
        findings.add(anomaly, jump_example(order, op, key, jump))
