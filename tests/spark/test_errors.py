"""Bad options and bad DataFrames fail with one clear sentence that reaches the Spark user.

Spark wraps what Python raises (on the driver's planner or in a task) in its own exceptions;
each test checks that zlog's message, with its Kafka error code, is in what the user catches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from zlog.spark import ZlogSink

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _message(call: Callable[[], object]) -> str:
    with pytest.raises(Exception) as caught:  # Spark's wrapper classes vary
        call()
    return str(caught.value)


def test_reading_an_unknown_topic_names_it(spark: Any, bootstrap: str) -> None:
    message = _message(lambda: spark.read.format("zlog").option("bootstrap", bootstrap)
                       .option("topic", "no-such-topic").load().collect())
    assert "UNKNOWN_TOPIC_OR_PARTITION (3): topic 'no-such-topic' does not exist" in message


def test_writing_to_an_unknown_topic_names_it(spark: Any, bootstrap: str) -> None:
    frame = spark.createDataFrame([("a",)], "value string")
    message = _message(lambda: frame.write.format("zlog").mode("append")
                       .option("bootstrap", bootstrap).option("topic", "no-such-topic").save())
    assert "UNKNOWN_TOPIC_OR_PARTITION (3): topic 'no-such-topic' does not exist" in message


def test_foreach_partition_into_an_unknown_topic_names_it(spark: Any, bootstrap: str) -> None:
    frame = spark.createDataFrame([("a",)], "value string")
    message = _message(lambda: frame.foreachPartition(ZlogSink(bootstrap, "no-such-topic")))
    assert "UNKNOWN_TOPIC_OR_PARTITION (3)" in message
    assert "no-such-topic" in message


def test_malformed_offsets_json_names_the_option_and_the_expected_form(
    spark: Any, bootstrap: str, make_topic: Callable[..., str]
) -> None:
    topic = make_topic()
    message = _message(lambda: spark.read.format("zlog").option("bootstrap", bootstrap)
                       .option("topic", topic).option("startingOffsets", '{"' + topic + '": {0: 1')
                       .load().collect())
    assert "INVALID_CONFIG (40): option 'startingOffsets'" in message
    assert "is not valid JSON" in message
    assert '"earliest", "latest", or JSON such as' in message


def test_a_missing_value_column_names_the_column_and_the_columns_present(
    spark: Any, bootstrap: str, make_topic: Callable[..., str]
) -> None:
    topic = make_topic()
    frame = spark.createDataFrame([("k", "v")], "key string, payload string")
    expected = ("the DataFrame has no 'value' column, which the zlog sink writes as each "
                "record's value (columns present: key, payload)")

    message = _message(lambda: frame.write.format("zlog").mode("append")
                       .option("bootstrap", bootstrap).option("topic", topic).save())
    assert f"INVALID_REQUEST (42): {expected}" in message

    message = _message(lambda: frame.foreachPartition(ZlogSink(bootstrap, topic)))
    assert f"INVALID_REQUEST (42): {expected}" in message


def test_an_unknown_option_is_named(spark: Any, bootstrap: str) -> None:
    message = _message(lambda: spark.read.format("zlog").option("bootstrap", bootstrap)
                       .option("topic", "t").option("startingOffset", "earliest").load().collect())
    assert "INVALID_CONFIG (40): unknown option 'startingoffset'" in message
