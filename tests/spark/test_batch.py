"""The batch sink and the batch source through a real local SparkSession and a real broker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROWS = 100_000


def test_round_trip_of_100k_rows_gives_every_row_back_once(
    spark: Any, bootstrap: str, make_topic: Callable[..., str]
) -> None:
    from pyspark.sql import functions as F

    topic = make_topic(partitions=3)
    frame = spark.range(ROWS).select(
        F.col("id").cast("string").alias("key"),
        F.concat(F.lit("row-"), F.col("id").cast("string")).alias("value"),
    )
    (frame.write.format("zlog").mode("append").option("bootstrap", bootstrap)
     .option("topic", topic).save())

    read = (spark.read.format("zlog").option("bootstrap", bootstrap).option("topic", topic)
            .option("maxRecordsPerPartition", 20_000).load())
    assert read.rdd.getNumPartitions() >= 5
    ids = read.select(F.expr("cast(substring(cast(value as string), 5) as long)").alias("id"),
                      F.col("key").cast("string").alias("key"))
    summary = ids.agg(F.count("*").alias("rows"), F.countDistinct("id").alias("distinct"),
                      F.min("id").alias("low"), F.max("id").alias("high"),
                      F.sum(F.when(F.col("id").cast("string") == F.col("key"), 1)
                            .otherwise(0)).alias("matching")).first()
    assert summary.asDict() == {"rows": ROWS, "distinct": ROWS, "low": 0, "high": ROWS - 1,
                                "matching": ROWS}
