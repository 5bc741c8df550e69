"""`zlog.spark.register(spark)`: make `format("zlog")` known to a SparkSession."""

from __future__ import annotations

from pyspark.sql import SparkSession

from zlog.spark.datasource import ZlogDataSource


def register(spark: SparkSession) -> None:
    """Register the zlog data source on `spark` (once per session; again is harmless)."""
    spark.dataSource.register(ZlogDataSource)
