"""zlog for PySpark: a foreachPartition sink and the `zlog` data source (batch and streaming).

    import zlog.spark
    zlog.spark.register(spark)
    df = spark.read.format("zlog").option("bootstrap", "tcp://127.0.0.1:7400") \\
        .option("topic", "clicks").load()
    df.foreachPartition(zlog.spark.ZlogSink("tcp://127.0.0.1:7400", "clicks-copy"))

Modules: options.py (option parsing), offsets.py (offset planning, pure), schema.py (Kafka's
source schema), arrow_rows.py and range_reader.py (reading ranges into Arrow), source_batch.py,
source_stream.py, columns.py and delivery.py (rows into a producer), sink.py (foreachPartition
and foreachBatch), query_stop.py (a query stopped during a foreachBatch write), writer.py
(format("zlog") writers), datasource.py, register.py. The user guide is docs/spark.md.
Needs the `spark` extra (pyspark >= 4.2, pyarrow) and a Java runtime.
"""

from zlog.spark.register import register
from zlog.spark.schema import SOURCE_SCHEMA
from zlog.spark.sink import ZlogSink

__all__ = ["SOURCE_SCHEMA", "ZlogSink", "register"]
