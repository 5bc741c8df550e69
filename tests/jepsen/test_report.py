"""The figures of a small history: counts, verdict, faults and unavailability."""

from __future__ import annotations

from dataclasses import replace

from tests.jepsen.histories import History
from zlog_jepsen.checker import check
from zlog_jepsen.history import SendRecord, nemesis_value, send_ok_value, send_value
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
    # ok sends complete at events 1 and 7, the last send fails at event 10: the longest gap
    # is 1..7 (the events after 10, to 14, are no client waiting to write)
    assert numbers["max_unavailability_ms"] == 6.0
    # kill starts at event 2; key 1 is wanted from event 3 and ok at 7; partition at 8: key 3
    # wanted from event 9 and never ok: until the end, 14
    assert numbers["unavailability_after_fault_ms"] == {"kill": 4.0, "partition": 5.0}
    assert numbers["valid"] and numbers["anomalies"]["unseen"] == 0

    table = summary_table(numbers)
    assert "operations" in table and "verdict" in table and "valid" in table
    assert "  lost-acked-final" in table and "  after kill (ms)" in table


def test_the_wait_after_a_fault_is_the_slowest_wanted_key() -> None:
    """Key 1's send is in flight across the kill (event 3) and ok at event 8: 5 ms. Key 2 goes
    on (ok one event after its invoke); key 3 is first written long after: its idle time
    before is the workload's pace, not unavailability."""
    h = History()
    h.send(0, 3, [(0, 30)])                                             # events 0, 1
    h.event(0, "invoke", "send", send_value([(1, 10)]))                 # event 2
    h.event("nemesis", "info", "nemesis", nemesis_value("kill", "start", node=2))  # event 3
    h.send(1, 2, [(0, 20)])                                             # events 4, 5
    h.send(1, 2, [(1, 21)])                                             # events 6, 7
    h.event(0, "ok", "send", send_ok_value([SendRecord(1, 10, 0)]))      # event 8
    h.send(1, 2, [(2, 22)]).send(1, 2, [(3, 23)])                       # events 9-12
    h.send(1, 3, [(1, 31)])                                             # events 13, 14
    ms = 1_000_000
    history = [replace(e, time_ns=e.index * ms) for e in h.events]
    numbers = figures(history, check(history, None), final_read=False)
    assert numbers["unavailability_after_fault_ms"] == {"kill": 5.0}
    assert numbers["unavailability_after_fault_samples_ms"] == {"kill": [5.0]}


def test_the_figures_name_what_failed_a_run() -> None:
    h = History().send(0, 1, [(0, 10)]).assign(1, [1]).poll(1, {1: [(0, 10)]})
    h.send(0, 1, [(1, 11)])
    history = h.events
    numbers = figures(history, check(history, {1: [(0, 10)]}), final_read=True)
    assert numbers["acked_lost"] == 1 and not numbers["valid"]
    assert numbers["failed_by"] == ["lost-acked-final"]
    assert "INVALID: lost-acked-final" in summary_table(numbers)


def test_an_operators_actions_are_counted_and_are_no_faults() -> None:
    """A sole-ISR wipe's heal turns unclean election on and off (zlog_jepsen.sole_isr): the
    figures count each action; the fault count and its wait see only the wipe."""
    h = History().send(0, 1, [(0, 10)])
    h.event("nemesis", "info", "nemesis", nemesis_value("wipe-disk", "start", target=1))
    h.event("nemesis", "info", "nemesis", nemesis_value("wipe-disk", "observed", seen=[]))
    for action in ("unclean-election-on", "unclean-election-off"):
        h.event("nemesis", "info", "nemesis", nemesis_value("wipe-disk", "operator",
                                                            action=action, topics=["jepsen"]))
    h.event("nemesis", "info", "nemesis", nemesis_value("wipe-disk", "end", target=1))
    h.assign(1, [1]).poll(1, {1: [(0, 10)]})
    numbers = figures(h.events, check(h.events, {1: [(0, 10)]}), final_read=True)
    assert numbers["faults_injected"] == 1 and numbers["faults_by_kind"] == {"wipe-disk": 1}
    assert numbers["operator_actions"] == {"unclean-election-off": 1, "unclean-election-on": 1}
    assert "  unclean-election-on" in summary_table(numbers)
    assert figures(h.events[:2], check(h.events[:2]), final_read=False)[
        "operator_actions"] == {}
