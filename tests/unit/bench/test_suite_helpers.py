"""The side-by-side suite's pure helpers: the open-loop schedule, spreads, CPU shares."""

from __future__ import annotations

import time

import numpy as np
import pytest

from bench.suite.common import Schedule, due_count, stamped
from bench.suite.machine import cpu_share
from bench.suite.scenario_curve import fell_over


def test_due_count_follows_the_clock_not_the_sender() -> None:
    t0, interval, total = 1_000, 100, 10
    assert due_count(999, t0, interval, total) == 0
    assert due_count(1_000, t0, interval, total) == 1
    assert due_count(1_250, t0, interval, total) == 3  # a late sender owes every due record
    assert due_count(10**9, t0, interval, total) == total


def test_a_schedule_hands_out_every_record_once_in_order() -> None:
    """Each record is due once, in order; one already late (t0 in the past) comes at once with
    every other record due by then, and the lateness is noted."""
    start_ns = time.monotonic_ns()
    schedule = Schedule(t0_ns=start_ns - 5_000_000, interval_ns=1_000_000, total=8)
    handed = [list(due) for due in schedule.due()]
    assert [i for due in handed for i in due] == list(range(8))
    assert len(handed[0]) >= 6  # records 0..5 were due before the first look
    assert schedule.late_ns_max >= 5_000_000
    assert schedule.scheduled_ns(3) == start_ns - 2_000_000


def test_stamp_is_the_scheduled_time_little_endian() -> None:
    value = stamped(123_456_789, b"x" * 92)
    assert len(value) == 100
    assert np.frombuffer(value[:8], "<i8")[0] == 123_456_789


def test_cpu_share_counts_steal_and_busy() -> None:
    before = {"user": 0, "nice": 0, "system": 0, "idle": 0, "iowait": 0, "irq": 0,
              "softirq": 0, "steal": 0}
    after = before | {"user": 50, "idle": 40, "steal": 10}
    assert cpu_share(before, after) == {"steal": 0.1, "busy": 0.5}
    assert cpu_share(before, before) == {"steal": None, "busy": None}


def test_spread_and_percentiles() -> None:
    histogram_module = pytest.importorskip("bench.suite.histogram")
    stats = histogram_module.spread([3.0, None, 1.0, 2.0])
    assert (stats["median"], stats["min"], stats["max"]) == (2.0, 1.0, 3.0)
    assert histogram_module.spread([None])["median"] is None
    histogram = histogram_module.new_histogram()
    histogram_module.record_ns(histogram, np.arange(1, 1001, dtype=np.int64) * 1000)
    summary = histogram_module.summary(histogram)
    assert summary["samples"] == 1000
    assert summary["p50_us"] == pytest.approx(500, rel=0.01)
    assert summary["max_us"] == pytest.approx(1000, rel=0.01)


def test_a_curve_step_falls_over_on_backlog_loss_or_a_slow_p99() -> None:
    held = {"expected": 10_000, "lost": 0, "sender_late_us_max": 900_000.0, "p99_us": 999_999.0}
    assert fell_over(held) is None
    assert "behind" in str(fell_over(held | {"sender_late_us_max": 1_000_001.0}))
    assert "arrived" in str(fell_over(held | {"lost": 11}))
    assert fell_over(held | {"lost": 10}) is None  # 99.9% delivered is enough
    assert "p99" in str(fell_over(held | {"p99_us": 1_000_001.0}))
    assert "failed" in str(fell_over({"error": "RuntimeError: no server"}))


def test_a_schedule_with_a_stop_hands_out_nothing_after_it() -> None:
    """A sender that cannot keep its rate stops at `stop_ns` and notes how far behind it was."""
    start_ns = time.monotonic_ns()
    schedule = Schedule(t0_ns=start_ns - 50_000_000, interval_ns=1_000_000, total=1_000,
                        stop_ns=start_ns - 1)
    assert [list(due) for due in schedule.due()] == []
    assert schedule.late_ns_max >= 50_000_000
