"""Where a zlog consumer's first record comes from: the tests of deleted records ask it."""

from __future__ import annotations

import time

from zlog.client import Consumer, TopicPartition


def first_offset_read(bootstrap: str, tp: TopicPartition, from_offset: int, *,
                      reset: str = "earliest", timeout_s: float = 30.0) -> int:
    """The offset of the first record a consumer positioned at `from_offset` reads, with
    `reset` as its auto_offset_reset (a position below the log start is out of range: "none"
    raises OFFSET_OUT_OF_RANGE from poll)."""
    with Consumer(bootstrap, auto_offset_reset=reset, fetch_max_wait_ms=100,
                  request_timeout_ms=int(timeout_s * 1000)) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, from_offset)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            records = consumer.poll(200)
            if records:
                return records[0].offset
    raise AssertionError(f"nothing read from {tp} at {from_offset}")
