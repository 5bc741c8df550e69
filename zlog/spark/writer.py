"""`df.write.format("zlog")` and `df.writeStream.format("zlog")`: Arrow batches into a topic.

The writers are the Arrow flavours of PySpark's data source writers, so each task gets its rows
as Arrow record batches and the column values become bytes objects inside Arrow, not one
Python Row at a time. The driver checks the columns and that the topic exists when the write
is planned; each task then writes through one producer (delivery.py) and fails if any record
is unacknowledged. zlog topics are append-only: overwrite is refused.

Streaming writes are at-least-once, like Spark's Kafka sink: a micro-batch that is retried
after a failure (or replayed after a restart from the checkpoint) is written again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from zlog.client import Admin
from zlog.errors import ErrorCode, ZlogError
from zlog.spark.columns import SinkColumns, arrow_columns, sink_columns
from zlog.spark.delivery import TopicWriter
from zlog.spark.options import SinkOptions
from zlog.spark.topics import topic_partitions


@dataclass(frozen=True)
class DeliveredMessage(WriterCommitMessage):
    """What one task reports to the driver: how many records it delivered."""

    record_count: int


def checked_sink(options: SinkOptions, schema: StructType, *, overwrite: bool) -> SinkColumns:
    """Refuse what cannot work before any task starts: overwrite, bad columns, no topic."""
    if overwrite:
        raise ZlogError(ErrorCode.INVALID_REQUEST,
                        f"zlog topics are append-only: topic {options.topic!r} cannot be "
                        f"overwritten (use mode 'append')")
    columns = sink_columns(schema)
    with Admin(options.bootstrap, request_timeout_ms=options.request_timeout_ms) as admin:
        topic_partitions(admin, [options.topic], options.bootstrap)
    return columns


def write_batches(options: SinkOptions, columns: SinkColumns,
                  batches: Iterator[pa.RecordBatch]) -> DeliveredMessage:
    writer = TopicWriter(options)
    try:
        for batch in batches:
            writer.write(arrow_columns(batch, columns))
    except BaseException:
        writer.abandon()
        raise
    return DeliveredMessage(writer.close())


class ZlogWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, columns: SinkColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DeliveredMessage:
        return write_batches(self.options, self.columns, iterator)


class ZlogStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, columns: SinkColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DeliveredMessage:
        return write_batches(self.options, self.columns, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: each task's records were acknowledged before it reported."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records already delivered stay in the topic (at-least-once)."""
