"""The harness's pure pieces: a send's outcome, a soak's totals, fault windows, CLI spans."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from zlog.errors import ErrorCode, ZlogError
from zlog_jepsen.__main__ import _kinds, _span, first_config, parser
from zlog_jepsen.client_adapter import SendResult, decode_value, encode_value
from zlog_jepsen.cluster import RunCluster
from zlog_jepsen.history import Event, nemesis_value
from zlog_jepsen.membership_faults import needs_spare
from zlog_jepsen.nemesis import _STARTS, FAULT_KINDS, Schedule
from zlog_jepsen.plots import completions, fault_windows
from zlog_jepsen.totals import totals
from zlog_jepsen.workload import send_outcome
from zlog_testbed.broker_process import REPO_ROOT

S = 1_000_000_000


def _result(error: BaseException | None) -> SendResult:
    return SendResult(0, 7, None if error else 3, error)


def test_a_send_is_ok_only_when_every_record_was_acknowledged() -> None:
    assert send_outcome([_result(None), _result(None)]) == ("ok", None)


def test_a_send_fails_only_when_every_record_failed_definitely() -> None:
    definite = ZlogError(ErrorCode.NOT_ENOUGH_REPLICAS, "2 of 3 in sync needed")
    assert send_outcome([_result(definite)]) == ("fail", "NOT_ENOUGH_REPLICAS")
    # one record of the send acknowledged: the send happened in part, so not a fail
    assert send_outcome([_result(None), _result(definite)])[0] == "info"


def test_a_timeout_or_an_indefinite_code_is_info() -> None:
    assert send_outcome([_result(TimeoutError())]) == ("info", "TimeoutError")
    timed_out = ZlogError(ErrorCode.REQUEST_TIMED_OUT, "no answer")
    assert send_outcome([_result(timed_out)]) == ("info", "REQUEST_TIMED_OUT")


def test_values_travel_as_decimal_digits() -> None:
    assert decode_value(encode_value(1234)) == 1234
    with pytest.raises(ValueError, match="without a value"):
        decode_value(None)


def _run_figures(ops: int, lost: int, unavailable_ms: float, *, valid: bool) -> dict[str, object]:
    return {"operations": ops, "ok": ops, "fail": 0, "info": 0, "acked_writes": ops,
            "acked_lost": lost, "duplicates": 0, "inconsistent_offsets": 0, "aborted_reads": 0,
            "faults_injected": 2, "anomalies": {"lost-write": lost},
            "faults_by_kind": {"kill-worker": 2},
            "operator_actions": {"unclean-election-on": 1},
            "unavailability_after_fault_ms": {"kill-worker": unavailable_ms},
            "unavailability_after_fault_samples_ms": {"kill-worker": [unavailable_ms, 1.0]},
            "max_unavailability_ms": unavailable_ms, "valid": valid,
            "failed_by": [] if valid else ["lost-write"]}


def test_totals_add_counts_and_keep_the_longest_unavailability() -> None:
    numbers = totals([_run_figures(10, 0, 900.0, valid=True),
                      _run_figures(5, 1, 300.0, valid=False)], minutes=20.0)
    assert (numbers["operations"], numbers["acked_lost"], numbers["runs"]) == (15, 1, 2)
    assert numbers["faults_by_kind"] == {"kill-worker": 4}
    assert numbers["operator_actions"] == {"unclean-election-on": 2}
    assert numbers["anomalies"] == {"lost-write": 1}
    assert numbers["max_unavailability_ms"] == 900.0
    assert numbers["unavailability_after_fault_ms"] == {"kill-worker": 900.0}
    assert numbers["unavailability_after_fault_percentiles_ms"] == {
        "kill-worker": {"count": 4, "p50": 1.0, "p99": 900.0, "max": 900.0}}
    assert not numbers["valid"] and numbers["failed_by"] == ["lost-write"]


def test_a_run_that_broke_makes_the_totals_invalid() -> None:
    numbers = totals([_run_figures(10, 0, 1.0, valid=True), {"valid": False}], minutes=1.0)
    assert numbers["operations"] == 10
    assert not numbers["valid"] and numbers["failed_by"] == ["the run broke"]


def _event(index: int, time_s: float, process: int | str, type_: str, f: str, *,
           value: object) -> Event:
    return Event(index, int(time_s * S), process, type_, f, value)  # type: ignore[arg-type]


def test_fault_windows_and_latencies_are_seconds_from_the_first_event() -> None:
    history = [
        _event(0, 100.0, 0, "invoke", "poll", value=[["poll"]]),
        _event(1, 101.0, "nemesis", "info", "nemesis", value=nemesis_value("kill-broker", "start")),
        _event(2, 100.5, 0, "ok", "poll", value=[["poll", {}]]),
        # what a heal observed and an operator did in between end no fault
        _event(3, 102.0, "nemesis", "info", "nemesis",
               value=nemesis_value("kill-broker", "observed", seen=[])),
        _event(4, 103.0, "nemesis", "info", "nemesis",
               value=nemesis_value("kill-broker", "operator", action="x")),
        _event(5, 104.0, "nemesis", "info", "nemesis", value=nemesis_value("kill-broker", "end")),
        _event(6, 105.0, "nemesis", "info", "nemesis", value=nemesis_value("one-way", "start")),
        _event(7, 106.0, 1, "invoke", "poll", value=[["poll"]]),
    ]
    assert fault_windows(history) == [(1.0, 4.0, "kill-broker"), (5.0, 6.0, "one-way")]
    assert completions(history) == [(0.5, 500.0, "ok", "poll")]


def test_a_schedule_names_known_faults_only() -> None:
    assert Schedule().kinds == FAULT_KINDS
    with pytest.raises(ValueError, match="not power-cut"):
        Schedule(kinds=("kill-worker", "power-cut"))


def test_every_fault_kind_has_a_start_a_row_in_the_catalogue_and_a_place_in_the_soak() -> None:
    """The fault catalogue (docs/reliability.md §9.3) names each kind the nemesis knows, once,
    and `make soak` runs every kind: it names none, and the default is all of them."""
    assert len(set(FAULT_KINDS)) == len(FAULT_KINDS) and set(_STARTS) == set(FAULT_KINDS)
    docs = (REPO_ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    catalogue = docs[docs.index("### 9.3 Fault kinds"):docs.index("### 9.4")]
    rows = re.findall(r"^\| `([a-z-]+)` \|", catalogue, flags=re.MULTILINE)
    assert sorted(rows) == sorted(FAULT_KINDS)
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    soak = makefile[makefile.index("\nsoak:"):].split("\n\n")[0]
    assert soak.count("-m zlog_jepsen") == 2 and "--faults" not in soak, soak
    assert first_config(parser().parse_args([])).schedule.kinds == FAULT_KINDS


def test_a_schedule_with_membership_faults_gets_a_spare_broker_that_never_votes(
        tmp_path: Path) -> None:
    assert needs_spare(("kill-worker", "one-way")) == 0
    assert needs_spare(("kill-worker", "drain")) == 1
    cluster = RunCluster(3, tmp_path, spares=needs_spare(("reassign",)))
    try:
        assert sorted(cluster.brokers) == [1, 2, 3, 4] and cluster.spares == (4,)
        voters = {node: broker.extra_args[broker.extra_args.index("--voters") + 1]
                  for node, broker in cluster.brokers.items() if "--voters" in broker.extra_args}
        assert sorted(voters) == [1, 2, 3]
        assert all(v.startswith("1@") and "4@" not in v for v in voters.values()), voters
        spare = cluster.brokers[4].extra_args
        assert spare[spare.index("--join") + 1] == cluster.advertised[1]
    finally:
        cluster.close()


def test_the_command_line_refuses_bad_spans_and_kinds() -> None:
    assert _span("3,8") == (3.0, 8.0)
    assert _span("5") == (5.0, 5.0)
    with pytest.raises(argparse.ArgumentTypeError, match="LOW <= HIGH"):
        _span("8,3")
    assert _kinds("kill-worker,one-way") == ("kill-worker", "one-way")
    with pytest.raises(argparse.ArgumentTypeError, match="not sigint"):
        _kinds("kill-worker,sigint")
