"""A consumer group's committed positions: they must not go back, and must not be skipped.

- committed-offset-regression: what an OffsetFetch answers for (group, k) is below what an
  earlier ok commit or OffsetFetch established, with no commit of a lower offset invoked in
  between (an explicit rewind); or an ok commit points past every record k ever held (a
  commit above the high watermark).
- group-skip: a consumer of the group, on its first poll of k after subscribing or after a
  rebalance gave it k, starts past the group's committed position with records in between:
  those records were consumed by nobody. Starting before it is re-delivery, allowed; so is
  starting past records all below the log start when that poll ended (retention deleted
  them, and the member started again at the log start: zlog_jepsen.checker.retention).

Indefinite commits count as possibly applied: they may lower the floor and raise the
position a new owner may start from, never the other way, so ambiguity cannot fail a run.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from zlog_jepsen.checker.anomaly import Anomaly, Findings
from zlog_jepsen.checker.derived import Derived
from zlog_jepsen.checker.ops import Op
from zlog_jepsen.history import Event, Process, offsets

GroupKey = tuple[str | None, int]


@dataclass
class _Member:
    subscribed: bool = False
    group: str | None = None
    seen: set[int] = field(default_factory=set)


@dataclass
class _Commits:
    floor: dict[GroupKey, int] = field(default_factory=dict)
    position: dict[GroupKey, int] = field(default_factory=dict)
    in_flight: dict[int, dict[GroupKey, int]] = field(default_factory=dict)
    reads: dict[int, dict[GroupKey, int]] = field(default_factory=dict)

    def invoked(self, op: Op, event: Event) -> None:
        if op.f == "committed":
            self.reads[op.invoke.index] = dict(self.floor)
            return
        wanted = {(event.group, k): o for k, o in offsets(event).items()}
        self.in_flight[op.invoke.index] = wanted
        for gk, o in wanted.items():
            self.position[gk] = max(self.position.get(gk, o), o)
            for floors in (self.floor, *self.reads.values()):
                if gk in floors and o < floors[gk]:
                    floors[gk] = o  # an explicit rewind: lower values are legitimate now

    def established(self, gk: GroupKey, offset: int) -> None:
        """An ok commit or read showed `offset`; only a commit still in flight may undercut it."""
        undercut = [o for c in self.in_flight.values() for k, o in c.items() if k == gk]
        self.floor[gk] = min([max(self.floor.get(gk, offset), offset), *undercut])


def find_group_anomalies(derived: Derived, findings: Findings) -> None:
    commits = _Commits()
    members: dict[Process, _Member] = defaultdict(_Member)
    steps = [(op.invoke.index, op, op.invoke) for op in derived.ops]
    steps += [(op.completion.index, op, op.completion) for op in derived.ops if op.completion]
    for _, op, event in sorted(steps, key=lambda step: step[0]):
        if event.type == "invoke":
            if op.f in ("commit", "committed"):
                commits.invoked(op, event)
            continue
        if op.f == "commit":
            _commit_completed(derived, findings, commits, op, event)
        elif op.f == "committed":
            _fetch_completed(findings, commits, op, event)
        elif op.f == "poll":
            _poll_completed(derived, findings, commits,
                            member=members[op.process], op=op, event=event)
        elif op.f in ("subscribe", "assign") and op.type != "fail":
            members[op.process] = _Member(op.f == "subscribe", event.group)
        elif op.f == "crash":
            members[op.process] = _Member()


def _commit_completed(derived: Derived, findings: Findings, commits: _Commits,
                      op: Op, event: Event) -> None:
    commits.in_flight.pop(op.invoke.index, None)
    if op.type != "ok":
        return
    for key, offset in offsets(event).items():
        commits.established((event.group, key), offset)
        held = derived.order(key).values_at
        end = max(held) + 1 if held else 0
        if offset > end:
            findings.add(Anomaly.COMMITTED_OFFSET_REGRESSION, {
                "group": event.group, "key": key, "offset": offset, "log_end": end,
                "why": "a commit above every offset the partition ever held", "op": op.index,
            })


def _fetch_completed(findings: Findings, commits: _Commits, op: Op, event: Event) -> None:
    floors = commits.reads.pop(op.invoke.index, {})
    if op.type != "ok":
        return
    for key, offset in offsets(event).items():
        gk = (event.group, key)
        if gk in floors and offset < floors[gk]:
            findings.add(Anomaly.COMMITTED_OFFSET_REGRESSION, {
                "group": event.group, "key": key, "offset": offset, "floor": floors[gk],
                "why": "the committed offset went back", "op": op.index,
            })
        commits.established(gk, offset)


def _poll_completed(derived: Derived, findings: Findings, commits: _Commits, *,
                    member: _Member, op: Op, event: Event) -> None:
    for moved in event.rebalance_log:
        member.seen.difference_update(moved)
    if not member.subscribed:
        return
    for key, pairs in sorted(op.reads.items()):
        if not pairs or key in member.seen:
            continue
        member.seen.add(key)
        committed = commits.position.get((member.group, key))
        first = pairs[0][0]
        if committed is None or first <= committed:
            continue
        order = derived.order(key)
        offsets = [o for o in sorted(order.values_at) if committed <= o < first]
        skipped = [min(order.values_at[o]) for o in offsets]
        if skipped and all(o < derived.log_starts.floor_at(key, event.time_ns) for o in offsets):
            findings.allow(Anomaly.GROUP_SKIP)
        elif skipped:
            findings.add(Anomaly.GROUP_SKIP, {
                "group": member.group, "key": key, "committed": committed,
                "first_offset": first, "skipped": skipped, "process": op.process,
                "op": op.index,
            })
