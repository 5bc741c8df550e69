"""The rows the zlog source produces: exactly the schema of Spark's Kafka source.

Keeping Kafka's columns (names, types, order) lets a job written for `format("kafka")` switch to
`format("zlog")` without touching its transformations. Headers are always present (an empty
array when a record has none), as with the Kafka source's `includeHeaders=true`.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Final

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

if TYPE_CHECKING:
    import pyarrow as pa

HEADER_TYPE: Final = StructType([
    StructField("key", StringType()),
    StructField("value", BinaryType()),
])

SOURCE_SCHEMA: Final = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),  # Kafka's: 0 CreateTime, 1 LogAppendTime
    StructField("headers", ArrayType(HEADER_TYPE)),
])


@cache
def source_arrow_schema() -> pa.Schema:
    """The Arrow schema PySpark expects from `read()` for SOURCE_SCHEMA (checked by equality)."""
    from pyspark.sql.pandas.types import to_arrow_schema  # noqa: PLC0415  (needs pyarrow)

    return to_arrow_schema(SOURCE_SCHEMA, timezone="UTC")
