"""The `zlog` format: PySpark's Python data source over zlog, no JVM connector.

Spark builds this object from the user's options on the driver and ships copies to the
executors; each method parses the options it needs (options.py), so a bad option fails when
the read or write is planned, with one sentence that names it.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from zlog.spark.options import sink_options, source_options
from zlog.spark.schema import SOURCE_SCHEMA
from zlog.spark.source_batch import ZlogBatchReader
from zlog.spark.source_stream import ZlogStreamReader
from zlog.spark.writer import ZlogStreamWriter, ZlogWriter, checked_sink


class ZlogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "zlog"

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return ZlogBatchReader(source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return ZlogStreamReader(source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = sink_options(self.options)
        return ZlogWriter(options, checked_sink(options, schema, overwrite=overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = sink_options(self.options)
        return ZlogStreamWriter(options, checked_sink(options, schema, overwrite=False))
