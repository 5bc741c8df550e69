"""The reset-offsets plan: where each committed offset goes, kept within the log."""

from __future__ import annotations

import pytest

from zlog.cli_groups import plan_reset
from zlog.errors import ErrorCode, ZlogError
from zlog.types import TopicPartition

P0, P1 = TopicPartition("t", 0), TopicPartition("t", 1)
STARTS = {P0: 10, P1: 0}
ENDS = {P0: 50, P1: 20}


def test_earliest_and_latest_are_the_log_bounds() -> None:
    assert plan_reset([P0, P1], {}, STARTS, ENDS, to_earliest=True) == {P0: 10, P1: 0}
    assert plan_reset([P0, P1], {}, STARTS, ENDS, to_latest=True) == {P0: 50, P1: 20}


def test_an_offset_outside_the_log_is_kept_within_it() -> None:
    assert plan_reset([P0, P1], {}, STARTS, ENDS, to_offset=15) == {P0: 15, P1: 15}
    assert plan_reset([P0, P1], {}, STARTS, ENDS, to_offset=5) == {P0: 10, P1: 5}
    assert plan_reset([P0], {}, STARTS, ENDS, to_offset=99) == {P0: 50}


def test_a_shift_moves_from_the_committed_offset_and_needs_one() -> None:
    committed = {P0: 40, P1: 3}
    assert plan_reset([P0, P1], committed, STARTS, ENDS, shift_by=-5) == {P0: 35, P1: 0}
    assert plan_reset([P0, P1], committed, STARTS, ENDS, shift_by=30) == {P0: 50, P1: 20}
    with pytest.raises(ZlogError) as missing:
        plan_reset([P0], {}, STARTS, ENDS, shift_by=1)
    assert missing.value.code == ErrorCode.INVALID_REQUEST
    assert "t-0" in missing.value.message


def test_a_time_with_no_record_that_recent_goes_to_the_high_watermark() -> None:
    at_time = {P0: 22, P1: -1}
    assert plan_reset([P0, P1], {}, STARTS, ENDS, at_time=at_time) == {P0: 22, P1: 20}
