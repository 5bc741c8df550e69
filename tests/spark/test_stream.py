"""Structured Streaming from topic to topic, stopped and restarted from its checkpoint.

The job counts views per (page, 10-second event-time window) and writes each updated count
to an output topic (key page|window start, value the count; output mode update, through
`foreachBatch(ZlogSink(...))`, since PySpark's data source writers take append and complete
mode only). Input
records carry explicit timestamps, so the true count of every window is known from what was
produced. A producer thread writes throughout: before the first query starts, while it runs,
while it is stopped and while the second query (same checkpoint) runs. When everything is
processed, the latest output record per key must equal the true count: a skipped input record
would leave a count too low, one counted twice a count too high.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.spark.helpers import read_all
from zlog.client import Producer
from zlog.spark import ZlogSink
from zlog_testbed.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PAGES = [f"/page-{n}" for n in range(5)]
WINDOW_MS = 10_000
BASE_MS = 1_700_000_000_000  # a multiple of WINDOW_MS: windows start at BASE_MS + k * 10 s
WINDOWS = 4
CHUNK_RECORDS = 150
CHUNKS_AFTER_RESTART = 8
QUERY_TIMEOUT_S = 90.0


def event(index: int) -> tuple[str, int]:
    """The page and event time (ms) of input record `index`: a fixed, mixed pattern."""
    page = PAGES[(index * 7 + index // 5) % len(PAGES)]
    window = (index // 3) % WINDOWS
    return page, BASE_MS + window * WINDOW_MS + (index * 613) % WINDOW_MS


def window_key(page: str, stamp_ms: int) -> str:
    start_ms = stamp_ms - stamp_ms % WINDOW_MS
    start = datetime.fromtimestamp(start_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{page}|{start}"


class ClickProducer(threading.Thread):
    """Writes chunks of clicks until told the query restarted, then a few chunks more."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="click-producer", daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.produced = 0
        self.restarted = threading.Event()
        self.finished = threading.Event()
        self.error: BaseException | None = None
        self._pace = threading.Event()  # never set: wait() on it paces the chunks

    def run(self) -> None:
        try:
            with Producer(self.bootstrap, acks="all", linger_ms=1) as producer:
                chunks_after = 0
                while chunks_after < CHUNKS_AFTER_RESTART:
                    if self.restarted.is_set():
                        chunks_after += 1
                    for index in range(self.produced, self.produced + CHUNK_RECORDS):
                        page, stamp_ms = event(index)
                        producer.send(self.topic, page.encode(), key=page.encode(),
                                      timestamp_ms=stamp_ms)
                    producer.flush()
                    self.produced += CHUNK_RECORDS
                    self._pace.wait(0.2)
        except BaseException as error:
            self.error = error
        finally:
            self.finished.set()


def start_counting(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: Path) -> Any:
    from pyspark.sql import functions as F

    clicks = (spark.readStream.format("zlog").option("bootstrap", bootstrap)
              .option("topic", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", 400).load())
    counts = (clicks
              .groupBy(F.window("timestamp", "10 seconds"), F.col("value").cast("string")
                       .alias("page"))
              .count())
    out = counts.select(
        F.concat_ws("|", "page", F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss"))
        .alias("key"),
        F.col("count").cast("string").alias("value"),
    )
    return (out.writeStream.foreachBatch(ZlogSink(bootstrap, sink))
            .option("checkpointLocation", str(checkpoint)).outputMode("update")
            .trigger(processingTime="200 milliseconds").start())


def batches_with_input(query: Any) -> int:
    """Micro-batches that read something; fails at once if the query died."""
    error = query.exception()
    if error is not None:
        raise AssertionError(f"the streaming query failed: {error}")
    return sum(1 for progress in query.recentProgress if progress["numInputRows"] > 0)


def checkpointed_offsets(checkpoint: Path) -> dict[str, dict[str, int]]:
    """The source offsets of the last batch in Spark's offset log (its last line)."""
    batches = [path for path in (checkpoint / "offsets").iterdir() if path.name.isdigit()]
    last = max(batches, key=lambda path: int(path.name))
    offsets: dict[str, dict[str, int]] = json.loads(last.read_text().splitlines()[-1])
    return offsets


@pytest.fixture
def producer_thread(bootstrap: str, make_topic: Callable[..., str]) -> Iterator[ClickProducer]:
    thread = ClickProducer(bootstrap, make_topic(partitions=3, prefix="clicks"))
    thread.start()
    yield thread
    thread.restarted.set()
    thread.join(QUERY_TIMEOUT_S)


def test_restart_from_checkpoint_while_producing_skips_and_repeats_nothing(
    spark: Any, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path,
    producer_thread: ClickProducer,
) -> None:
    sink = make_topic(partitions=2, prefix="page-counts")
    checkpoint = tmp_path / "checkpoint"
    wait_until(lambda: producer_thread.produced >= 2 * CHUNK_RECORDS, QUERY_TIMEOUT_S,
               interval_s=0.05, what="the first clicks")

    first = start_counting(spark, bootstrap, producer_thread.topic, sink, checkpoint)
    try:
        wait_until(lambda: batches_with_input(first) >= 3, QUERY_TIMEOUT_S, interval_s=0.1,
                   what="three micro-batches with input in the first query")
    finally:
        first.stop()
    produced_at_stop = producer_thread.produced
    assert first.exception() is None
    offsets = checkpointed_offsets(checkpoint)
    assert set(offsets) == {producer_thread.topic}
    assert set(offsets[producer_thread.topic]) == {"0", "1", "2"}

    second = start_counting(spark, bootstrap, producer_thread.topic, sink, checkpoint)
    try:
        producer_thread.restarted.set()
        wait_until(producer_thread.finished.is_set, QUERY_TIMEOUT_S, interval_s=0.05,
                   what="the producer to finish")
        assert producer_thread.error is None, producer_thread.error
        assert producer_thread.produced > produced_at_stop, "clicks kept coming across restart"
        second.processAllAvailable()
        assert batches_with_input(second) >= 1
    finally:
        second.stop()
    assert second.exception() is None

    truth = Counter(window_key(*event(index)) for index in range(producer_thread.produced))
    latest: dict[str, int] = {}
    for record in read_all(bootstrap, sink):  # offset order per partition; a key keeps one
        assert record.key is not None and record.value is not None
        latest[record.key.decode()] = int(record.value)
    assert latest == dict(truth)


def test_write_stream_copies_a_topic_in_append_mode(
    spark: Any, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    source = make_topic(partitions=3, prefix="copy-in")
    sink = make_topic(partitions=2, prefix="copy-out")
    with Producer(bootstrap) as producer:
        producer.send_many(source, [f"v{i}".encode() for i in range(3000)],
                           keys=[f"k{i}".encode() for i in range(3000)]).result(30)
    stream = (spark.readStream.format("zlog").option("bootstrap", bootstrap)
              .option("topic", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", 1000).load())
    query = (stream.select("key", "value", "headers").writeStream.format("zlog")
             .option("bootstrap", bootstrap).option("topic", sink)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .outputMode("append").start())
    try:
        query.processAllAvailable()
        rows_per_batch = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    assert query.exception() is None
    assert max(rows_per_batch) <= 1000, "maxOffsetsPerTrigger caps each micro-batch"
    copied = read_all(bootstrap, sink)
    assert sorted((r.key, r.value) for r in copied) == sorted(
        (f"k{i}".encode(), f"v{i}".encode()) for i in range(3000))


def test_write_stream_in_complete_mode_appends_each_whole_result(
    spark: Any, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    source = make_topic(partitions=2, prefix="complete-in")
    sink = make_topic(partitions=1, prefix="complete-out")
    with Producer(bootstrap) as producer:
        producer.send_many(source, [b"a", b"b", b"a"]).result(30)
    counts = (spark.readStream.format("zlog").option("bootstrap", bootstrap)
              .option("topic", source).option("startingOffsets", "earliest").load()
              .groupBy(F.col("value").cast("string").alias("key")).count()
              .select("key", F.col("count").cast("string").alias("value")))
    query = (counts.writeStream.format("zlog").option("bootstrap", bootstrap)
             .option("topic", sink).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .outputMode("complete").start())
    try:
        query.processAllAvailable()
        with Producer(bootstrap) as producer:
            producer.send_many(source, [b"a"]).result(30)
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    written = sorted((r.key, r.value) for r in read_all(bootstrap, sink))
    assert written == [(b"a", b"2"), (b"a", b"3"), (b"b", b"1"), (b"b", b"1")]
