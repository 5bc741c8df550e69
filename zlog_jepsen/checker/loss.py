"""Writes that vanished, reads of writes that never were, and writes nobody read.

- lost-write (Jepsen's definition): a value sits, in its key's version order, at or before
  the furthest position any ok read reached, its send must have happened, and no ok read
  returned it.
- lost-acked-final: after the run, an acknowledged value (or an indefinite one somebody read)
  is missing from the final full read, or sits at another offset than it was acknowledged at.
- phantom-read: an ok poll returned a value that the final full read does not hold: it was
  served from above the high watermark and then truncated away.
- aborted-read: a read returned a value whose send failed definitely.
- unseen: values acknowledged to ok sends that no ok poll of the history returned.

A value that retention may have deleted as it is allowed to (`Derived.retained_away`,
zlog_jepsen.checker.retention) is excused from lost-write, lost-acked-final when it is
missing (not when it sits at another offset), phantom-read and unseen: counted as allowed.
"""

from __future__ import annotations

from collections import defaultdict

from zlog_jepsen.checker.anomaly import Anomaly, Findings
from zlog_jepsen.checker.derived import Derived

FINAL_READ = "final"
"""How an example names the final full read where it names an operation's index."""


def find_lost_writes(derived: Derived, findings: Findings) -> None:
    for key, order in sorted(derived.orders.items()):
        read = derived.ok_read.get(key, set())
        reached = [(order.first_index[v], v) for v in read if v in order.first_index]
        if not reached:
            continue
        bound, furthest = max(reached)
        for value, last in sorted(order.last_index.items(), key=lambda item: item[1]):
            writer = derived.writer_of.get(key, {}).get(value)
            if (last <= bound and value not in read and writer is not None
                    and derived.must_have_committed(writer)):
                if derived.retained_away(key, value):
                    findings.allow(Anomaly.LOST_WRITE)
                    continue
                findings.add(Anomaly.LOST_WRITE, {
                    "key": key, "value": value, "index": last, "writer": writer.index,
                    "max_read_index": bound, "max_read_by": _reader(derived, key, furthest),
                })


def find_lost_after_final_read(derived: Derived, findings: Findings) -> None:
    if derived.final is None:
        return
    final_offsets: dict[int, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    for key, pairs in derived.final.items():
        for offset, value in pairs:
            final_offsets[key][value].add(offset)
    for op in derived.ops:
        if op.type == "fail":
            continue
        for record in op.writes:
            if op.type == "info" and record.value not in derived.readers_of.get(record.key, {}):
                continue
            found = final_offsets[record.key].get(record.value, set())
            if not found and derived.retained_away(record.key, record.value, record.offset):
                findings.allow(Anomaly.LOST_ACKED_FINAL)
            elif not found or (record.offset is not None and record.offset not in found):
                findings.add(Anomaly.LOST_ACKED_FINAL, {
                    "key": record.key, "value": record.value, "offset": record.offset,
                    "found_at": sorted(found), "writer": op.index,
                })
    for key, readers in sorted(derived.readers_of.items()):
        for value, ops in sorted(readers.items()):
            ok_readers = [op for op in ops if op.type == "ok"]
            if not ok_readers or value in final_offsets[key]:
                continue
            if derived.retained_away(key, value):
                findings.allow(Anomaly.PHANTOM_READ)
            else:
                findings.add(Anomaly.PHANTOM_READ, {
                    "key": key, "value": value, "reader": ok_readers[0].index,
                })


def find_aborted_reads(derived: Derived, findings: Findings) -> None:
    for key, values in sorted(derived.ok_read.items()):
        for value in sorted(values):
            writer = derived.writer_of.get(key, {}).get(value)
            if writer is not None and writer.type == "fail":
                findings.add(Anomaly.ABORTED_READ, {
                    "key": key, "value": value, "writer": writer.index,
                    "reader": _reader(derived, key, value),
                })


def find_unseen(derived: Derived, findings: Findings) -> None:
    sent: dict[int, dict[int, int | None]] = defaultdict(dict)  # key -> value -> its offset
    polled: dict[int, set[int]] = defaultdict(set)
    for op in derived.ops:
        if op.type != "ok":
            continue
        for record in op.writes:
            sent[record.key][record.value] = record.offset
        for key, pairs in op.reads.items():
            polled[key].update(value for _, value in pairs)
    for key in sorted(sent):
        missing = sorted(set(sent[key]) - polled[key])
        unseen = [v for v in missing if not derived.retained_away(key, v, sent[key][v])]
        if len(unseen) < len(missing):
            findings.allow(Anomaly.UNSEEN, len(missing) - len(unseen))
        if unseen:
            findings.add(Anomaly.UNSEEN, {"key": key, "count": len(unseen), "values": unseen},
                         count=len(unseen))


def _reader(derived: Derived, key: int, value: int) -> int | str:
    """The first ok poll that read the value, or the final read."""
    for op in derived.readers_of.get(key, {}).get(value, []):
        if op.type == "ok":
            return op.index
    return FINAL_READ
