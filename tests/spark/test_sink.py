"""The foreachPartition sink (and foreachBatch) against a real broker and a local Spark."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from tests.spark.helpers import read_all
from zlog.client.partitioner import partition_for_key
from zlog.spark import ZlogSink

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_foreach_partition_from_8_spark_partitions_into_3_zlog_partitions(
    spark: Any, bootstrap: str, make_topic: Callable[..., str]
) -> None:
    from pyspark.sql import functions as F

    topic = make_topic(partitions=3)
    rows = 20_000
    frame = spark.range(rows).repartition(8).select(
        F.col("id").cast("string").alias("key"),
        F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"),
    )
    assert frame.rdd.getNumPartitions() == 8

    frame.foreachPartition(ZlogSink(bootstrap, topic))

    records = read_all(bootstrap, topic)
    assert Counter(r.value for r in records) == Counter(f"v{i}".encode() for i in range(rows))
    assert {r.partition for r in records} == {0, 1, 2}
    misplaced = [r for r in records if r.key is None or r.partition != partition_for_key(r.key, 3)]
    assert not misplaced, "keys go where Kafka's partitioner puts them"


def test_partition_and_headers_columns_and_null_values_are_kept_in_row_order(
    spark: Any, bootstrap: str, make_topic: Callable[..., str]
) -> None:
    from pyspark.sql import functions as F

    topic = make_topic(partitions=3)
    frame = spark.range(300).coalesce(1).select(
        F.col("id").cast("string").cast("binary").alias("key"),
        F.when(F.col("id") % 10 == 0, F.lit(None).cast("binary"))
        .otherwise(F.col("id").cast("string").cast("binary")).alias("value"),
        (F.col("id") % 3).cast("int").alias("partition"),
        F.when(F.col("id") % 4 == 0, F.array(F.struct(
            F.lit("trace").alias("key"), F.col("id").cast("string").cast("binary").alias("value"),
        ))).otherwise(F.array().cast("array<struct<key:string,value:binary>>")).alias("headers"),
        F.lit("ignored").alias("comment"),
    )

    frame.foreachPartition(ZlogSink(bootstrap, topic))

    records = read_all(bootstrap, topic)
    assert len(records) == 300
    by_partition: dict[int, list[int]] = {}
    for record in records:
        assert record.key is not None
        number = int(record.key)
        assert record.partition == number % 3
        assert record.value == (None if number % 10 == 0 else str(number).encode())
        assert record.headers == ((("trace", str(number).encode()),) if number % 4 == 0 else ())
        by_partition.setdefault(record.partition, []).append(number)
    for partition, numbers in by_partition.items():
        assert numbers == sorted(numbers), f"partition {partition} keeps the rows' order"


def test_the_sink_as_foreach_batch_writes_the_whole_dataframe(
    spark: Any, bootstrap: str, make_topic: Callable[..., str]
) -> None:
    topic = make_topic(partitions=2)
    frame = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(50)],
                                  "key string, value string")

    ZlogSink(bootstrap, topic)(frame, 0)  # what foreachBatch calls: (DataFrame, batch id)

    assert sorted(r.value for r in read_all(bootstrap, topic)) == sorted(
        f"v{i}".encode() for i in range(50))
