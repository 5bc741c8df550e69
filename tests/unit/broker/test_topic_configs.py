"""CreateTopics validation: Kafka's rules and error codes (docs/protocol.md, CreateTopics)."""

from __future__ import annotations

import pytest

from zlog.broker.topic_configs import (
    TOPIC_CONFIG_DEFAULTS,
    TOPIC_CONFIG_KEYS,
    altered_topic_configs,
    normalize_topic_configs,
    validate_compression_type,
    validate_new_topic,
    validate_partitions,
    validate_replication_factor,
    validate_topic_configs,
    validate_topic_name,
)
from zlog.errors import ErrorCode, ZlogError
from zlog.record.header import Compression
from zlog.shm_segments.log_config import LogConfig


def _code(call: object, *args: object, **kwargs: object) -> ErrorCode:
    assert callable(call)
    with pytest.raises(ZlogError) as caught:
        call(*args, **kwargs)
    return caught.value.code


@pytest.mark.parametrize(
    "name", ["a", "orders", "a.b-c_D9", "x" * 249, "...", "__consumer_offsets"]
)
def test_valid_topic_names(name: str) -> None:
    assert validate_topic_name(name) == name


@pytest.mark.parametrize(
    "name", ["", ".", "..", "x" * 250, "a/b", "a b", "ü", "a\x00", None, 7, ["a"]]
)
def test_invalid_topic_names_are_invalid_topic_exception(name: object) -> None:
    assert _code(validate_topic_name, name) == ErrorCode.INVALID_TOPIC_EXCEPTION


@pytest.mark.parametrize("partitions", [0, -1, True, 1.5, "3", 65_537])
def test_bad_partition_counts(partitions: object) -> None:
    assert _code(validate_partitions, partitions) == ErrorCode.INVALID_PARTITIONS


def test_partition_count_bounds() -> None:
    assert validate_partitions(1) == 1
    assert validate_partitions(65_536) == 65_536


def test_replication_factor_is_bounded_by_live_brokers() -> None:
    assert validate_replication_factor(1, live_brokers=1) == 1
    assert validate_replication_factor(3, live_brokers=3) == 3
    for factor in (0, -1, 2, True, "1"):
        code = _code(validate_replication_factor, factor, live_brokers=1)
        assert code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_every_allowed_config_is_accepted() -> None:
    values = {
        "retention.ms": "1000", "retention.bytes": "1048576", "retention.disk.percent": "90",
        "segment.bytes": "1048576", "segment.ms": "60000", "cleanup.policy": "compact",
        "max.message.bytes": "1000", "flush.messages": "1", "flush.ms": "10",
        "min.insync.replicas": "1", "delete.retention.ms": "1000", "index.interval.bytes": "4096",
        "message.timestamp.difference.max.ms": "60000", "compression.type": "lz4",
        "unclean.leader.election.enable": "true",
    }
    assert set(values) == TOPIC_CONFIG_KEYS
    config = validate_topic_configs(values)
    assert config.retention_ms == 1000
    assert config.compacted


@pytest.mark.parametrize(
    "configs",
    [
        {"retention.mss": "1"},  # a typo is never silently ignored
        {"min.compaction.lag.ms": "1"},  # a LogConfig field, but not a topic config we allow
        {"segment.bytes": "big"},
        {"segment.bytes": "1"},  # below Kafka's minimum
        {"cleanup.policy": "shred"},
        {"min.insync.replicas": "0"},
        {"message.timestamp.difference.max.ms": "-5"},
        {"message.timestamp.difference.max.ms": "soon"},
        {"min.insync.replicas": "two"},
        {"compression.type": "brotli"},
        {"compression.type": "LZ4 "},
        {"unclean.leader.election.enable": "yes"},
    ],
)
def test_bad_configs_are_invalid_config(configs: dict[str, str]) -> None:
    assert _code(validate_topic_configs, configs) == ErrorCode.INVALID_CONFIG


def test_configs_are_normalized_to_strings() -> None:
    assert normalize_topic_configs({"retention.ms": 5, "cleanup.policy": "delete"}) == {
        "retention.ms": "5", "cleanup.policy": "delete"}
    assert normalize_topic_configs(None) == {}
    for bad in ([1], {"retention.ms": True}, {"retention.ms": None}, {"nope": "1"}):
        assert _code(normalize_topic_configs, bad) == ErrorCode.INVALID_CONFIG


def test_configs_apply_over_the_broker_defaults() -> None:
    base = LogConfig(retention_ms=1234)
    config = validate_topic_configs({"segment.bytes": "2048"}, base)
    assert (config.retention_ms, config.segment_bytes) == (1234, 2048)


def test_new_topic_is_checked_in_kafka_order() -> None:
    """A request wrong in several ways reports the name first, then partitions, then RF."""
    assert _code(validate_new_topic, "a/b", 0, 9, {"x": "1"}, live_brokers=1) == (
        ErrorCode.INVALID_TOPIC_EXCEPTION)
    assert _code(validate_new_topic, "ok", 0, 9, {"x": "1"}, live_brokers=1) == (
        ErrorCode.INVALID_PARTITIONS)
    assert _code(validate_new_topic, "ok", 1, 9, {"x": "1"}, live_brokers=1) == (
        ErrorCode.INVALID_REPLICATION_FACTOR)
    assert _code(validate_new_topic, "ok", 1, 1, {"x": "1"}, live_brokers=1) == (
        ErrorCode.INVALID_CONFIG)
    assert validate_new_topic("ok", 3, 1, {"retention.ms": 10}, live_brokers=1) == (
        "ok", 3, 1, {"retention.ms": "10"})


@pytest.mark.parametrize(
    ("configs", "sentence"),
    [
        ({"segment.bytes": "1"}, "segment.bytes must be at least 14, not 1"),
        ({"segment.bytes": "4294967296"}, "segment.bytes must be at most 2147483647, not"),
        ({"segment.ms": "0"}, "segment.ms must be at least 1, not 0"),
        ({"index.interval.bytes": "-1"}, "index.interval.bytes must be at least 0, not -1"),
        ({"retention.ms": "-2"}, "retention.ms must be at least -1 (-1: keep forever), not -2"),
        ({"retention.bytes": "-2"}, "retention.bytes must be at least -1 (-1: no limit), not -2"),
        ({"retention.disk.percent": "0"}, "above 0 and at most 100, or -1 (no limit), not 0"),
        ({"delete.retention.ms": "-1"}, "delete.retention.ms must be at least 0, not -1"),
        ({"flush.messages": "0"}, "flush.messages must be at least 1 or -1 (never), not 0"),
        ({"flush.ms": "-2"}, "flush.ms must be at least 0 or -1 (never), not -2"),
        ({"max.message.bytes": "0"}, "max.message.bytes must be at least 1, not 0"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas must be between 1 and 32, not 0"),
        ({"message.timestamp.difference.max.ms": "-5"}, "must be at least 0, not -5"),
        ({"segment.ms": "1.5"}, "segment.ms must be an integer, not '1.5'"),
    ],
)
def test_a_value_out_of_bounds_names_the_bound_and_the_value(
    configs: dict[str, str], sentence: str
) -> None:
    with pytest.raises(ZlogError) as caught:
        validate_topic_configs(configs)
    assert caught.value.code == ErrorCode.INVALID_CONFIG
    assert sentence in caught.value.message


def test_compression_type_is_producer_or_one_of_kafkas_codecs() -> None:
    assert validate_compression_type(None) is None
    assert validate_compression_type("producer") is None
    assert validate_compression_type("none") == Compression.NONE
    assert validate_compression_type("uncompressed") == Compression.NONE  # Kafka's spelling
    assert validate_compression_type("lz4") == Compression.LZ4
    assert validate_compression_type("gzip") == Compression.GZIP
    assert validate_compression_type("snappy") == Compression.SNAPPY
    assert validate_compression_type("zstd") == Compression.ZSTD
    for unsupported in ("brotli", "lz5", "LZ4", ""):
        with pytest.raises(ZlogError) as caught:
            validate_compression_type(unsupported)
        assert caught.value.code == ErrorCode.INVALID_CONFIG
        assert "producer, none, uncompressed, gzip, snappy, lz4, zstd" in caught.value.message


def test_every_topic_config_has_a_builtin_default_that_validates() -> None:
    assert set(TOPIC_CONFIG_DEFAULTS) == TOPIC_CONFIG_KEYS
    assert validate_topic_configs(TOPIC_CONFIG_DEFAULTS) == LogConfig()
    assert TOPIC_CONFIG_DEFAULTS["retention.disk.percent"] == "-1"
    assert TOPIC_CONFIG_DEFAULTS["compression.type"] == "producer"


def test_an_alteration_sets_then_deletes_and_is_checked_whole() -> None:
    current = {"retention.ms": "5", "segment.ms": "60000"}
    assert altered_topic_configs(current, {"retention.ms": "7", "flush.ms": "1"},
                                 ["segment.ms", "cleanup.policy"]) == {
        "flush.ms": "1", "retention.ms": "7"}
    assert current == {"retention.ms": "5", "segment.ms": "60000"}, "the input is not changed"
    for set_configs, deleted, code in [
        ({"segment.bytes": "1"}, [], ErrorCode.INVALID_CONFIG),
        ({"retention.mss": "1"}, [], ErrorCode.INVALID_CONFIG),
        ({}, ["retention.mss"], ErrorCode.INVALID_CONFIG),
        ({"retention.ms": "1"}, ["retention.ms"], ErrorCode.INVALID_REQUEST),
    ]:
        assert _code(altered_topic_configs, current, set_configs, deleted) == code
