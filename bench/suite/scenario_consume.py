"""Scenario 2, consume throughput from the beginning, in its own process.

The data is what the headline produce case (1 partition, acks=1, 1 producer) wrote for each value
size, read from offset 0: with record objects (zlog `poll`, Redis `XRANGE`, NATS `fetch`) and with
zlog's batch-level `poll_batches`. The clock runs from the go (consumer connected, position
known) to the last record of the first `records` (capped by --consume-max-records).
"""

from __future__ import annotations

from typing import Any, Final

from bench.suite.adapters import NOT_APPLICABLE
from bench.suite.common import run_children

NAME: Final = "consume"
MODES: Final = ("records", "batches")
MB: Final = 1_000_000


def skip_reason(system: str, mode: str) -> str | None:
    if (system, "consume") in NOT_APPLICABLE:
        return NOT_APPLICABLE[(system, "consume")]
    if mode == "batches" and (system, "batches") in NOT_APPLICABLE:
        return NOT_APPLICABLE[(system, "batches")]
    return None


def run(system: str, server: Any, topic: str, mode: str, *, value_bytes: int, records: int) -> (
    dict[str, Any]
):
    spec = {"endpoint": server.endpoint, "topic": topic, "mode": mode, "records": records,
            "value_bytes": value_bytes}
    [result] = run_children([(system, "consume", spec)], timeout_s=300)
    elapsed_s = (result["end_ns"] - result["start_ns"]) / 1e9
    per_s = result["records"] / elapsed_s
    return {"records": result["records"], "wanted": records, "elapsed_s": elapsed_s,
            "records_per_s": per_s, "mb_per_s": per_s * value_bytes / MB}
