"""`spark.read.format("zlog")`: a batch read of fixed offset ranges.

The driver resolves startingOffsets/endingOffsets against what the brokers hold now, so the
result is a fixed set of records whatever is written meanwhile, and cuts the ranges into tasks
of at most maxRecordsPerPartition records (offsets.py). Each task reads its range into Arrow
record batches (range_reader.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from zlog.client import Admin
from zlog.spark.offsets import OffsetRange, plan_ranges, resolve
from zlog.spark.options import SourceOptions
from zlog.spark.range_reader import read_range
from zlog.spark.topics import partition_bounds


@dataclass
class RangePartition(InputPartition):
    """One task: one offset range of one zlog partition."""

    offset_range: OffsetRange


def plan(options: SourceOptions) -> list[OffsetRange]:
    """The ranges to read now, from the brokers' bounds and the offset options."""
    assert options.ending is not None, "a batch read has ending offsets"
    read = options.read
    with Admin(read.bootstrap, request_timeout_ms=read.request_timeout_ms) as admin:
        bounds = partition_bounds(admin, options.topics, read.bootstrap)
    starts = resolve(options.starting, bounds, fail_on_data_loss=read.fail_on_data_loss)
    ends = resolve(options.ending, bounds, fail_on_data_loss=read.fail_on_data_loss)
    return plan_ranges(starts, ends, max_records_per_range=options.max_records_per_partition,
                       min_ranges=options.min_partitions)


class ZlogBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return [RangePartition(offset_range) for offset_range in plan(self.options)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, RangePartition):  # Spark sends a placeholder when none
            yield from read_range(self.options.read, partition.offset_range)
