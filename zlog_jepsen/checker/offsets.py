"""Two values at one offset (inconsistent-offset), and one value at two offsets (duplicate).

The first means two replicas disagreed about the log and readers saw both versions; the
second means a write was appended twice, which idempotent producers exist to prevent.
"""

from __future__ import annotations

from zlog_jepsen.checker.anomaly import Anomaly, Findings
from zlog_jepsen.checker.derived import Derived


def find_offset_anomalies(derived: Derived, findings: Findings) -> None:
    for key, order in sorted(derived.orders.items()):
        for offset, values in sorted(order.values_at.items()):
            if len(values) > 1:
                findings.add(Anomaly.INCONSISTENT_OFFSET, {
                    "key": key, "offset": offset, "index": order.index_of_offset[offset],
                    "values": sorted(values),
                })
        for value, offsets in sorted(order.offsets_of.items()):
            if len(offsets) > 1:
                findings.add(Anomaly.DUPLICATE, {
                    "key": key, "value": value, "offsets": sorted(offsets),
                })
