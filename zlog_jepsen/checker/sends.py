"""A producer whose records landed out of order, or a batch that did not land whole.

Per process, each ok or info send's first value of k must sit after the last value that
process's previous send put in k (nonmonotonic-send). Within one send, consecutive values of
k must be adjacent (int-send-skip: another write landed between them; int-nonmonotonic-send:
they landed backwards), and with a final full read, a send's values of k must be all present
or all absent (batch-tear).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

from zlog_jepsen.checker.anomaly import Anomaly, Findings
from zlog_jepsen.checker.derived import Derived, jump_delta, jump_example, report_jump
from zlog_jepsen.history import Process


def find_send_anomalies(derived: Derived, findings: Findings) -> None:
    last_sent: dict[Process, dict[int, tuple[int | None, int]]] = defaultdict(dict)
    final_values = {k: {v for _, v in pairs} for k, pairs in (derived.final or {}).items()}
    for op in derived.ops:
        if op.f != "send":
            continue
        for key in sorted({r.key for r in op.writes}):
            records = [(r.offset, r.value) for r in op.writes if r.key == key]
            values = [value for _, value in records]
            order = derived.order(key)
            if derived.final is not None:
                present = [v for v in values if v in final_values.get(key, ())]
                missing = [(o, v) for o, v in records if v not in present]
                torn = bool(present) and bool(missing)
                if torn and all(derived.retained_away(key, v, o) for o, v in missing):
                    findings.allow(Anomaly.BATCH_TEAR)
                elif torn:
                    findings.add(Anomaly.BATCH_TEAR, {
                        "key": key, "values": values, "present": present, "op": op.index,
                    })
            if op.type == "fail":
                continue
            before = last_sent[op.process].get(key)
            if before is not None and jump_delta(order, (before, records[0])) < 1:
                findings.add(Anomaly.NONMONOTONIC_SEND,
                             jump_example(order, op, key, (before, records[0])))
            for jump in pairwise(records):
                report_jump(findings, (Anomaly.INT_SEND_SKIP, Anomaly.INT_NONMONOTONIC_SEND),
                            order, op, key=key, jump=jump)
            last_sent[op.process][key] = records[-1]
