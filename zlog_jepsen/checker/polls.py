"""A consumer that skipped records or went back, between polls or within one.

Per process, `last[k]` is the last value of k that an ok poll returned. The next poll that
reads k must start at the position right after it: further on is a poll-skip (records the
consumer never saw), at or before it a nonmonotonic-poll (records seen again). An assign or
subscribe keeps `last` only for the keys it names; seeking to the beginning or a crash (a
new client) forgets it. Under subscribe, the group may move a partition away and back, so a
jump is excused when the rebalance log shows k was reassigned between the two polls; under
assign nothing excuses it. Within one poll, consecutive values of k must be adjacent
(int-poll-skip, int-nonmonotonic-poll) unless the poll's own rebalance log names k. Under
either, a skip over records all below the log start when the poll ended is excused: the
consumer's position was deleted by retention and it started again at the log start
(zlog_jepsen.checker.retention).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

from zlog_jepsen.checker.anomaly import Anomaly, Findings
from zlog_jepsen.checker.derived import Derived, Jump, report_jump
from zlog_jepsen.checker.ops import Op
from zlog_jepsen.history import Process, keys


class _Consumer:
    """One process's position per key, and whether its partitions may move under it."""

    def __init__(self) -> None:
        self.last: dict[int, tuple[int, int]] = {}
        self.subscribed = False
        self.rebalanced: set[int] = set()

    def assigned(self, op: Op) -> None:
        named = set(keys(op.invoke))
        if op.invoke.seek_to_beginning:
            named = set()
        self.last = {k: v for k, v in self.last.items() if k in named}
        self.subscribed = op.f == "subscribe"
        self.rebalanced = set()


def find_poll_anomalies(derived: Derived, findings: Findings) -> None:
    consumers: dict[Process, _Consumer] = defaultdict(_Consumer)
    for op in derived.ops:
        consumer = consumers[op.process]
        if op.f in ("assign", "subscribe") and op.type != "fail":
            consumer.assigned(op)
        elif op.f == "crash":
            consumers[op.process] = _Consumer()
        elif op.f == "poll":
            _check_poll(derived, findings, consumer, op)


def _check_poll(derived: Derived, findings: Findings, consumer: _Consumer, op: Op) -> None:
    if op.completion is not None:
        for moved in op.completion.rebalance_log:
            consumer.rebalanced.update(moved)
    ended_ns = op.last.time_ns
    for key, pairs in sorted(op.reads.items()):
        if not pairs:
            continue
        order = derived.order(key)
        records: list[tuple[int | None, int]] = list(pairs)
        if key in consumer.last:
            jump: Jump = (consumer.last[key], records[0])
            excused = ((consumer.subscribed and key in consumer.rebalanced)
                       or derived.skip_retained(key, jump, ended_ns))
            report_jump(findings, (Anomaly.POLL_SKIP, Anomaly.NONMONOTONIC_POLL),
                        order, op, key=key, jump=jump, excused=excused)
        for jump in pairwise(records):
            excused = op.rebalanced(key) or derived.skip_retained(key, jump, ended_ns)
            report_jump(findings, (Anomaly.INT_POLL_SKIP, Anomaly.INT_NONMONOTONIC_POLL),
                        order, op, key=key, jump=jump, excused=excused)
        if op.type == "ok":
            consumer.last[key] = pairs[-1]
            consumer.rebalanced.discard(key)
