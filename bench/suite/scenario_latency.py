"""Scenario 3, end-to-end latency at steady rates (1,000, 5,000 and 50,000 records/s by default).

A sender process schedules record i at t0 + i / rate and, when it wakes late, sends every record
that is due at once; each value carries its *scheduled* time (CLOCK_MONOTONIC, one clock on one
host), and the receiver process charges each record from that scheduled time to its arrival. A
stall therefore counts against every record it delayed (no coordinated omission). The first
`warmup` seconds of records are not counted. Percentiles come from an HDR histogram.
"""

from __future__ import annotations

from typing import Any, Final

from bench.suite.common import START_TIMEOUT_S, Children

NAME: Final = "latency"


def run(system: str, server: Any, topic: str, *, rate: int, value_bytes: int,
        duration_s: float, warmup_s: float, scratch: Any, send_limit_s: float | None = None,
        grace_s: float = 30.0) -> dict[str, Any]:
    """One run; with `send_limit_s` the sender stops sending then (what is unsent is lost), and
    the receiver waits `grace_s` past the schedule's end for what is still on its way."""
    total = round(rate * (duration_s + warmup_s))
    spec = {"endpoint": server.endpoint, "topic": topic, "rate": rate, "total": total,
            "warmup_records": round(rate * warmup_s), "value_bytes": value_bytes,
            "acks": 1, "deadline_s": duration_s + warmup_s + grace_s,
            "send_limit_s": send_limit_s}
    children = Children(scratch)
    try:
        children.start(system, "latency_receive", spec)
        children.start(system, "latency_send", spec)
        children.wait_ready(START_TIMEOUT_S)
        children.go()
        receiver, sender = children.results(timeout_s=duration_s + warmup_s + grace_s + 60)
    finally:
        children.kill()
    return {**receiver, "expected": total, "lost": total - receiver["records"],
            "sender_late_us_max": sender["sender_late_us_max"], "rate": rate}
