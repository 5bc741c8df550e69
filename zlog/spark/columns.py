"""Which DataFrame columns become which parts of a record, as Spark's Kafka sink maps them.

`value` (binary or string) is required; `key` (binary or string), `partition` (an integer
type) and `headers` (array<struct<key string, value binary>>) are optional; other columns
(the source's topic, offset, timestamp...) are ignored, so a DataFrame read from zlog can be
written back as it is. Checks happen on the driver where Spark gives the schema (the data
source writers), and on the first row in `foreachPartition`, where it does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from zlog.errors import ErrorCode, ZlogError
from zlog.spark.delivery import Headers, RowColumns, UInt8Rows

VALUE = "value"
KEY = "key"
PARTITION = "partition"
HEADERS = "headers"

_BYTES_TYPES = (BinaryType, StringType)
_INTEGER_TYPES = (ByteType, ShortType, IntegerType, LongType)


def missing_value_error(present: Sequence[str]) -> ZlogError:
    listed = ", ".join(present) if present else "none"
    return ZlogError(ErrorCode.INVALID_REQUEST,
                     f"the DataFrame has no {VALUE!r} column, which the zlog sink writes as each "
                     f"record's value (columns present: {listed})")


def _wrong_type(column: str, found: DataType, expected: str) -> ZlogError:
    return ZlogError(ErrorCode.INVALID_REQUEST,
                     f"column {column!r} is {found.simpleString()}; the zlog sink takes "
                     f"{expected}")


@dataclass(frozen=True, slots=True)
class SinkColumns:
    """Which optional columns a DataFrame has (checked against its schema)."""

    has_key: bool
    has_partition: bool
    has_headers: bool


def sink_columns(schema: StructType) -> SinkColumns:
    """Check a DataFrame's schema for the sink; INVALID_REQUEST naming the column if wrong."""
    fields = {field.name: field.dataType for field in schema.fields}
    if VALUE not in fields:
        raise missing_value_error(list(fields))
    if not isinstance(fields[VALUE], _BYTES_TYPES):
        raise _wrong_type(VALUE, fields[VALUE], "binary or string")
    if KEY in fields and not isinstance(fields[KEY], _BYTES_TYPES):
        raise _wrong_type(KEY, fields[KEY], "binary or string")
    if PARTITION in fields and not isinstance(fields[PARTITION], _INTEGER_TYPES):
        raise _wrong_type(PARTITION, fields[PARTITION], "an integer type")
    if HEADERS in fields:
        headers = fields[HEADERS]
        element = headers.elementType if isinstance(headers, ArrayType) else None
        names = ({f.name: f.dataType for f in element.fields}
                 if isinstance(element, StructType) else {})
        if not (isinstance(names.get("key"), StringType)
                and isinstance(names.get("value"), _BYTES_TYPES) and len(names) == 2):
            raise _wrong_type(HEADERS, headers, "array<struct<key: string, value: binary>>")
    return SinkColumns(KEY in fields, PARTITION in fields, HEADERS in fields)


# -- Arrow batches (the data source writers) -----------------------------------------------


def _values(column: pa.Array, *, has_headers: bool) -> list[bytes | None] | UInt8Rows:
    rows = None if has_headers else _fixed_width_rows(column)
    return _arrow_bytes(column) if rows is None else rows


def _arrow_bytes(column: pa.Array) -> list[bytes | None]:
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    values: list[bytes | None] = column.to_pylist()
    return values


def _fixed_width_rows(column: pa.Array) -> UInt8Rows | None:
    """The values as one (rows, width) uint8 array over Arrow's buffer when they are all of
    one width and none is null: `send_many`'s fastest input, with no bytes object per value."""
    if column.null_count or len(column) == 0:
        return None
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.large_binary() if pa.types.is_large_string(column.type)
                             else pa.binary())
    if not (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
        return None
    _, offsets_buffer, data_buffer = column.buffers()
    offset_type = np.int64 if pa.types.is_large_binary(column.type) else np.int32
    offsets = np.frombuffer(offsets_buffer, offset_type)[column.offset:
                                                         column.offset + len(column) + 1]
    width = int(offsets[1] - offsets[0])
    if width == 0 or not bool((np.diff(offsets) == width).all()):
        return None
    data = np.frombuffer(data_buffer, np.uint8)[int(offsets[0]):int(offsets[-1])]
    return data.reshape(len(column), width)


def arrow_columns(batch: pa.RecordBatch, columns: SinkColumns) -> RowColumns:
    """An Arrow batch's rows as producer columns: values of one width as one array over
    Arrow's buffer, others as bytes objects that Arrow makes in C."""
    names = batch.schema.names
    headers: list[Headers] | None = None
    if columns.has_headers:
        headers = [
            () if entries is None else tuple(
                (entry["key"], _as_bytes(entry["value"])) for entry in entries)
            for entries in batch.column(names.index(HEADERS)).to_pylist()
        ]
    return RowColumns(
        values=_values(batch.column(names.index(VALUE)), has_headers=columns.has_headers),
        keys=_arrow_bytes(batch.column(names.index(KEY))) if columns.has_key else None,
        partitions=(batch.column(names.index(PARTITION)).to_pylist()
                    if columns.has_partition else None),
        headers=headers,
    )


# -- Rows (foreachPartition) ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RowLayout:
    """Where the sink's columns sit in a Row (foreachPartition gives no schema)."""

    value: int
    key: int | None
    partition: int | None
    headers: int | None

    @classmethod
    def of(cls, field_names: Sequence[str]) -> RowLayout:
        names = list(field_names)
        if VALUE not in names:
            raise missing_value_error(names)

        def where(name: str) -> int | None:
            return names.index(name) if name in names else None

        return cls(names.index(VALUE), where(KEY), where(PARTITION), where(HEADERS))

    def columns(self, rows: Sequence[Sequence[Any]]) -> RowColumns:
        def column(index: int) -> list[Any]:
            # Spark's Rows are tuples whose own __getitem__ is Python (it also takes names):
            # their items taken as a tuple's are one C loop, not a Python call per row.
            try:
                return list(map(tuple.__getitem__, rows, repeat(index)))  # type: ignore[arg-type]
            except TypeError:  # rows that are not tuples
                return list(map(itemgetter(index), rows))

        headers: list[Headers] | None = None
        if self.headers is not None:
            headers = [() if entries is None else tuple(
                (str(entry[0]), _as_bytes(entry[1])) for entry in entries)
                for entries in column(self.headers)]
        return RowColumns(
            values=_column_bytes(column(self.value), VALUE),
            keys=None if self.key is None else _column_bytes(column(self.key), KEY),
            partitions=(None if self.partition is None
                        else [None if p is None else int(p) for p in column(self.partition)]),
            headers=headers,
        )


def _column_bytes(column: list[Any], name: str) -> list[bytes | None]:
    """bytes (or None) for each cell: Spark hands binary cells over as bytearrays."""
    kinds = set(map(type, column))
    if kinds <= {bytes, bytearray}:
        return list(map(bytes, column))  # one C loop; bytes(b) of a bytes is b itself
    try:
        return [value if type(value) is bytes else _as_bytes(value) for value in column]
    except TypeError as error:
        raise ZlogError(ErrorCode.INVALID_REQUEST,
                        f"column {name!r}: {error}; the zlog sink takes binary or string "
                        f"values") from None


def _as_bytes(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"{type(value).__name__} is neither bytes nor str")
