"""acked-under-min-isr on hand-written histories and ISR samples, each with a near twin.

Events are one nanosecond apart from 1000 (tests/jepsen/histories.py): the sends below run
1000-1001 (value 10), 1002-1003 (11, completed info), 1004-1005 (12) and 1006-1007 (13).
The minimum is 2 and the topic's replicas are 1, 2 and 3.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.jepsen.histories import History
from zlog.transport.messages.admin import PartitionMetadata
from zlog_jepsen.checker import Anomaly, CheckConfig, check
from zlog_jepsen.checker.min_isr import IsrHistory, IsrSample, Span, below_min_spans
from zlog_jepsen.history import FinalRead, HistoryFormatError
from zlog_jepsen.isr_watch import read_isr_samples, sample_lines

FULL, ALONE = (1, 2, 3), (1,)
FINAL: FinalRead = {1: [(0, 10), (1, 12), (2, 13)]}  # every acknowledged send kept


def _sends() -> History:
    h = History()
    h.send(0, 1, [(0, 10)])
    h.send(0, 1, [(None, 11)], done="info")
    h.send(0, 1, [(1, 12)])
    return h.send(0, 1, [(2, 13)])


def _isr(states: Sequence[tuple[int, tuple[int, ...]]], margin_ns: int = 0,
         leader_epochs: Sequence[int] | None = None) -> IsrHistory:
    """Key 1's ISR sampled at each time (asked then, answered a nanosecond later)."""
    epochs = leader_epochs or [0] * len(states)
    return IsrHistory([IsrSample(at, at + 1, 1, isr, epoch)
                       for (at, isr), epoch in zip(states, epochs, strict=True)],
                      min_insync_replicas=2, margin_ns=margin_ns)


SHRUNK = [(990, FULL), (998, ALONE), (1002, ALONE), (1006, ALONE), (1020, FULL)]
"""Below the minimum from 999 (the first answer) to 1006 (the last question)."""


def test_an_ok_send_whose_whole_window_lies_in_a_span_below_the_minimum_is_flagged() -> None:
    result = check(_sends().events, FINAL, isr=_isr(SHRUNK))
    assert result.counts[Anomaly.ACKED_UNDER_MIN_ISR] == 2, result.to_json()
    assert [e["values"] for e in result.examples[Anomaly.ACKED_UNDER_MIN_ISR]] == [[10], [12]]
    example = result.examples[Anomaly.ACKED_UNDER_MIN_ISR][0]
    assert example["isr"] == [1] and example["span_ns"] == [999, 1006]
    assert example["window_ns"] == [1000, 1001]
    assert not result.valid and result.failed_by == (Anomaly.ACKED_UNDER_MIN_ISR,)


def test_a_send_only_overlapping_the_span_or_not_acknowledged_is_not() -> None:
    """13 was invoked inside the span but acknowledged after its end; 11 was never acked."""
    flagged = check(_sends().events, FINAL, isr=_isr(SHRUNK)).examples[Anomaly.ACKED_UNDER_MIN_ISR]
    assert all(e["values"] not in ([11], [13]) for e in flagged)


def test_the_twin_whose_isr_was_back_at_the_minimum_in_between_is_valid() -> None:
    """A sample in the middle shows two in sync: the span splits into two shorter ones, and
    neither holds a whole window."""
    regrown = [(990, FULL), (998, ALONE), (1001, (1, 2)), (1003, ALONE), (1020, FULL)]
    result = check(_sends().events, FINAL, isr=_isr(regrown))
    assert result.valid and not result.counts[Anomaly.ACKED_UNDER_MIN_ISR], result.to_json()


def test_a_new_leader_epoch_or_the_margins_shorten_the_span() -> None:
    """The margins cover a stale answer at the end and a late-written invocation at the
    start."""
    epochs = check(_sends().events, FINAL, isr=_isr(SHRUNK, leader_epochs=[0, 0, 1, 1, 1]))
    assert epochs.counts[Anomaly.ACKED_UNDER_MIN_ISR] == 1  # only 12, in the second run
    assert below_min_spans(_isr(SHRUNK, margin_ns=1))[1] == [Span(1000, 1005, ALONE)]
    assert check(_sends().events, FINAL, isr=_isr(SHRUNK, margin_ns=1)).counts[
        Anomaly.ACKED_UNDER_MIN_ISR] == 2
    assert below_min_spans(_isr(SHRUNK, margin_ns=2))[1] == [Span(1001, 1004, ALONE)]
    stale = check(_sends().events, FINAL, isr=_isr(SHRUNK, margin_ns=2))
    assert stale.valid and not stale.counts[Anomaly.ACKED_UNDER_MIN_ISR]


def test_without_samples_or_under_acks_1_it_fails_nothing() -> None:
    assert check(_sends().events, FINAL).valid
    acks_1 = check(_sends().events, FINAL, config=CheckConfig(acks_all=False), isr=_isr(SHRUNK))
    assert acks_1.valid and acks_1.counts[Anomaly.ACKED_UNDER_MIN_ISR] == 2


def test_samples_are_written_one_line_per_partition_and_read_back(tmp_path: Path) -> None:
    answer = [PartitionMetadata(0, 2, 5, (2, 1, 3), (3, 2), "tcp://127.0.1.2:1"),
              PartitionMetadata(1, 1, 0, (1, 2, 3), (1,), "")]
    path = tmp_path / "isr.jsonl"
    path.write_text("".join(sample_lines(10, 12, answer)), encoding="utf-8")
    assert read_isr_samples(path) == [IsrSample(10, 12, 0, (2, 3), 5),
                                      IsrSample(10, 12, 1, (1,), 0)]
    path.write_text('{"asked_ns": 1, "key": 0}\n', encoding="utf-8")
    with pytest.raises(HistoryFormatError, match=r"isr.jsonl:1: not an ISR sample"):
        read_isr_samples(path)
