"""DataFrame columns -> producer columns (zlog/spark/columns.py), without a SparkSession."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import Row
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from zlog.errors import ErrorCode, ZlogError
from zlog.spark.columns import RowLayout, SinkColumns, arrow_columns, sink_columns

VALUE_ONLY = SinkColumns(has_key=False, has_partition=False, has_headers=False)


def test_values_of_one_width_become_one_array_over_arrows_buffer() -> None:
    batch = pa.RecordBatch.from_pydict({"value": [b"%04d" % i for i in range(10)]}).slice(3, 5)
    values = arrow_columns(batch, VALUE_ONLY).values
    assert isinstance(values, np.ndarray) and values.shape == (5, 4)
    assert [bytes(row) for row in values] == [b"0003", b"0004", b"0005", b"0006", b"0007"]


@pytest.mark.parametrize("values", [[b"a", None, b"c"], [b"a", b"bb"], ["x", "yz"]])
def test_other_values_become_bytes_objects(values: list[object]) -> None:
    converted = arrow_columns(pa.RecordBatch.from_pydict({"value": values}), VALUE_ONLY).values
    assert converted == [v.encode() if isinstance(v, str) else v for v in values]


def test_rows_become_columns_by_name() -> None:
    layout = RowLayout.of(["partition", "value", "key", "other"])
    columns = layout.columns([Row(partition=1, value=bytearray(b"v"), key="k", other=3),
                              Row(partition=None, value="w", key=None, other=4)])
    assert (columns.values, columns.keys, columns.partitions) == (
        [b"v", b"w"], [b"k", None], [1, None])


def test_a_value_of_the_wrong_type_names_the_column() -> None:
    with pytest.raises(ZlogError, match="column 'value': int is neither bytes nor str"):
        RowLayout.of(["value"]).columns([Row(value=5)])


def test_schema_checks_name_the_column() -> None:
    schema = StructType([StructField("value", StringType()), StructField("key", IntegerType())])
    with pytest.raises(ZlogError) as caught:
        sink_columns(schema)
    assert caught.value.code == ErrorCode.INVALID_REQUEST
    assert caught.value.message == ("column 'key' is int; the zlog sink takes binary or string")


def test_row_cells_are_taken_without_a_python_call_per_row(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's `Row.__getitem__` is Python (it also looks cells up by name), and every row of a
    foreachPartition sink passes through `columns`: the cells are taken as the tuple items a
    Row is, in one C loop per column."""
    looked_up: list[object] = []
    by_row = Row.__getitem__

    def counted(row: Row, item: object) -> object:
        looked_up.append(item)
        return by_row(row, item)

    monkeypatch.setattr(Row, "__getitem__", counted)
    rows = [Row(value=bytearray(b"v%d" % i), key=None) for i in range(100)]
    columns = RowLayout.of(["value", "key"]).columns(rows)
    assert columns.values == [b"v%d" % i for i in range(100)]
    assert columns.keys == [None] * 100
    assert looked_up == []


def test_cells_of_rows_that_are_not_tuples_are_taken_too() -> None:
    columns = RowLayout.of(["key", "value"]).columns([["k", b"a"], ["j", b"b"]])
    assert (columns.values, columns.keys) == ([b"a", b"b"], [b"k", b"j"])
