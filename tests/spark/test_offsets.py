"""Offset planning (zlog/spark/offsets.py): pure, so tested without Spark or a broker."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zlog.errors import ErrorCode, ZlogError
from zlog.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    PartitionBounds,
    cap_offsets,
    from_stream_offset,
    parse_offset_spec,
    plan_ranges,
    resolve,
    split_range,
    to_stream_offset,
)

BOTH = frozenset({EARLIEST, LATEST})
BOUNDS = {("a", 0): PartitionBounds(5, 100), ("a", 1): PartitionBounds(0, 40),
          ("b", 0): PartitionBounds(0, 0)}


def test_keywords_and_json_parse_as_sparks_kafka_source_takes_them() -> None:
    assert parse_offset_spec("startingOffsets", " Earliest ", ["a"], default=LATEST,
                             allowed=BOTH).default == EARLIEST
    spec = parse_offset_spec("startingOffsets", '{"a": {"0": 23, "1": -2}}', ["a", "b"],
                             default=EARLIEST, allowed=BOTH)
    assert spec.specific == {("a", 0): 23, ("a", 1): EARLIEST}
    assert resolve(spec, BOUNDS) == {("a", 0): 23, ("a", 1): 0, ("b", 0): 0}


@pytest.mark.parametrize(("text", "expected"), [
    ('{"a": {0: 1', "is not valid JSON"),
    ("[1, 2]", "is not a JSON object"),
    ('{"c": {"0": 1}}', "names topic 'c', which is not among the topics read (a, b)"),
    ('{"a": [1]}', "must map to an object of partition -> offset"),
    ('{"a": {"x": 1}}', "partition 'x' is not a partition number"),
    ('{"a": {"0": "7"}}', "offset '7' is not an integer"),
    ('{"a": {"0": -1}}', "offset -1 is not allowed here"),
    ("latest", "'latest' is not allowed here"),
])
def test_bad_offsets_name_the_option_and_show_the_expected_form(text: str, expected: str) -> None:
    with pytest.raises(ZlogError) as caught:
        parse_offset_spec("startingOffsets", text, ["a", "b"], default=EARLIEST,
                          allowed=frozenset({EARLIEST}))
    assert caught.value.code == ErrorCode.INVALID_CONFIG
    assert caught.value.message.startswith("option 'startingOffsets': ")
    assert expected in caught.value.message


def test_offsets_outside_what_the_partition_holds_are_refused_or_moved_up() -> None:
    past = parse_offset_spec("endingOffsets", '{"a": {"1": 41}}', ["a"], default=LATEST,
                             allowed=frozenset({LATEST}))
    with pytest.raises(ZlogError, match="a-1 offset 41 is past the high watermark 40") as caught:
        resolve(past, BOUNDS)
    assert caught.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    gone = parse_offset_spec("startingOffsets", '{"a": {"0": 2}}', ["a"], default=EARLIEST,
                             allowed=BOTH)
    with pytest.raises(ZlogError, match="removed by retention"):
        resolve(gone, BOUNDS)
    assert resolve(gone, BOUNDS, fail_on_data_loss=False)[("a", 0)] == 5
    unknown = parse_offset_spec("startingOffsets", '{"a": {"7": 0}}', ["a"], default=EARLIEST,
                                allowed=BOTH)
    named = r"names a-7, but topic 'a' has partitions 0\.\.1"
    with pytest.raises(ZlogError, match=named) as caught:
        resolve(unknown, BOUNDS)
    assert caught.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_ranges_are_cut_at_the_cap_into_near_equal_pieces() -> None:
    ranges = plan_ranges({("a", 0): 0, ("a", 1): 10}, {("a", 0): 10, ("a", 1): 10, ("b", 0): 3},
                         max_records_per_range=4)
    assert ranges == [OffsetRange("a", 0, 0, 4), OffsetRange("a", 0, 4, 7),
                      OffsetRange("a", 0, 7, 10), OffsetRange("b", 0, 0, 3)]


def test_min_ranges_splits_in_proportion_to_size() -> None:
    ranges = plan_ranges({("a", 0): 0, ("a", 1): 0}, {("a", 0): 90, ("a", 1): 10},
                         min_ranges=10)
    assert [(r.partition, r.record_count) for r in ranges] == [(0, 10)] * 9 + [(1, 10)]


def test_an_end_below_the_start_is_refused() -> None:
    with pytest.raises(ZlogError, match="ending offset 3 is below the starting offset 5"):
        plan_ranges({("a", 0): 5}, {("a", 0): 3})


@given(st.integers(0, 10_000), st.integers(0, 5_000), st.integers(1, 50))
def test_split_range_covers_the_range_exactly(start: int, size: int, pieces: int) -> None:
    pieces = min(pieces, max(size, 1))
    cut = split_range(OffsetRange("t", 0, start, start + size), pieces)
    assert cut[0].start == start and cut[-1].end == start + size
    assert all(a.end == b.start for a, b in itertools.pairwise(cut))
    sizes = [r.record_count for r in cut]
    assert max(sizes) - min(sizes) <= 1


@given(st.dictionaries(st.integers(0, 7), st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
                       min_size=1),
       st.integers(1, 3000))
def test_cap_offsets_reads_exactly_the_cap_or_everything(
    partitions: dict[int, tuple[int, int]], cap: int
) -> None:
    starts = {("t", p): start for p, (start, _) in partitions.items()}
    latest = {("t", p): start + lag for p, (start, lag) in partitions.items()}
    ends = cap_offsets(starts, latest, cap)
    assert all(starts[k] <= ends[k] <= latest[k] for k in latest)
    backlog = sum(latest[k] - starts[k] for k in latest)
    assert sum(ends[k] - starts[k] for k in latest) == min(cap, backlog)


def test_cap_offsets_shares_in_proportion_to_backlog() -> None:
    ends = cap_offsets({("t", 0): 0, ("t", 1): 100}, {("t", 0): 300, ("t", 1): 200}, 100)
    assert ends == {("t", 0): 75, ("t", 1): 125}


def test_stream_offsets_round_trip_through_sparks_json_form() -> None:
    offsets = {("a", 1): 7, ("a", 0): 3, ("b", 10): 0}
    assert to_stream_offset(offsets) == {"a": {"0": 3, "1": 7}, "b": {"10": 0}}
    assert from_stream_offset(to_stream_offset(offsets)) == offsets
