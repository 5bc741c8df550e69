"""The quota meter (zlog/broker/quotas.py): answers are held so that use over time is the
quota's rate, after one burst; a default quota meters each entity on its own."""

from __future__ import annotations

from zlog.broker.quotas import BURST_MS, QuotaMeter
from zlog.transport.messages.security import QuotaEntry


def test_use_within_the_burst_is_not_held_and_beyond_it_is_held_to_the_rate() -> None:
    meter = QuotaMeter((QuotaEntry("principal", "alice", produce_bytes_per_s=1_000),))
    now_ms = 10_000
    assert meter.record("alice", "", "produce_bytes_per_s", 1_000, now_ms) == 0  # one burst
    assert meter.record("alice", "", "produce_bytes_per_s", 500, now_ms) == 500
    assert meter.record("alice", "", "produce_bytes_per_s", 500, now_ms) == 1_000


def test_a_steady_sender_that_waits_for_its_answers_gets_exactly_the_rate() -> None:
    meter = QuotaMeter((QuotaEntry("principal", "alice", produce_bytes_per_s=10_000),))
    now_ms, sent = 0, 0
    while now_ms < 60_000:
        now_ms += meter.record("alice", "", "produce_bytes_per_s", 1_000, now_ms)
        sent += 1_000
    assert abs(sent - 10_000 * (60 + BURST_MS / 1000)) <= 1_000


def test_no_quota_no_hold_and_the_principal_s_own_quota_comes_first() -> None:
    meter = QuotaMeter((QuotaEntry("principal", "*", requests_per_s=1),
                        QuotaEntry("principal", "alice", requests_per_s=1_000)))
    assert meter.record("bob", "", "produce_bytes_per_s", 10**9, 0) == 0  # no byte quota
    for _ in range(1_000):
        assert meter.record("alice", "", "requests_per_s", 1, 0) == 0
    meter.record("bob", "", "requests_per_s", 1, 0)
    assert meter.record("bob", "", "requests_per_s", 1, 0) == 1_000
    assert meter.record("carol", "", "requests_per_s", 1, 0) == 0  # metered on her own
