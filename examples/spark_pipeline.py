"""A clickstream pipeline on Spark and zlog: events in, page views per 10-second window out.

Three parts, in one process for the demo:

1. a generator thread writes click events into topic `clicks` (key: the user, value: JSON
   {"user": ..., "page": ...}, record timestamp: the time of the click);
2. a Structured Streaming job (local Spark) reads `clicks` with the zlog source, counts views
   per page per 10-second window of the record timestamps, and writes every updated count to
   `page-counts` (key: "page|window start", value: the count) through `foreachBatch` with
   zlog's sink (output mode update);
3. a zlog Consumer on `page-counts` prints the counts as they change.

Against `make run` (a broker on tcp://127.0.0.1:7400), in a second terminal:

    .venv/bin/python examples/spark_pipeline.py --duration-s 60

`--bootstrap` names another broker's control endpoint; as for the `zlog` command, its default
is $ZLOG_BOOTSTRAP, else tcp://127.0.0.1:7400:

    .venv/bin/python examples/spark_pipeline.py --bootstrap tcp://10.0.0.7:7400

The topics are created if missing. Stopping and starting the script again resumes the job
from its checkpoint (`--checkpoint`, by default ./spark-checkpoints/page-counts): counts
continue where they stopped, nothing is counted twice.

It exits 0 when the job ran for --duration-s (or until Ctrl-C) and stopped cleanly. It prints
the error and exits 1 when the topics cannot be created, when the streaming query fails (a
micro-batch that cannot be read or written fails it), or when Spark's stream thread ends
without stopping cleanly and without recording an error.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import zlog.spark
from zlog.client import Admin, Consumer, NewTopic, Producer
from zlog.errors import ErrorCode, ZlogError
from zlog.spark import ZlogSink
from zlog.spark.options import DEFAULT_BOOTSTRAP

PAGES = ["/home", "/search", "/cart", "/checkout", "/product/1", "/product/2", "/help"]
CLICKS_PARTITIONS = 3
COUNTS_PARTITIONS = 2
CLEAN_END_STATUSES = frozenset({"Stopped", "Initializing sources"})
"""Spark's last status of a query that stopped cleanly ("Initializing sources" when it was
stopped before its first trigger). Any other means its stream thread ended some other way."""


def ensure_topics(bootstrap: str, clicks: str, counts: str) -> None:
    with Admin(bootstrap) as admin:
        for name, partitions in ((clicks, CLICKS_PARTITIONS), (counts, COUNTS_PARTITIONS)):
            try:
                admin.create_topics([NewTopic(name, partitions)])
            except ZlogError as error:
                if error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise


def generate_clicks(bootstrap: str, topic: str, rate_per_s: float, stop: threading.Event) -> None:
    """Clicks at about `rate_per_s`, each stamped with the moment it happened."""
    rng = random.Random(7)
    with Producer(bootstrap, linger_ms=20) as producer:
        while not stop.is_set():
            user = f"user-{rng.randrange(500)}"
            page = rng.choices(PAGES, weights=[30, 20, 10, 5, 15, 15, 5])[0]
            event = json.dumps({"user": user, "page": page}).encode()
            producer.send(topic, event, key=user.encode(), timestamp_ms=int(time.time() * 1000))
            stop.wait(rng.expovariate(rate_per_s))


def start_counting(spark: Any, bootstrap: str, clicks: str, counts: str,
                   checkpoint: Path) -> Any:
    events = (spark.readStream.format("zlog").option("bootstrap", bootstrap)
              .option("topic", clicks).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", 10_000).load())
    views = events.select(
        F.col("timestamp"),
        F.from_json(F.col("value").cast("string"), "user string, page string")["page"]
        .alias("page"),
    )
    per_window = views.groupBy(F.window("timestamp", "10 seconds"), "page").count()
    out = per_window.select(
        F.concat_ws("|", "page", F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss"))
        .alias("key"),
        F.col("count").cast("string").alias("value"),
    )
    return (out.writeStream.foreachBatch(ZlogSink(bootstrap, counts))
            .option("checkpointLocation", str(checkpoint))
            .outputMode("update").trigger(processingTime="2 seconds").start())


def print_counts(bootstrap: str, topic: str, stop: threading.Event) -> None:
    with Consumer(bootstrap, auto_offset_reset="latest") as consumer:
        consumer.assign([(topic, p) for p in range(COUNTS_PARTITIONS)])
        while not stop.is_set():
            for record in consumer.poll(timeout_ms=500):
                page, window = (record.key or b"?|?").decode().split("|", 1)
                views = (record.value or b"").decode()
                print(f"{window}  {page:<12} {views:>6} views", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap",
                        default=os.environ.get("ZLOG_BOOTSTRAP", DEFAULT_BOOTSTRAP),
                        help="a broker's control endpoint [env ZLOG_BOOTSTRAP] "
                             f"(default {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--clicks-topic", default="clicks")
    parser.add_argument("--counts-topic", default="page-counts")
    parser.add_argument("--rate", type=float, default=200.0, help="clicks per second")
    parser.add_argument("--duration-s", type=float, default=60.0)
    parser.add_argument("--checkpoint", type=Path,
                        default=Path("spark-checkpoints") / "page-counts")
    return parser.parse_args(argv)


def run(spark: Any, args: argparse.Namespace) -> int:
    """The pipeline on `spark` for args.duration_s: 0, or 1 once the failure is printed."""
    zlog.spark.register(spark)
    try:
        ensure_topics(args.bootstrap, args.clicks_topic, args.counts_topic)
    except ZlogError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    query = start_counting(spark, args.bootstrap, args.clicks_topic, args.counts_topic,
                           args.checkpoint)
    stop = threading.Event()
    threads = [
        threading.Thread(target=generate_clicks, name="clicks",
                         args=(args.bootstrap, args.clicks_topic, args.rate, stop)),
        threading.Thread(target=print_counts, name="counts",
                         args=(args.bootstrap, args.counts_topic, stop)),
    ]
    for thread in threads:
        thread.start()
    try:
        query.awaitTermination(args.duration_s)
    except StreamingQueryException:
        pass  # the query failed: query.exception() holds the error, reported below
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        query.stop()
        for thread in threads:
            thread.join()
    failure = query_failure(query)
    if failure is not None:
        print(failure, file=sys.stderr)
        return 1
    return 0


def query_failure(query: Any) -> str | None:
    """What went wrong with the stopped `query`, or None if it stopped cleanly.

    A failed query has its error. A stream thread that died of an error Spark could not
    record (it logs it, e.g. a java.lang.StackOverflowError) leaves no error, only a status
    that never reached "Stopped".
    """
    error = query.exception()
    if error is not None:
        message = str(error).split("=== Streaming Query ===")[0].strip()  # not the whole plan
        return f"the streaming query failed: {message}"
    status = query.status["message"]
    if status not in CLEAN_END_STATUSES:
        return (f"the streaming query did not stop cleanly: its stream thread ended with "
                f"status {status!r} and no error recorded (see Spark's log above)")
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Spark's Python workers run this interpreter, which has zlog.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("zlog-page-counts")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        return run(spark, args)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
