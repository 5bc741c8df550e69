"""Spark connector benchmark: the foreachPartition sink against the plain Producer, batch reads.

One run starts a real broker (`zlog serve`, 2 workers, free loopback port, temporary dirs)
and a local SparkSession (`local[2]`), builds a DataFrame of `--rows` rows of 100-byte values,
caches it (so generating it is not timed), and measures in the same process, on the same rows:

- `sink_rows_per_s`: `df.foreachPartition(ZlogSink(...))` into a 3-partition topic, from the
  start of the Spark job until every task has flushed and checked its acknowledgements;
- `producer_rows_per_s`: the plain `Producer.send_many` from the driver, the same rows as
  bytes objects in chunks of the sink's size, the same producer settings (acks=all, lz4,
  batch.size 256 KiB, linger.ms 5), from the first send to the end of `flush`. The driver
  makes the same values itself, outside the clock;
- `sink_vs_producer_ratio`: the first over the second: what Spark's row handoff costs;
- `rows_to_python_rows_per_s`: `foreachPartition` with a function that only counts the rows:
  the ceiling any foreachPartition sink meets (Spark pickles each row to the Python worker,
  which makes a Row object of it);
- `sink_arrow_rows_per_s`: the same sink called with the DataFrame (`ZlogSink(...)(df)`, what
  foreachBatch does), which moves the rows as Arrow batches (`mapInArrow`);
- `format_write_rows_per_s`: `df.write.format("zlog")` (Arrow batches too); both with their
  ratio to the plain producer;
- `read_rows_per_s`: `spark.read.format("zlog")` of the sink's topic, summing the value
  lengths (every row crosses into Spark);
- `parquet_rows_per_s`: the same cached DataFrame written as Parquet to local disk, for scale.

Before the clock runs, one small write and read warm Spark's Python workers up (their start,
with the imports of pyspark, pyarrow and zlog, is a fixed cost of a second or more per worker).

Usage: python bench/spark_bench.py [--rows N] [--repeat R] [--json PATH]
With --repeat, each figure is the median over the runs (each run on fresh topics).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any, Final

import psutil

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.broker_bench import running_broker  # noqa: E402
from zlog.client import Admin, NewTopic, Producer  # noqa: E402
from zlog.spark import ZlogSink  # noqa: E402
from zlog.spark.sink import ROWS_PER_CHUNK  # noqa: E402

VALUE_BYTES: Final = 100
TOPIC_PARTITIONS: Final = 3
SPARK_PARTITIONS: Final = 4
CALL_TIMEOUT_MS: Final = 10_000


def spark_session() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import zlog.spark

    session = (SparkSession.builder.master("local[2]").appName("zlog-spark-bench")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "2g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    zlog.spark.register(session)
    return session


def rows_frame(spark: Any, rows: int) -> Any:
    """`rows` rows of one 100-byte binary `value` (a zero-padded id, then filler), cached."""
    from pyspark.sql import functions as F

    frame = spark.range(0, rows, 1, SPARK_PARTITIONS).select(
        F.concat(F.lpad(F.col("id").cast("string"), 12, "0"),
                 F.lit("x" * (VALUE_BYTES - 12))).cast("binary").alias("value"))
    frame = frame.cache()
    assert frame.count() == rows
    return frame


def row_values(rows: int) -> list[bytes]:
    """The DataFrame's values, made in the driver (collecting them would load the JVM)."""
    filler = b"x" * (VALUE_BYTES - 12)
    return [b"%012d" % index + filler for index in range(rows)]


def new_topic(bootstrap: str, name: str) -> str:
    with Admin(bootstrap, request_timeout_ms=CALL_TIMEOUT_MS) as admin:
        admin.create_topics([NewTopic(name, TOPIC_PARTITIONS)])
    return name


def time_sink(frame: Any, bootstrap: str, topic: str) -> float:
    started = time.perf_counter()
    frame.foreachPartition(ZlogSink(bootstrap, topic))
    return time.perf_counter() - started


def count_rows(rows: Iterator[Any]) -> None:
    for _ in rows:
        pass


def time_row_handoff(frame: Any) -> float:
    started = time.perf_counter()
    frame.foreachPartition(count_rows)
    return time.perf_counter() - started


def time_sink_arrow(frame: Any, bootstrap: str, topic: str) -> float:
    started = time.perf_counter()
    delivered = ZlogSink(bootstrap, topic).write_dataframe(frame)
    elapsed = time.perf_counter() - started
    assert delivered == frame.count(), delivered
    return elapsed


def time_format_write(frame: Any, bootstrap: str, topic: str) -> float:
    started = time.perf_counter()
    frame.write.format("zlog").mode("append").option("bootstrap", bootstrap) \
        .option("topic", topic).save()
    return time.perf_counter() - started


def warm_up(spark: Any, frame: Any, bootstrap: str) -> None:
    """Start Spark's Python workers (and their imports) before anything is timed."""
    small = frame.limit(1000).repartition(SPARK_PARTITIONS)
    topic = new_topic(bootstrap, "spark-warm-up")
    small.foreachPartition(ZlogSink(bootstrap, topic))
    ZlogSink(bootstrap, topic).write_dataframe(small)
    time_format_write(small, bootstrap, topic)
    time_read(spark, bootstrap, topic, 3000)


def time_producer(values: list[bytes], bootstrap: str, topic: str) -> float:
    sink = ZlogSink(bootstrap, topic)
    with Producer(bootstrap, acks=sink.acks, linger_ms=sink.linger_ms,
                  batch_size=sink.batch_size, bulk_batch_size=sink.batch_size,
                  compression=sink.compression) as producer:
        producer.send_many(topic, values[:1]).result(30)  # metadata and producer id first
        started = time.perf_counter()
        futures = []
        iterator = iter(values[1:])
        while chunk := list(islice(iterator, ROWS_PER_CHUNK)):
            futures.append(producer.send_many(topic, chunk))
        producer.flush()
        elapsed = time.perf_counter() - started
        for future in futures:
            future.result(0)  # every batch acknowledged
    return elapsed


def time_read(spark: Any, bootstrap: str, topic: str, rows: int) -> float:
    from pyspark.sql import functions as F

    started = time.perf_counter()
    result = (spark.read.format("zlog").option("bootstrap", bootstrap).option("topic", topic)
              .load().agg(F.count("*").alias("rows"), F.sum(F.length("value")).alias("bytes"))
              .first())
    elapsed = time.perf_counter() - started
    assert result["rows"] == rows and result["bytes"] == rows * VALUE_BYTES, result
    return elapsed


def time_parquet(frame: Any, directory: Path) -> float:
    started = time.perf_counter()
    frame.write.mode("overwrite").parquet(str(directory / "rows.parquet"))
    return time.perf_counter() - started


def one_run(spark: Any, frame: Any, values: list[bytes], bootstrap: str, *, run: int,
            scratch: Path) -> dict[str, float]:
    rows = len(values)
    sink_topic = new_topic(bootstrap, f"spark-sink-{run}")
    producer_topic = new_topic(bootstrap, f"spark-producer-{run}")
    sink_s = time_sink(frame, bootstrap, sink_topic)
    producer_s = time_producer(values, bootstrap, producer_topic)
    read_s = time_read(spark, bootstrap, sink_topic, rows)
    parquet_s = time_parquet(frame, scratch)
    handoff_s = time_row_handoff(frame)
    arrow_s = time_sink_arrow(frame, bootstrap, new_topic(bootstrap, f"spark-arrow-{run}"))
    format_s = time_format_write(frame, bootstrap, new_topic(bootstrap, f"spark-format-{run}"))
    figures = {
        "sink_rows_per_s": rows / sink_s,
        "producer_rows_per_s": (rows - 1) / producer_s,
        "read_rows_per_s": rows / read_s,
        "parquet_rows_per_s": rows / parquet_s,
        "rows_to_python_rows_per_s": rows / handoff_s,
        "sink_arrow_rows_per_s": rows / arrow_s,
        "format_write_rows_per_s": rows / format_s,
    }
    producer = figures["producer_rows_per_s"]
    figures["sink_vs_producer_ratio"] = figures["sink_rows_per_s"] / producer
    figures["sink_arrow_vs_producer_ratio"] = figures["sink_arrow_rows_per_s"] / producer
    figures["format_write_vs_producer_ratio"] = figures["format_write_rows_per_s"] / producer
    print(f"run {run}: " + ", ".join(f"{k} {v:,.2f}" for k, v in figures.items()), flush=True)
    return figures


def machine() -> dict[str, Any]:
    import pyspark

    return {
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 1e9, 1),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "platform": platform.platform(),
        "load_average_at_start": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1, help="runs; figures are medians")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    info = machine()
    scratch = Path(tempfile.mkdtemp(prefix="zlog-spark-bench-"))
    try:
        with running_broker(workers=2) as broker:
            spark = spark_session()
            try:
                frame = rows_frame(spark, args.rows)
                values = row_values(args.rows)
                warm_up(spark, frame, broker.endpoint)
                runs = [one_run(spark, frame, values, broker.endpoint, run=run, scratch=scratch)
                        for run in range(args.repeat)]
            finally:
                spark.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    keys = ["sink_rows_per_s", "producer_rows_per_s", "sink_vs_producer_ratio",
            "read_rows_per_s", "parquet_rows_per_s", "rows_to_python_rows_per_s",
            "sink_arrow_rows_per_s", "format_write_rows_per_s", "sink_arrow_vs_producer_ratio",
            "format_write_vs_producer_ratio"]
    result: dict[str, Any] = {key: round(statistics.median(r[key] for r in runs), 3)
                              for key in keys}
    result.update(rows=args.rows, value_bytes=VALUE_BYTES, spark_master="local[2]",
                  spark_partitions=SPARK_PARTITIONS, topic_partitions=TOPIC_PARTITIONS,
                  runs=runs, machine=info)
    print(json.dumps({key: result[key] for key in keys}, indent=2))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
