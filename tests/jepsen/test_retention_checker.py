"""What the checker excuses as deleted by retention, and what it still calls lost.

Key 1 throughout; values 10, 11, 12, ... at offsets 0, 1, 2, ... Events are one nanosecond
apart from 1000 (tests/jepsen/histories.py), and the leaders' answers (log start, high
watermark) are stamped on the same clock, with no margin unless a test says so.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.jepsen.histories import History
from zlog.transport.messages.data import ListOffsetsResult
from zlog_jepsen.checker import Anomaly, CheckResult, check
from zlog_jepsen.checker.retention import LogStarts, LogStartSample
from zlog_jepsen.history import FinalRead, HistoryFormatError
from zlog_jepsen.log_start_watch import answer_lines, read_log_start_samples


def _at(h: History) -> int:
    """The time of the next event."""
    return 1_000 + len(h.events)


def _answer(at_ns: int, log_start: int, high_watermark: int, leader: int = 1,
            key: int = 1) -> LogStartSample:
    return LogStartSample(at_ns, at_ns, key, leader, log_start, high_watermark)


def _starts(*samples: LogStartSample, margin_ns: int = 0) -> LogStarts:
    return LogStarts(samples, margin_ns=margin_ns)


def _written(count: int) -> History:
    """`count` acknowledged sends by process 0, then process 1 assigned to key 1."""
    h = History()
    for offset in range(count):
        h.send(0, 1, [(offset, 10 + offset)])
    return h.assign(1, [1])


def _anomalies(result: CheckResult) -> dict[Anomaly, int]:
    return {a: n for a, n in result.counts.items() if n}


def _drained(h: History, final: FinalRead) -> History:
    """The final read in the history too, as the harness's drain records it."""
    return h.assign(9, list(final), seek=True).poll(9, final)


def test_acknowledged_records_below_the_log_start_missing_from_the_final_read_are_excused(
) -> None:
    h = _written(5)
    starts = _starts(_answer(_at(h), 3, 5))
    final: FinalRead = {1: [(3, 13), (4, 14)]}
    result = check(_drained(h, final).events, final, log_starts=starts)
    assert result.valid and not _anomalies(result), result.to_json()
    assert result.allowed[Anomaly.LOST_ACKED_FINAL] == 3
    assert result.allowed[Anomaly.UNSEEN] == 3  # nobody polled 10-12 before they went
    # the twin: the log start the leader answered was lower, so 12 was no retention's
    twin = check(h.events, final, log_starts=_starts(_answer(_at(h), 2, 5)))
    assert twin.counts[Anomaly.LOST_ACKED_FINAL] == 1
    assert twin.examples[Anomaly.LOST_ACKED_FINAL][0]["value"] == 12
    # and without answers nothing is excused
    assert check(h.events, final).counts[Anomaly.LOST_ACKED_FINAL] == 3


def test_a_record_above_the_floor_missing_while_later_ones_are_there_is_lost() -> None:
    h = _written(5)
    result = check(h.events, {1: [(2, 12), (4, 14)]}, log_starts=_starts(_answer(_at(h), 2, 5)))
    assert result.failed_by == (Anomaly.LOST_WRITE, Anomaly.LOST_ACKED_FINAL), result.to_json()
    assert [e["value"] for e in result.examples[Anomaly.LOST_ACKED_FINAL]] == [13]
    assert [e["value"] for e in result.examples[Anomaly.LOST_WRITE]] == [13]


def test_a_record_found_at_another_offset_is_never_excused() -> None:
    h = _written(3)
    result = check(h.events, {1: [(2, 10)]}, log_starts=_starts(_answer(_at(h), 2, 3)))
    assert Anomaly.LOST_ACKED_FINAL in result.failed_by, result.to_json()


def test_a_record_replaced_at_its_offset_is_lost_even_below_the_log_start() -> None:
    """11 was acknowledged at 1, a reader then saw 21 there (the log was truncated and written
    again), and retention later deleted both: truncation lost 11, not retention, and which
    of the two retention deleted cannot be told, so neither is excused."""
    h = _written(3).send(2, 1, [(None, 21)], done="info").poll(1, {1: [(1, 21)]})
    h.send(0, 1, [(3, 13)])
    final: FinalRead = {1: [(3, 13)]}
    starts = _starts(_answer(_at(h), 3, 4))
    _drained(h, final)
    result = check(h.events, final, log_starts=starts)
    assert result.counts[Anomaly.INCONSISTENT_OFFSET] == 1, result.to_json()
    assert [e["value"] for e in result.examples[Anomaly.LOST_ACKED_FINAL]] == [11, 21]
    assert result.allowed[Anomaly.LOST_ACKED_FINAL] == 2  # 10 and 12 went as they may
    assert [e["value"] for e in result.examples[Anomaly.PHANTOM_READ]] == [21]


def test_a_log_start_past_the_hw_is_an_anomaly_and_what_it_deleted_is_lost() -> None:
    """The leader deleted 2 and 3 while its HW was 2; they were acknowledged after."""
    h = _written(2)
    past = _answer(_at(h), 4, 2)
    h.send(0, 1, [(2, 12)]).send(0, 1, [(3, 13)]).send(0, 1, [(4, 14)])
    final: FinalRead = {1: [(4, 14)]}
    before_final = _answer(_at(h), 4, 5)
    _drained(h, final)
    result = check(h.events, final, log_starts=_starts(past, before_final))
    assert result.counts[Anomaly.LOG_START_PAST_HW] == 1, result.to_json()
    example = result.examples[Anomaly.LOG_START_PAST_HW][0]
    assert example["log_start"] == [4, 4] and example["high_watermark"] == [2, 2]
    assert example["acked_values_deleted"] == [12, 13] and example["answers"] == 1
    assert [e["value"] for e in result.examples[Anomaly.LOST_ACKED_FINAL]] == [12, 13]
    assert [e["value"] for e in result.examples[Anomaly.LOST_WRITE]] == [12, 13]
    assert result.allowed[Anomaly.LOST_ACKED_FINAL] == 2  # 10 and 11 went as they may
    assert set(result.failed_by) == {Anomaly.LOST_WRITE, Anomaly.LOST_ACKED_FINAL,
                                     Anomaly.LOG_START_PAST_HW}
    # the twin: the same deletion once the HW covered it
    fine = check(h.events, final, log_starts=_starts(_answer(past.asked_ns, 4, 4),
                                                     before_final))
    assert fine.valid and not _anomalies(fine), fine.to_json()


def test_consecutive_answers_past_the_hw_are_one_episode_per_leader() -> None:
    answers = [_answer(1, 3, 2), _answer(2, 4, 2), _answer(3, 4, 2, leader=2),
               _answer(4, 4, 4), _answer(5, 6, 5)]
    result = check([], log_starts=_starts(*answers))
    assert result.counts[Anomaly.LOG_START_PAST_HW] == 3
    assert [e["answers"] for e in result.examples[Anomaly.LOG_START_PAST_HW]] == [2, 1, 1]


def test_a_phantom_read_and_a_lost_write_below_the_log_start_are_excused() -> None:
    h = _written(4).poll(1, {1: [(0, 10)]})
    h.poll(2, {1: [(3, 13)]})  # a consumer that started late: 11 and 12 read by nobody
    final: FinalRead = {1: [(3, 13)]}
    strict = check(h.events, final)
    assert strict.counts[Anomaly.PHANTOM_READ] == 1 and strict.counts[Anomaly.LOST_WRITE] == 2
    result = check(h.events, final, log_starts=_starts(_answer(_at(h), 3, 4)))
    assert result.valid and not _anomalies(result), result.to_json()
    assert result.allowed[Anomaly.PHANTOM_READ] == 1
    assert result.allowed[Anomaly.LOST_WRITE] == 2


def test_a_poll_skip_over_records_below_the_log_start_then_is_excused() -> None:
    """Process 1 read 10, retention deleted 11 and 12, and its next poll started at 13."""
    h = _written(5).poll(1, {1: [(0, 10)]})
    deleted = _answer(_at(h), 3, 5)
    h.poll(1, {1: [(3, 13), (4, 14)]})
    final: FinalRead = {1: [(3, 13), (4, 14)]}
    result = check(h.events, final, log_starts=_starts(deleted))
    assert result.valid and not _anomalies(result), result.to_json()
    assert result.allowed[Anomaly.POLL_SKIP] == 1


def test_a_poll_skip_over_records_deleted_only_later_is_not() -> None:
    h = _written(5).poll(1, {1: [(0, 10)]}).poll(1, {1: [(3, 13), (4, 14)]})
    polled = _at(h) - 1
    # answered 1 and 3 after the poll ended: the log start moved past 12 only 6 after it
    answers = (_answer(polled + 1, 0, 5), _answer(polled + 3, 0, 5), _answer(polled + 6, 3, 5))
    final: FinalRead = {1: [(3, 13), (4, 14)]}
    result = check(h.events, final, log_starts=_starts(*answers, margin_ns=2))
    assert result.failed_by == (Anomaly.POLL_SKIP,), result.to_json()
    assert result.examples[Anomaly.POLL_SKIP][0]["skipped"] == [11, 12]
    # with a margin that reaches past the second answer, the third one excuses it
    lenient = check(h.events, final, log_starts=_starts(*answers, margin_ns=3))
    assert lenient.valid and lenient.allowed[Anomaly.POLL_SKIP] == 1, lenient.to_json()


def test_a_skip_within_one_poll_and_a_group_member_past_its_commit_are_excused() -> None:
    h = _written(5)
    deleted = _answer(_at(h), 3, 5)
    h.poll(1, {1: [(0, 10), (3, 13)]})  # a reset inside one poll
    h.subscribe(2, [1]).poll(2, {1: [(0, 10)]}).commit(2, {1: 1})
    h.subscribe(3, [1]).poll(3, {1: [(3, 13), (4, 14)]})
    result = check(h.events, {1: [(3, 13), (4, 14)]}, log_starts=_starts(deleted))
    assert result.valid and not _anomalies(result), result.to_json()
    assert result.allowed[Anomaly.INT_POLL_SKIP] == 1
    assert result.allowed[Anomaly.GROUP_SKIP] == 1
    strict = check(h.events, {1: [(3, 13), (4, 14)]})
    assert strict.counts[Anomaly.INT_POLL_SKIP] == 1 and strict.counts[Anomaly.GROUP_SKIP] == 1


def test_a_step_back_is_never_excused_by_retention() -> None:
    h = _written(3).poll(1, {1: [(1, 11), (2, 12)]}).poll(1, {1: [(1, 11)]})
    result = check(h.events, {1: [(1, 11), (2, 12)]}, log_starts=_starts(_answer(_at(h), 1, 3)))
    assert result.failed_by == (Anomaly.NONMONOTONIC_POLL,), result.to_json()


def test_a_batch_torn_only_by_retention_is_excused() -> None:
    h = History().send(0, 1, [(0, 10), (1, 11)]).send(0, 1, [(2, 12)])
    final: FinalRead = {1: [(1, 11), (2, 12)]}
    assert check(h.events, final).counts[Anomaly.BATCH_TEAR] == 1
    result = check(h.events, final, log_starts=_starts(_answer(_at(h), 1, 3)))
    assert result.valid and result.allowed[Anomaly.BATCH_TEAR] == 1, result.to_json()


def test_the_floor_at_a_time_is_the_highest_log_start_up_to_the_first_answer_after_it() -> None:
    starts = _starts(_answer(10, 2, 9), _answer(20, 5, 9), _answer(30, 4, 9),
                     _answer(40, 8, 9), margin_ns=5)
    assert [starts.floor_at(1, t) for t in (0, 4, 5, 14, 15, 24, 34, 100)] == [
        2, 2, 5, 5, 5, 5, 8, 8]
    assert starts.floor(1) == 8 and starts.floor(2) == 0 and starts.floor_at(2, 50) == 0


@dataclass
class _Run:
    """A seeded history under retention that deletes only what its HW covers, and the
    leaders' answers about it."""

    history: History = field(default_factory=History)
    answers: list[LogStartSample] = field(default_factory=list)
    log: dict[int, int] = field(default_factory=dict)
    log_start: int = 0

    def final(self) -> FinalRead:
        return {1: [(o, v) for o, v in sorted(self.log.items()) if o >= self.log_start]}


def _retention_run(seed: int) -> _Run:
    rng = random.Random(seed)
    run = _Run()
    h = run.history
    position: dict[int, int] = {}
    for process in (1, 2):
        h.assign(process, [1])
        position[process] = 0
    for _ in range(80):
        step = rng.random()
        end = len(run.log)
        if step < 0.5:
            run.log[end] = 10 + end
            h.send(0, 1, [(end, 10 + end)])  # acks=all: the HW is past it once acknowledged
        elif step < 0.7 and end:
            run.log_start = rng.randint(run.log_start, end - 1)  # the active segment stays
            run.answers.append(_answer(_at(h), run.log_start, end))
        else:
            process = rng.choice((1, 2))
            start = max(position[process], run.log_start)  # reset to the log start
            read = [(o, run.log[o]) for o in range(start, min(start + rng.randint(1, 4), end))]
            h.poll(process, {1: read} if read else {})
            position[process] = start + len(read)
    run.answers.append(_answer(_at(h), run.log_start, len(run.log)))  # before the final read
    return run


def _judged(seed: int, *, lose_newest: bool = False) -> tuple[CheckResult, int]:
    """The checker's verdict on seeded run `seed` and its final read (without its newest
    record), and that record's value."""
    run = _retention_run(seed)
    final = run.final()
    newest = final[1].pop() if lose_newest else final[1][-1]
    _drained(run.history, final)
    return check(run.history.events, final, log_starts=_starts(*run.answers)), newest[1]


@pytest.mark.parametrize("seed", range(40))
def test_seeded_runs_whose_retention_keeps_to_the_hw_are_valid_and_a_loss_is_still_found(
        seed: int) -> None:
    result, _ = _judged(seed)
    assert result.valid and not _anomalies(result), (seed, result.to_json())
    # the twin: the newest record, above every log start, missing from the final read (a
    # consumer that read it also saw a phantom)
    lost, newest = _judged(seed, lose_newest=True)
    assert Anomaly.LOST_ACKED_FINAL in lost.failed_by, (seed, lost.to_json())
    assert set(lost.failed_by) <= {Anomaly.LOST_ACKED_FINAL, Anomaly.PHANTOM_READ}
    assert [e["value"] for e in lost.examples[Anomaly.LOST_ACKED_FINAL]] == [newest]


def test_retention_excuses_something_in_most_seeded_runs() -> None:
    """The seeded runs above delete, read across resets and leave records unread."""
    excused = [sum(_judged(seed)[0].allowed.values()) for seed in range(40)]
    assert sum(1 for n in excused if n) >= 30, excused


def test_an_answer_is_one_line_per_partition_both_of_whose_offsets_came(tmp_path: Path) -> None:
    results = (ListOffsetsResult(0, 0, "", 7, -1), ListOffsetsResult(0, 0, "", 9, -1),
               ListOffsetsResult(2, 6, "not the leader", -1, -1),
               ListOffsetsResult(2, 0, "", 4, -1))
    path = tmp_path / "log-starts.jsonl"
    path.write_text("".join(answer_lines(10, 12, {0: 3, 2: 1}, results)), encoding="utf-8")
    assert read_log_start_samples(path) == [LogStartSample(10, 12, 0, 3, 7, 9)]
    path.write_text('{"asked_ns": 1, "key": 0}\n', encoding="utf-8")
    with pytest.raises(HistoryFormatError, match=r"log-starts.jsonl:1: not a log-start sample"):
        read_log_start_samples(path)
