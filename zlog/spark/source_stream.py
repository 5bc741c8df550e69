"""`spark.readStream.format("zlog")`: micro-batches of offset ranges, offsets in the checkpoint.

Spark drives it (a Python process on the driver keeps this reader between calls):
`initialOffset` once for a new query; then each trigger `latestOffset(start, limit)`, where
`start` is where the previous batch ended (read back from the checkpoint after a restart) and
`limit` comes from `getDefaultReadLimit` (maxOffsetsPerTrigger); then `partitions(start, end)`
for the tasks. Spark writes `end` to its offset log before the batch runs and replays the same
[start, end) if the query stops before committing it, so a restarted query continues exactly
where it stopped: no offset is skipped, and none is read by two committed batches.

Offsets are {"topic": {"partition": offset}}, the form Spark's Kafka source keeps. A partition
that appears while the query runs starts at its log start offset.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from zlog.client import Admin, TopicPartition
from zlog.errors import ErrorCode, ZlogError
from zlog.spark.offsets import (
    Offsets,
    PartitionBounds,
    StreamOffset,
    cap_offsets,
    from_stream_offset,
    plan_ranges,
    resolve,
    to_stream_offset,
)
from zlog.spark.options import SourceOptions
from zlog.spark.range_reader import read_range
from zlog.spark.source_batch import RangePartition
from zlog.spark.topics import partition_bounds


class ZlogStreamReader(DataSourceStreamReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._admin: Admin | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Tasks get a copy of the reader: without the driver's connection."""
        state = dict(self.__dict__)
        state["_admin"] = None
        return state

    def _bounds(self) -> dict[TopicPartition, PartitionBounds]:
        read = self.options.read
        if self._admin is None:
            self._admin = Admin(read.bootstrap, request_timeout_ms=read.request_timeout_ms)
        try:
            return partition_bounds(self._admin, self.options.topics, read.bootstrap)
        except BaseException:
            self._close_admin()  # a fresh connection (and fresh metadata) next time
            raise

    def initialOffset(self) -> StreamOffset:
        bounds = self._bounds()
        starts = resolve(self.options.starting, bounds,
                         fail_on_data_loss=self.options.read.fail_on_data_loss)
        return to_stream_offset(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        cap = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if cap is None else ReadMaxRows(cap)

    def latestOffset(self, start: Mapping[str, Mapping[str, int]],
                     limit: ReadLimit) -> StreamOffset:
        bounds = self._bounds()
        starts = self._starts(from_stream_offset(start), bounds)
        latest = {key: bound.high_watermark for key, bound in bounds.items()}
        for key, offset in starts.items():
            if key in latest and latest[key] < offset:
                topic, partition = key
                raise ZlogError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                f"{topic}-{partition}: the query's checkpoint is at offset "
                                f"{offset} but the partition ends at {latest[key]} (was the "
                                f"topic deleted and created again?)")
        if isinstance(limit, ReadMaxRows):
            latest = cap_offsets(starts, latest, limit.max_rows)
        return to_stream_offset(latest)

    def reportLatestOffset(self) -> StreamOffset:
        return to_stream_offset({key: b.high_watermark for key, b in self._bounds().items()})

    @staticmethod
    def _starts(starts: Offsets, bounds: Mapping[TopicPartition, PartitionBounds]) -> Offsets:
        """Where each partition's next batch starts; new partitions at their log start."""
        merged = dict(starts)
        for key, bound in bounds.items():
            merged.setdefault(key, bound.log_start)
        return merged

    def partitions(self, start: Mapping[str, Mapping[str, int]],
                   end: Mapping[str, Mapping[str, int]]) -> list[InputPartition]:
        ranges = plan_ranges(from_stream_offset(start), from_stream_offset(end),
                             max_records_per_range=self.options.max_records_per_partition,
                             min_ranges=self.options.min_partitions)
        return [RangePartition(offset_range) for offset_range in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        yield from read_range(self.options.read, partition.offset_range)

    def commit(self, end: Mapping[str, Mapping[str, int]]) -> None:
        """Nothing to release: zlog keeps the records until retention removes them."""

    def stop(self) -> None:
        self._close_admin()

    def _close_admin(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
