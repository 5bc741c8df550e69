"""Offset planning for the zlog data source: what to read, cut into Spark tasks.

Pure: no sockets, no Spark. The driver asks the brokers for each partition's bounds (log start
offset, high watermark) and hands them in; everything else (parsing `startingOffsets` /
`endingOffsets` as Spark's Kafka source takes them, checking them against the bounds, capping a
micro-batch at `maxOffsetsPerTrigger`, cutting ranges at `maxRecordsPerPartition`) happens here,
so it is tested without a broker or a JVM.

Offsets follow Kafka's meaning: a range [start, end) holds the records whose offsets are at or
above start and below end; end is at most the high watermark. In offset JSON, -2 stands for
earliest (the log start offset) and -1 for latest (the high watermark), as in Spark.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from zlog.errors import ErrorCode, ZlogError
from zlog.types import EARLIEST_TIMESTAMP as EARLIEST
from zlog.types import LATEST_TIMESTAMP as LATEST
from zlog.types import TopicPartition

Offsets: TypeAlias = dict[TopicPartition, int]
StreamOffset: TypeAlias = dict[str, dict[str, int]]  # Spark checkpoint form: {"t": {"0": 42}}


@dataclass(frozen=True, slots=True)
class PartitionBounds:
    """What the partition's leader holds now: records [log_start, high_watermark)."""

    log_start: int
    high_watermark: int


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """A parsed startingOffsets/endingOffsets option: a default plus per-partition overrides.

    `default` is EARLIEST or LATEST; `specific` holds the partitions the JSON named, with an
    absolute offset or EARLIEST/LATEST.
    """

    option: str
    default: int
    specific: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Records [start, end) of one partition: one Spark task's share of the read."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def record_count(self) -> int:
        """An upper bound: compaction and transaction markers leave gaps in the offsets."""
        return self.end - self.start


def _invalid(option: str, message: str) -> ZlogError:
    return ZlogError(ErrorCode.INVALID_CONFIG, f"option {option!r}: {message}")


_EXPECTED = ('"earliest", "latest", or JSON such as {"clicks": {"0": 23, "1": -2}} '
             "(an offset per partition; -2 = earliest, -1 = latest)")


def parse_offset_spec(option: str, text: str, topics: Sequence[str], *,
                      default: int, allowed: frozenset[int]) -> OffsetSpec:
    """startingOffsets / endingOffsets text -> OffsetSpec, or INVALID_CONFIG naming the option.

    `allowed` holds which of EARLIEST and LATEST make sense for this option (an ending offset
    of "earliest" reads nothing and is refused, as Spark does); absolute offsets always pass.
    """
    stripped = text.strip()
    words = {"earliest": EARLIEST, "latest": LATEST}
    if stripped.lower() in words:
        chosen = words[stripped.lower()]
        if chosen not in allowed:
            raise _invalid(option, f"{stripped!r} is not allowed here; expected "
                                   f"{_allowed_words(allowed)} or per-partition JSON")
        return OffsetSpec(option, chosen)
    try:
        parsed = json.loads(stripped)
    except json.JSONDecodeError as error:
        raise _invalid(option, f"{text!r} is not valid JSON ({error.msg} at character "
                               f"{error.pos}); expected {_EXPECTED}") from None
    if not isinstance(parsed, dict):
        raise _invalid(option, f"{text!r} is not a JSON object; expected {_EXPECTED}")
    specific: dict[TopicPartition, int] = {}
    for topic, partitions in parsed.items():
        if topic not in topics:
            raise _invalid(option, f"names topic {topic!r}, which is not among the topics read "
                                   f"({', '.join(topics)})")
        if not isinstance(partitions, dict):
            raise _invalid(option, f"topic {topic!r} must map to an object of partition -> "
                                   f"offset, not {partitions!r}; expected {_EXPECTED}")
        for partition_text, offset in partitions.items():
            partition = _partition_number(option, topic, partition_text)
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise _invalid(option, f"{topic}-{partition}: offset {offset!r} is not an "
                                       f"integer; expected {_EXPECTED}")
            if offset < EARLIEST or (offset < 0 and offset not in allowed):
                raise _invalid(option, f"{topic}-{partition}: offset {offset} is not allowed "
                                       f"here; expected an offset >= 0"
                                       + (f" or {_allowed_numbers(allowed)}" if allowed else ""))
            specific[TopicPartition(topic, partition)] = offset
    return OffsetSpec(option, default, specific)


def _partition_number(option: str, topic: str, text: object) -> int:
    try:
        partition = int(str(text))
    except ValueError:
        partition = -1
    if partition < 0 or str(partition) != str(text):
        raise _invalid(option, f"topic {topic!r}: partition {text!r} is not a partition "
                               f"number; expected {_EXPECTED}")
    return partition


def _allowed_words(allowed: frozenset[int]) -> str:
    names = [name for name, value in (("earliest", EARLIEST), ("latest", LATEST))
             if value in allowed]
    return " or ".join(f'"{name}"' for name in names) or "no keyword"


def _allowed_numbers(allowed: frozenset[int]) -> str:
    return " or ".join(f"{value} ({'earliest' if value == EARLIEST else 'latest'})"
                       for value in sorted(allowed))


def resolve(spec: OffsetSpec, bounds: Mapping[TopicPartition, PartitionBounds], *,
            fail_on_data_loss: bool = True) -> Offsets:
    """An absolute offset for every partition in `bounds`, checked against those bounds.

    An offset above the high watermark names records that do not exist: refused. One below
    the log start names records that retention removed: refused, or moved up to the log start
    when `fail_on_data_loss` is off (Spark's failOnDataLoss).
    """
    unknown = sorted(set(spec.specific) - set(bounds))
    if unknown:
        topic, partition = unknown[0]
        known = sorted(p for t, p in bounds if t == topic)
        raise ZlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"option {spec.option!r} names {topic}-{partition}, but topic {topic!r} "
                        f"has partitions {_span(known)}")
    resolved: Offsets = {}
    for key, bound in sorted(bounds.items()):
        wanted = spec.specific.get(key, spec.default)
        if wanted == EARLIEST:
            resolved[key] = bound.log_start
        elif wanted == LATEST:
            resolved[key] = bound.high_watermark
        else:
            resolved[key] = check_offset(spec.option, key, wanted, bound,
                                         fail_on_data_loss=fail_on_data_loss)
    return resolved


def check_offset(option: str, key: TopicPartition, offset: int, bound: PartitionBounds, *,
                 fail_on_data_loss: bool) -> int:
    """`offset` if the partition can serve it now; see `resolve` for what is refused."""
    topic, partition = key
    if offset > bound.high_watermark:
        raise ZlogError(ErrorCode.OFFSET_OUT_OF_RANGE,
                        f"option {option!r}: {topic}-{partition} offset {offset} is past the "
                        f"high watermark {bound.high_watermark}")
    if offset < bound.log_start:
        if fail_on_data_loss:
            raise ZlogError(ErrorCode.OFFSET_OUT_OF_RANGE,
                            f"option {option!r}: {topic}-{partition} offset {offset} is below "
                            f"the log start offset {bound.log_start}: records "
                            f"[{offset}, {bound.log_start}) were removed by retention (set "
                            f"failOnDataLoss=false to skip them)")
        return bound.log_start
    return offset


def _span(partitions: Sequence[int]) -> str:
    if not partitions:
        return "none"
    return f"0..{partitions[-1]}" if partitions == list(range(len(partitions))) else str(
        partitions)


def plan_ranges(starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int], *,
                max_records_per_range: int | None = None,
                min_ranges: int | None = None) -> list[OffsetRange]:
    """The non-empty ranges [starts[p], ends[p]), cut so each holds at most
    `max_records_per_range` offsets, and into at least `min_ranges` pieces where the offsets
    allow (Spark's maxRecordsPerPartition and minPartitions).

    A partition missing from `starts` (one created after the query began) starts at 0.
    Ranges come out ordered by topic, partition, then offset, so a plan is reproducible.
    """
    if max_records_per_range is not None and max_records_per_range <= 0:
        raise ValueError(f"max_records_per_range must be positive, not {max_records_per_range}")
    whole: list[OffsetRange] = []
    for key in sorted(ends):
        start = starts.get(key, 0)
        end = ends[key]
        if end < start:
            topic, partition = key
            raise ZlogError(ErrorCode.OFFSET_OUT_OF_RANGE,
                            f"{topic}-{partition}: the ending offset {end} is below the starting "
                            f"offset {start}")
        if end > start:
            whole.append(OffsetRange(key[0], key[1], start, end))
    total = sum(r.record_count for r in whole)
    ranges: list[OffsetRange] = []
    for offset_range in whole:
        pieces = 1
        if max_records_per_range is not None:
            pieces = math.ceil(offset_range.record_count / max_records_per_range)
        if min_ranges is not None and total > 0:
            pieces = max(pieces, math.ceil(min_ranges * offset_range.record_count / total))
        ranges.extend(split_range(offset_range, min(pieces, offset_range.record_count)))
    return ranges


def split_range(offset_range: OffsetRange, pieces: int) -> list[OffsetRange]:
    """`offset_range` cut into `pieces` contiguous ranges whose sizes differ by at most one."""
    assert 1 <= pieces <= max(offset_range.record_count, 1)
    size, extra = divmod(offset_range.record_count, pieces)
    cut: list[OffsetRange] = []
    start = offset_range.start
    for index in range(pieces):
        end = start + size + (1 if index < extra else 0)
        cut.append(OffsetRange(offset_range.topic, offset_range.partition, start, end))
        start = end
    assert start == offset_range.end
    return cut


def cap_offsets(starts: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
                max_records: int) -> Offsets:
    """End offsets for one micro-batch of at most `max_records` offsets in all.

    Shared among partitions in proportion to their backlog, as Spark's Kafka source does for
    maxOffsetsPerTrigger; the rounding remainder goes to the largest backlogs, so a batch is
    never empty while there is a backlog, even when max_records is below the partition count.
    """
    if max_records <= 0:
        raise ValueError(f"max_records must be positive, not {max_records}")
    backlog = {key: max(latest[key] - starts.get(key, 0), 0) for key in latest}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(latest)
    shares = {key: max_records * lag // total for key, lag in backlog.items()}
    remainder = max_records - sum(shares.values())
    for key in sorted(backlog, key=lambda k: (-backlog[k], k)):
        if remainder == 0:
            break
        if shares[key] < backlog[key]:
            shares[key] += 1
            remainder -= 1
    return {key: starts.get(key, 0) + shares[key] for key in latest}


def to_stream_offset(offsets: Mapping[TopicPartition, int]) -> StreamOffset:
    """Offsets in the JSON form Spark keeps in its checkpoint: {"topic": {"0": 42}}."""
    stream_offset: StreamOffset = {}
    for (topic, partition), offset in sorted(offsets.items()):
        stream_offset.setdefault(topic, {})[str(partition)] = int(offset)
    return stream_offset


def from_stream_offset(stream_offset: Mapping[str, Mapping[str, int]]) -> Offsets:
    """The inverse of `to_stream_offset`, for an offset read back from a checkpoint."""
    offsets: Offsets = {}
    for topic, partitions in stream_offset.items():
        for partition, offset in partitions.items():
            offsets[TopicPartition(topic, int(partition))] = int(offset)
    return offsets
