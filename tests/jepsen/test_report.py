"""The figures of a small history: counts, verdict, faults and unavailability."""

from __future__ import annotations

from dataclasses import replace

from tests.jepsen.histories import History
from zlog_jepsen.checker import check
from zlog_jepsen.history import nemesis_value
from zlog_jepsen.report import figures, summary_table

REQUIRED_KEYS = {"operations", "acked_writes", "acked_lost", "duplicates",
                 "inconsistent_offsets", "aborted_reads", "faults_injected",
                 "max_unavailability_ms"}


def _run() -> History:
    """Events are 1 ns apart in History; the times below are set to whole milliseconds."""
    h = History()
    h.send(0, 1, [(0, 10), (1, 11)])                                    # ok at event 1
    h.event("nemesis", "info", "nemesis", nemesis_value("kill", "start", node=2))
    h.send(0, 1, [(None, 12)], done="info", error="REQUEST_TIMED_OUT")
    h.event("nemesis", "info", "nemesis", nemesis_value("kill", "end"))
    h.send(0, 1, [(2, 13)])                                             # ok at event 7
    h.event("nemesis", "info", "nemesis", nemesis_value("partition", "start"))
    h.send(3, 1, [(None, 14)], done="fail", error="NOT_ENOUGH_REPLICAS")
    h.assign(1, [1]).poll(1, {1: [(0, 10), (1, 11), (2, 13)]})
    return h


def test_the_figures_of_a_small_run() -> None:
    h = _run()
    ms = 1_000_000
    history = [replace(e, time_ns=e.index * ms) for e in h.events]
    final = {1: [(0, 10), (1, 11), (2, 13)]}
    numbers = figures(history, check(history, final), final_read=True)
    assert set(numbers) >= REQUIRED_KEYS
    assert numbers["operations"] == 6
    assert (numbers["ok"], numbers["fail"], numbers["info"]) == (4, 1, 1)
    assert numbers["acked_writes"] == 3
    assert numbers["acked_lost"] == numbers["duplicates"] == 0
    assert numbers["faults_injected"] == 2
    assert numbers["faults_by_kind"] == {"kill": 1, "partition": 1}
    # ok sends complete at events 1 and 7; the history ends at event 14
    assert numbers["max_unavailability_ms"] == 7.0
    # kill starts at event 2, the next ok send is event 7; partition at 8, none after: end 14
    assert numbers["unavailability_after_fault_ms"] == {"kill": 5.0, "partition": 6.0}
    assert numbers["valid"] and numbers["anomalies"]["unseen"] == 0

    table = summary_table(numbers)
    assert "operations" in table and "verdict" in table and "valid" in table
    assert "  lost-acked-final" in table and "  after kill (ms)" in table


def test_the_wait_after_a_fault_is_the_slowest_key() -> None:
    """Key 2 goes on through the kill; key 1 stops until event 8: the wait is key 1's."""
    h = History()
    h.send(0, 1, [(0, 10)]).send(0, 2, [(0, 20)])                      # ok at events 1, 3
    h.event("nemesis", "info", "nemesis", nemesis_value("kill", "start", node=2))  # event 4
    h.send(1, 2, [(1, 21)])                                             # ok at event 6
    h.send(0, 1, [(1, 11)])                                             # ok at event 8
    ms = 1_000_000
    history = [replace(e, time_ns=e.index * ms) for e in h.events]
    numbers = figures(history, check(history, None), final_read=False)
    assert numbers["unavailability_after_fault_ms"] == {"kill": 4.0}
    assert numbers["unavailability_after_fault_samples_ms"] == {"kill": [4.0]}


def test_the_figures_name_what_failed_a_run() -> None:
    h = History().send(0, 1, [(0, 10)]).assign(1, [1]).poll(1, {1: [(0, 10)]})
    h.send(0, 1, [(1, 11)])
    history = h.events
    numbers = figures(history, check(history, {1: [(0, 10)]}), final_read=True)
    assert numbers["acked_lost"] == 1 and not numbers["valid"]
    assert numbers["failed_by"] == ["lost-acked-final"]
    assert "INVALID: lost-acked-final" in summary_table(numbers)
