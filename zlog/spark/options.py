"""The zlog format's options: parsed and checked once, on the driver, before any task runs.

Spark hands a data source its options as strings, keyed case-insensitively. Names follow
Spark's Kafka connector where it has one (startingOffsets, endingOffsets, maxOffsetsPerTrigger,
maxRecordsPerPartition, minPartitions, failOnDataLoss) and Kafka's producer names for the
sink (acks, linger.ms, batch.size, compression.type, delivery.timeout.ms). A wrong value is an
INVALID_CONFIG ZlogError that names the option, what it got and what it takes, so the Spark
user sees one sentence instead of a failed task.

Pure: no sockets, no Spark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from zlog.errors import ErrorCode, ZlogError
from zlog.spark.offsets import OffsetSpec, parse_offset_spec
from zlog.types import DEFAULT_BOOTSTRAP
from zlog.types import EARLIEST_TIMESTAMP as EARLIEST
from zlog.types import LATEST_TIMESTAMP as LATEST

MAX_RECORDS_PER_PARTITION_DEFAULT: Final = 1_000_000
POLL_TIMEOUT_MS_DEFAULT: Final = 120_000  # Spark's default network timeout
REQUEST_TIMEOUT_MS_DEFAULT: Final = 30_000

_COMMON: Final = frozenset({"bootstrap", "requesttimeoutms"})
_SOURCE: Final = _COMMON | {"topic", "subscribe", "startingoffsets", "endingoffsets",
                            "maxrecordsperpartition", "minpartitions", "maxoffsetspertrigger",
                            "failondataloss", "polltimeoutms"}
_SINK: Final = _COMMON | {"topic", "acks", "linger.ms", "batch.size", "compression.type",
                          "delivery.timeout.ms"}
# Keys that Spark itself may pass along with the user's options.
_SPARK_KEYS: Final = frozenset({"path", "checkpointlocation", "queryname"})


def _invalid(message: str) -> ZlogError:
    return ZlogError(ErrorCode.INVALID_CONFIG, message)


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """What a task needs to read a range: picklable, no connections."""

    bootstrap: str
    request_timeout_ms: int
    poll_timeout_ms: int
    fail_on_data_loss: bool


@dataclass(frozen=True, slots=True)
class SourceOptions:
    read: ReadOptions
    topics: tuple[str, ...]
    starting: OffsetSpec
    ending: OffsetSpec | None  # None for a stream
    max_records_per_partition: int
    min_partitions: int | None
    max_offsets_per_trigger: int | None


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Where and how the sink produces; the producer settings are Kafka's names."""

    bootstrap: str
    topic: str
    acks: str = "all"
    linger_ms: int = 5
    batch_size_bytes: int = 256 * 1024
    compression: str | None = "lz4"
    delivery_timeout_ms: int = 120_000
    request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT


class _Options:
    """Case-insensitive lookups that know each option's original spelling for messages."""

    def __init__(self, options: Mapping[str, str], known: frozenset[str], role: str) -> None:
        self.values = {str(k).lower(): v for k, v in options.items()}
        unknown = sorted(set(self.values) - known - _SPARK_KEYS)
        if unknown:
            raise _invalid(f"unknown option {unknown[0]!r} for the zlog {role}; it takes "
                           f"{', '.join(sorted(_SPELLING.get(k, k) for k in known))}")

    def text(self, name: str) -> str | None:
        value = self.values.get(name.lower())
        return None if value is None else str(value)

    def positive_int(self, name: str, default: int | None) -> int | None:
        text = self.text(name)
        if text is None:
            return default
        try:
            value = int(text.strip())
        except ValueError:
            value = 0
        if value <= 0:
            raise _invalid(f"option {name!r} must be a positive integer, not {text!r}")
        return value

    def boolean(self, name: str, default: bool) -> bool:
        text = self.text(name)
        if text is None:
            return default
        table = {"true": True, "false": False}
        if text.strip().lower() not in table:
            raise _invalid(f"option {name!r} must be true or false, not {text!r}")
        return table[text.strip().lower()]

    def bootstrap(self) -> str:
        text = self.text("bootstrap")
        if text is None:
            return DEFAULT_BOOTSTRAP
        if not text.strip():
            raise _invalid("option 'bootstrap' is empty; expected an endpoint such as "
                           f"{DEFAULT_BOOTSTRAP}")
        return text.strip()


_SPELLING: Final = {k.lower(): k for k in (
    "startingOffsets", "endingOffsets", "maxRecordsPerPartition", "minPartitions",
    "maxOffsetsPerTrigger", "failOnDataLoss", "pollTimeoutMs", "requestTimeoutMs")}


def _topics(options: _Options) -> tuple[str, ...]:
    text = options.text("topic")
    name = "topic"
    if text is None:
        text, name = options.text("subscribe"), "subscribe"
    if text is None:
        raise _invalid("option 'topic' is missing: name the topic to read (or several, "
                       "separated by commas)")
    topics = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    if not topics:
        raise _invalid(f"option {name!r} names no topic: {text!r}")
    return topics


def source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Options of `spark.read.format("zlog")` (or readStream when `streaming`)."""
    parsed = _Options(options, _SOURCE, "stream source" if streaming else "source")
    topics = _topics(parsed)
    request_timeout_ms = parsed.positive_int("requestTimeoutMs", REQUEST_TIMEOUT_MS_DEFAULT)
    poll_timeout_ms = parsed.positive_int("pollTimeoutMs", POLL_TIMEOUT_MS_DEFAULT)
    assert request_timeout_ms is not None and poll_timeout_ms is not None
    read = ReadOptions(parsed.bootstrap(), request_timeout_ms, poll_timeout_ms,
                       parsed.boolean("failOnDataLoss", default=True))
    starting_default = LATEST if streaming else EARLIEST
    starting = parse_offset_spec(
        "startingOffsets",
        parsed.text("startingOffsets") or ("latest" if streaming else "earliest"),
        topics, default=starting_default,
        allowed=frozenset({EARLIEST, LATEST}) if streaming else frozenset({EARLIEST}))
    ending: OffsetSpec | None = None
    if streaming:
        if parsed.text("endingOffsets") is not None:
            raise _invalid("option 'endingOffsets' is for batch reads only; a stream reads on")
    else:
        ending = parse_offset_spec("endingOffsets", parsed.text("endingOffsets") or "latest",
                                   topics, default=LATEST, allowed=frozenset({LATEST}))
        if parsed.text("maxOffsetsPerTrigger") is not None:
            raise _invalid("option 'maxOffsetsPerTrigger' is for streaming reads only")
    max_records = parsed.positive_int("maxRecordsPerPartition",
                                      MAX_RECORDS_PER_PARTITION_DEFAULT)
    assert max_records is not None
    return SourceOptions(
        read=read,
        topics=topics,
        starting=starting,
        ending=ending,
        max_records_per_partition=max_records,
        min_partitions=parsed.positive_int("minPartitions", None),
        max_offsets_per_trigger=parsed.positive_int("maxOffsetsPerTrigger", None),
    )


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Options of `df.write.format("zlog")` and `df.writeStream.format("zlog")`."""
    parsed = _Options(options, _SINK, "sink")
    topic = (parsed.text("topic") or "").strip()
    if not topic:
        raise _invalid("option 'topic' is missing: name the topic to write to")
    if "," in topic:
        raise _invalid(f"option 'topic' names one topic to write to, not a list: {topic!r}")
    acks = (parsed.text("acks") or "all").strip().lower()
    if acks not in {"0", "1", "-1", "all"}:
        raise _invalid(f"option 'acks' must be 0, 1, -1 or all, not {acks!r}")
    compression = (parsed.text("compression.type") or "lz4").strip().lower()
    if compression not in {"none", "lz4"}:
        raise _invalid(f"option 'compression.type' must be none or lz4, not {compression!r}")
    defaults = SinkOptions(bootstrap="", topic="")
    linger_text = parsed.text("linger.ms")
    linger_ms = defaults.linger_ms
    if linger_text is not None:
        try:
            linger_ms = int(linger_text.strip())
        except ValueError:
            linger_ms = -1
        if linger_ms < 0:
            raise _invalid(f"option 'linger.ms' must be an integer >= 0, not {linger_text!r}")
    batch_size = parsed.positive_int("batch.size", defaults.batch_size_bytes)
    delivery_timeout_ms = parsed.positive_int("delivery.timeout.ms",
                                              defaults.delivery_timeout_ms)
    request_timeout_ms = parsed.positive_int("requestTimeoutMs", defaults.request_timeout_ms)
    assert batch_size is not None and delivery_timeout_ms is not None
    assert request_timeout_ms is not None
    return SinkOptions(
        bootstrap=parsed.bootstrap(),
        topic=topic,
        acks=acks,
        linger_ms=linger_ms,
        batch_size_bytes=batch_size,
        compression=None if compression == "none" else compression,
        delivery_timeout_ms=delivery_timeout_ms,
        request_timeout_ms=request_timeout_ms,
    )
