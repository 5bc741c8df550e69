"""Option parsing (zlog/spark/options.py): pure, tested without Spark."""

from __future__ import annotations

import pytest

from zlog.errors import ErrorCode, ZlogError
from zlog.spark.offsets import EARLIEST, LATEST
from zlog.spark.options import sink_options, source_options
from zlog.types import DEFAULT_BOOTSTRAP


def test_source_defaults_follow_sparks_kafka_source() -> None:
    batch = source_options({"topic": "a, b,a"}, streaming=False)
    assert batch.topics == ("a", "b")
    assert batch.read.bootstrap == DEFAULT_BOOTSTRAP
    assert batch.starting.default == EARLIEST
    assert batch.ending is not None and batch.ending.default == LATEST
    stream = source_options({"subscribe": "a", "maxoffsetspertrigger": "500"}, streaming=True)
    assert stream.starting.default == LATEST
    assert stream.ending is None
    assert stream.max_offsets_per_trigger == 500


@pytest.mark.parametrize(("options", "streaming", "expected"), [
    ({}, False, "option 'topic' is missing"),
    ({"topic": " , "}, False, "option 'topic' names no topic"),
    ({"topic": "a", "maxRecordsPerPartition": "0"}, False,
     "option 'maxRecordsPerPartition' must be a positive integer, not '0'"),
    ({"topic": "a", "failOnDataLoss": "maybe"}, False,
     "option 'failOnDataLoss' must be true or false"),
    ({"topic": "a", "endingOffsets": "latest"}, True, "'endingOffsets' is for batch reads"),
    ({"topic": "a", "maxOffsetsPerTrigger": "5"}, False, "for streaming reads only"),
    ({"topic": "a", "startingOffsets": "latest"}, False, "'latest' is not allowed here"),
    ({"topic": "a", "endingOffsets": "earliest"}, False, "'earliest' is not allowed here"),
    ({"topic": "a", "kafka.bootstrap.servers": "x"}, False,
     "unknown option 'kafka.bootstrap.servers'"),
])
def test_bad_source_options_are_named(options: dict[str, str], streaming: bool,
                                      expected: str) -> None:
    with pytest.raises(ZlogError) as caught:
        source_options(options, streaming=streaming)
    assert caught.value.code == ErrorCode.INVALID_CONFIG
    assert expected in caught.value.message


def test_sink_options_use_kafkas_producer_names() -> None:
    options = sink_options({"topic": "out", "acks": "1", "linger.ms": "0",
                            "compression.type": "none", "bootstrap": "tcp://h:1"})
    assert (options.topic, options.acks, options.linger_ms, options.compression,
            options.bootstrap) == ("out", "1", 0, None, "tcp://h:1")


@pytest.mark.parametrize(("options", "expected"), [
    ({}, "option 'topic' is missing"),
    ({"topic": "a,b"}, "names one topic to write to"),
    ({"topic": "a", "acks": "2"}, "option 'acks' must be 0, 1, -1 or all"),
    ({"topic": "a", "compression.type": "zstd"}, "must be none or lz4"),
    ({"topic": "a", "linger.ms": "-1"}, "'linger.ms' must be an integer >= 0"),
    ({"topic": "a", "startingOffsets": "earliest"}, "unknown option 'startingoffsets'"),
])
def test_bad_sink_options_are_named(options: dict[str, str], expected: str) -> None:
    with pytest.raises(ZlogError) as caught:
        sink_options(options)
    assert caught.value.code == ErrorCode.INVALID_CONFIG
    assert expected in caught.value.message
