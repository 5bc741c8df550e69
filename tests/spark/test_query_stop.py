"""`query.stop()` while `foreachBatch(ZlogSink(...))` is writing a micro-batch.

The stop interrupts the sink's Spark job. Spark must take that for the stop it is: status
"Stopped", no error, the batch left uncommitted for the next run. (It once took the long Java
stack trace in the sink's error for something to match with a backtracking regular expression,
and its stream thread died of a StackOverflowError: no error recorded, status never
"Stopped".) The sink writes to a topic that refuses acks=all (min.insync.replicas above its
one replica), so its producer is still retrying when the query is stopped: the stop lands in
the middle of the write every time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from zlog.client import Producer
from zlog.spark import ZlogSink
from zlog_testbed.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]

QUERY_TIMEOUT_S = 90.0
DELIVERY_TIMEOUT_MS = 120_000  # the write outlasts the test: only the stop ends it


def sink_job_running(spark: Any, query: Any) -> bool:
    """Whether a job of the query's current run is running; fails at once if the query died."""
    error = query.exception()
    if error is not None:
        raise AssertionError(f"the streaming query failed: {error}")
    tracker = spark.sparkContext.statusTracker()
    jobs = (tracker.getJobInfo(job) for job in tracker.getJobIdsForGroup(str(query.runId)))
    return any(info is not None and info.status == "RUNNING" for info in jobs)


def batch_ids(directory: Path) -> list[int]:
    return sorted(int(path.name) for path in directory.iterdir() if path.name.isdigit())


def test_stopping_a_query_in_the_middle_of_a_sink_write_stops_it_cleanly(
    spark: Any, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    source = make_topic(prefix="stop-in")
    sink = make_topic(prefix="stop-out", configs={"min.insync.replicas": "2"})
    with Producer(bootstrap) as producer:
        producer.send_many(source, [b"a", b"b", b"c"]).result(30)
    checkpoint = tmp_path / "checkpoint"
    query = (spark.readStream.format("zlog").option("bootstrap", bootstrap)
             .option("topic", source).option("startingOffsets", "earliest").load()
             .select("key", "value").writeStream
             .foreachBatch(ZlogSink(bootstrap, sink, delivery_timeout_ms=DELIVERY_TIMEOUT_MS))
             .option("checkpointLocation", str(checkpoint)).start())
    try:
        wait_until(lambda: sink_job_running(spark, query), QUERY_TIMEOUT_S, interval_s=0.05,
                   what="the sink's write of the first micro-batch")
    finally:
        query.stop()

    assert query.exception() is None
    assert query.status["message"] == "Stopped", (
        f"Spark did not take the interrupted write for a stop: its status is still "
        f"{query.status['message']!r} (the stream thread died; see the JVM's stderr)")
    assert batch_ids(checkpoint / "offsets") == [0]
    assert batch_ids(checkpoint / "commits") == [], "the interrupted batch is for the next run"
    offsets = json.loads((checkpoint / "offsets" / "0").read_text().splitlines()[-1])
    assert offsets == {source: {"0": 3}}
