"""Fetched zlog batches -> Arrow record batches in the Kafka source's schema.

PySpark takes `pyarrow.RecordBatch`es from a data source's `read()` as they are, while tuples
cost a Python conversion per field per row. The consumer already holds each fetched batch as
numpy columns (offsets, timestamps, where each key and value lies in the record bytes), so the
Arrow columns are built from those arrays directly: keys and values are gathered into one
buffer each and handed to Arrow with their offsets, with no Python object per record. Only
records that carry headers are walked in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from zlog import limits
from zlog.spark.schema import source_arrow_schema

UInt8Array = npt.NDArray[np.uint8]
Int64Array = npt.NDArray[np.int64]
RecordHeaders = tuple[tuple[str, bytes | None], ...]



class BatchHeaderLike(Protocol):
    @property
    def timestamp_type(self) -> int: ...


class BatchViewLike(Protocol):
    """What `Consumer.poll_batches` hands out per batch (zlog's BatchView), as used here."""

    @property
    def header(self) -> BatchHeaderLike: ...
    @property
    def records(self) -> UInt8Array: ...
    @property
    def offsets(self) -> Int64Array: ...
    @property
    def timestamps_ms(self) -> Int64Array: ...
    @property
    def key_starts(self) -> Int64Array: ...
    @property
    def key_lengths(self) -> Int64Array: ...
    @property
    def value_starts(self) -> Int64Array: ...
    @property
    def value_lengths(self) -> Int64Array: ...
    @property
    def record_headers(self) -> dict[int, RecordHeaders]: ...
    def __len__(self) -> int: ...


def gather(records: UInt8Array, starts: Int64Array, lengths: Int64Array) -> UInt8Array:
    """The pieces records[starts[i]:starts[i] + lengths[i]] end to end (a length < 0 is empty).

    Pieces are sorted and disjoint (they are fields of consecutive records). When they are
    evenly spaced and of one length (fixed-size values, the common bulk case) this is one
    strided copy; otherwise one byte mask selects them.
    """
    sizes = np.maximum(lengths, 0)
    total_bytes = int(sizes.sum())
    count = int(starts.size)
    if total_bytes == 0:
        return np.empty(0, np.uint8)
    width = int(sizes[0])
    if count == 1:
        start = int(starts[0])
        return records[start:start + width].copy()
    strides = np.diff(starts)
    stride = int(strides[0])
    if (width > 0 and stride >= width and bool((sizes == width).all())
            and bool((strides == stride).all())):
        rows = np.lib.stride_tricks.as_strided(records[int(starts[0]):], (count, width),
                                               (stride, 1), writeable=False)
        return np.ascontiguousarray(rows).reshape(-1)  # the copy (Arrow takes contiguous bytes)
    ends = starts + sizes
    runs = np.empty(2 * count + 1, np.int64)
    runs[0] = starts[0]
    runs[2:-1:2] = starts[1:] - ends[:-1]
    runs[1::2] = sizes
    runs[-1] = records.size - ends[-1]
    pattern = np.zeros(2 * count + 1, np.bool_)
    pattern[1::2] = True
    return records[np.repeat(pattern, runs)]


def binary_array(data: UInt8Array, lengths: Int64Array) -> pa.Array:
    """An Arrow binary column from packed bytes and lengths (-1: null), without copies."""
    count = int(lengths.size)
    valid = lengths >= 0
    offsets = np.zeros(count + 1, np.int32)
    np.cumsum(np.maximum(lengths, 0), out=offsets[1:])
    null_count = count - int(np.count_nonzero(valid))
    validity = (None if null_count == 0
                else pa.py_buffer(np.packbits(valid, bitorder="little")))
    return pa.Array.from_buffers(pa.binary(), count,
                                 [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count)


class ArrowRowBuilder:
    """Collects fetched batches of one partition and emits them as Arrow record batches.

    Each `add` takes the first `count` records of a batch view (the reader cuts the last batch
    at the range's end); `ready` says when enough rows wait for one Arrow batch.
    """

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self._schema = source_arrow_schema()
        self._clear()

    def _clear(self) -> None:
        self._keys: list[UInt8Array] = []
        self._key_lengths: list[Int64Array] = []
        self._values: list[UInt8Array] = []
        self._value_lengths: list[Int64Array] = []
        self._offsets: list[Int64Array] = []
        self._timestamps_ms: list[Int64Array] = []
        self._timestamp_types: list[npt.NDArray[np.int32]] = []
        self._header_counts: list[npt.NDArray[np.int32]] = []
        self._header_pairs: list[tuple[str, bytes | None]] = []
        self.row_count = 0
        self.size_bytes = 0

    @property
    def ready(self) -> bool:
        return (self.row_count >= limits.ARROW_BATCH_ROWS_MAX
                or self.size_bytes >= limits.ARROW_BATCH_BYTES_MAX)

    def add(self, view: BatchViewLike, count: int) -> None:
        if count <= 0:
            return
        records = view.records
        key_lengths = view.key_lengths[:count]
        value_lengths = view.value_lengths[:count]
        keys = gather(records, view.key_starts[:count], key_lengths)
        values = gather(records, view.value_starts[:count], value_lengths)
        self._keys.append(keys)
        self._key_lengths.append(key_lengths)
        self._values.append(values)
        self._value_lengths.append(value_lengths)
        self._offsets.append(view.offsets[:count])
        self._timestamps_ms.append(view.timestamps_ms[:count])
        self._timestamp_types.append(np.full(count, int(view.header.timestamp_type), np.int32))
        header_counts = np.zeros(count, np.int32)
        for index, headers in sorted(view.record_headers.items()):
            if index < count:
                header_counts[index] = len(headers)
                self._header_pairs.extend(headers)
        self._header_counts.append(header_counts)
        self.row_count += count
        self.size_bytes += int(keys.size + values.size)

    def build(self) -> pa.RecordBatch | None:
        """The collected rows as one record batch (None if there are none); starts afresh."""
        if self.row_count == 0:
            return None
        count = self.row_count
        schema = self._schema
        topic_bytes = self.topic.encode()
        arrays: Sequence[Any] = [
            binary_array(_concat(self._keys), np.concatenate(self._key_lengths)),
            binary_array(_concat(self._values), np.concatenate(self._value_lengths)),
            pa.Array.from_buffers(pa.string(), count, [
                None, pa.py_buffer(np.arange(count + 1, dtype=np.int32) * len(topic_bytes)),
                pa.py_buffer(topic_bytes * count)]),
            pa.array(np.full(count, self.partition, np.int32), pa.int32()),
            pa.array(np.concatenate(self._offsets), pa.int64()),
            pa.array(np.concatenate(self._timestamps_ms) * 1000, schema.field("timestamp").type),
            pa.array(np.concatenate(self._timestamp_types), pa.int32()),
            self._headers_array(np.concatenate(self._header_counts)),
        ]
        self._clear()
        return pa.RecordBatch.from_arrays(list(arrays), schema=schema)

    def _headers_array(self, counts: npt.NDArray[np.int32]) -> pa.Array:
        list_type = self._schema.field("headers").type
        entry_type = list_type.value_type
        offsets = np.zeros(counts.size + 1, np.int32)
        np.cumsum(counts, out=offsets[1:])
        pairs = self._header_pairs
        entries = pa.StructArray.from_arrays(
            [pa.array([name for name, _ in pairs], pa.string()),
             pa.array([value for _, value in pairs], pa.binary())],
            fields=[entry_type.field(0), entry_type.field(1)],
        )
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), entries, type=list_type)


def _concat(pieces: list[UInt8Array]) -> UInt8Array:
    return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
