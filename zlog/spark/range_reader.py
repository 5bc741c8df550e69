"""One Spark task's read: the records [start, end) of one partition, as Arrow record batches.

The driver planned the range from offsets that were below the high watermark, so every record
in it exists unless retention removed it since. The task reads whole batches with
`Consumer.poll_batches` (numpy columns, no object per record), cuts the last batch at `end`,
and fails with a clear error rather than waiting forever when records it was promised do not
come within pollTimeoutMs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Final

import numpy as np
import pyarrow as pa

from zlog.client import Consumer, TopicPartition
from zlog.errors import ErrorCode, ZlogError
from zlog.spark.arrow_rows import ArrowRowBuilder
from zlog.spark.offsets import OffsetRange
from zlog.spark.options import ReadOptions

FETCH_BYTES_PER_PARTITION: Final = 4 * 1024 * 1024
FETCH_MAX_WAIT_MS: Final = 100
POLL_SLICE_MS: Final = 500


def read_range(options: ReadOptions, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Arrow record batches holding exactly the records of `offset_range`, in offset order."""
    topic, partition = offset_range.topic, offset_range.partition
    end = offset_range.end
    consumer = Consumer(
        options.bootstrap,
        auto_offset_reset="none" if options.fail_on_data_loss else "earliest",
        fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        max_partition_fetch_bytes=FETCH_BYTES_PER_PARTITION,
        fetch_max_bytes=FETCH_BYTES_PER_PARTITION,
        request_timeout_ms=options.request_timeout_ms,
    )
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset_range.start)
        builder = ArrowRowBuilder(topic, partition)
        position = offset_range.start
        deadline_s = time.monotonic() + options.poll_timeout_ms / 1000
        while position < end:
            try:
                polled = consumer.poll_batches(timeout_ms=POLL_SLICE_MS)
            except ZlogError as error:
                if error.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise ZlogError(error.code, f"{topic}-{partition}: records from offset "
                                                f"{position} are gone (removed by retention?); "
                                                f"set failOnDataLoss=false to skip them "
                                                f"({error.message})") from None
                raise
            if not polled:
                if time.monotonic() > deadline_s:
                    raise ZlogError(
                        ErrorCode.REQUEST_TIMED_OUT,
                        f"{topic}-{partition}: records [{position}, {end}) were planned but "
                        f"none arrived within pollTimeoutMs={options.poll_timeout_ms} (high "
                        f"watermark seen: {consumer.highwater(tp)})")
                continue
            deadline_s = time.monotonic() + options.poll_timeout_ms / 1000
            for _, view in polled:
                below_end = int(np.searchsorted(view.offsets, end, side="left"))
                builder.add(view, below_end)
                if builder.ready:
                    yield _built(builder)
            position = consumer.position(tp)
        if builder.row_count:
            yield _built(builder)
    finally:
        consumer.close()


def _built(builder: ArrowRowBuilder) -> pa.RecordBatch:
    batch = builder.build()
    assert batch is not None
    return batch
