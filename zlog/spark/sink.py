"""The foreachPartition sink: `df.foreachPartition(ZlogSink(bootstrap, topic))`.

Spark calls it once per partition of the DataFrame, in the executor's Python worker, with an
iterator of Rows. It opens one producer for that partition, sends the rows in chunks (see
delivery.py), flushes before it returns and raises if any record was not acknowledged, so
Spark retries the task. The same object serves `writeStream.foreachBatch(sink)`: called with
(DataFrame, batch id) it checks the columns and the topic on the driver and writes the
DataFrame's partitions as Arrow batches (`write_dataframe`), which is several times faster
than Rows.

Delivery is at-least-once across task retries: a retried task sends its whole partition again,
including records the failed attempt had already delivered. docs/spark.md says how to
deduplicate downstream.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, Final

import pyarrow as pa
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from zlog.client import Admin
from zlog.spark.columns import RowLayout, sink_columns
from zlog.spark.delivery import TopicWriter
from zlog.spark.options import SinkOptions
from zlog.spark.query_stop import stop_recognisable_by_spark
from zlog.spark.topics import topic_partitions
from zlog.spark.writer import write_batches
from zlog.types import DEFAULT_BOOTSTRAP

ROWS_PER_CHUNK: Final = 8192


@dataclass(frozen=True, slots=True)
class ZlogSink:
    """A picklable callable for `foreachPartition` and `foreachBatch`.

    Columns: `value` (binary or string) required; `key`, `partition` (int) and `headers`
    (array<struct<key string, value binary>>) optional; any other column is ignored. The
    producer settings are those of zlog.Producer, with acks="all" by default.
    """

    bootstrap: str = DEFAULT_BOOTSTRAP
    topic: str = ""
    acks: str = "all"
    linger_ms: int = 5
    batch_size: int = 256 * 1024
    compression: str | None = "lz4"
    delivery_timeout_ms: int = 120_000
    request_timeout_ms: int = 30_000

    def __post_init__(self) -> None:
        if not self.topic:
            raise ValueError("ZlogSink needs the topic to write to: ZlogSink(bootstrap, topic)")

    @property
    def options(self) -> SinkOptions:
        return SinkOptions(
            bootstrap=self.bootstrap, topic=self.topic, acks=self.acks,
            linger_ms=self.linger_ms, batch_size_bytes=self.batch_size,
            compression=self.compression, delivery_timeout_ms=self.delivery_timeout_ms,
            request_timeout_ms=self.request_timeout_ms)

    def __call__(self, rows: Iterable[Row] | DataFrame, batch_id: int | None = None) -> None:
        """foreachPartition(sink) calls it with Rows, foreachBatch(sink) with a DataFrame."""
        if isinstance(rows, DataFrame):
            self.write_dataframe(rows)
        else:
            self.write_rows(rows)

    def write_dataframe(self, frame: DataFrame) -> int:
        """A whole DataFrame (what foreachBatch hands over); the records delivered.

        The columns and the topic are checked here on the driver. The rows then go to the
        tasks as Arrow batches (`mapInArrow`), not as Rows: the same delivery, one producer per
        partition and the same checks, without a Python object per row on the way in.
        Under foreachBatch, `query.stop()` interrupts the write; query_stop.py makes Spark
        take that for the stop it is.
        """
        with stop_recognisable_by_spark():
            columns = sink_columns(frame.schema)
            with Admin(self.bootstrap, request_timeout_ms=self.request_timeout_ms) as admin:
                topic_partitions(admin, [self.topic], self.bootstrap)
            options = self.options

            def deliver(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
                delivered = write_batches(options, columns, batches).record_count
                yield pa.RecordBatch.from_pydict({"records": [delivered]})

            total = frame.mapInArrow(deliver, "records long").agg(F.sum("records")).first()
        return 0 if total is None or total[0] is None else int(total[0])

    def write_rows(self, rows: Iterable[Row]) -> int:
        """foreachPartition: every row of one Spark partition; the records delivered."""
        iterator = iter(rows)
        first = next(iterator, None)
        if first is None:
            return 0
        layout = RowLayout.of(_field_names(first))
        writer = TopicWriter(self.options)
        try:
            writer.write(layout.columns([first]))
            while chunk := list(islice(iterator, ROWS_PER_CHUNK)):
                writer.write(layout.columns(chunk))
        except BaseException:
            writer.abandon()
            raise
        return writer.close()


def _field_names(row: Any) -> list[str]:
    names = getattr(row, "__fields__", None)
    if names is None:
        raise TypeError(f"ZlogSink takes Rows with named columns, not {type(row).__name__}")
    return list(names)
