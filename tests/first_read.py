"""The tests of deleted records: a replicated partition with records to delete, where a zlog
consumer's first record comes from, and the log start a replica keeps on its disk."""

from __future__ import annotations

import time
from pathlib import Path

from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from zlog.shm_segments.log import LOG_START_FILE, partition_dir_name
from zlog_testbed.cluster_processes import ClusterProcesses


def replicated_records(cluster: ClusterProcesses, tp: TopicPartition, count: int, *,
                       timeout_s: float = 60.0) -> int:
    """A topic of one partition on every broker of a 3-broker `cluster` (min.insync.replicas
    2), all in sync, `count` records written to it with acks=all; returns its leader."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(tp.topic, 1, replication_factor=3,
                                      configs={"min.insync.replicas": "2"})])
    cluster.wait_isr(tp.topic, tp.partition, {1, 2, 3})
    with Producer(cluster.bootstrap, acks="all", linger_ms=0) as producer:
        for i in range(count):
            producer.send(tp.topic, b"%d" % i, partition=tp.partition).result(timeout=timeout_s)
    return cluster.partition(tp.topic, tp.partition).leader


def first_offset_read(bootstrap: str, tp: TopicPartition, from_offset: int, *,
                      reset: str = "earliest", timeout_s: float = 30.0) -> int:
    """The offset of the first record a consumer positioned at `from_offset` reads, with
    `reset` as its auto_offset_reset (a position below the log start is out of range: "none"
    raises OFFSET_OUT_OF_RANGE from poll)."""
    with Consumer(bootstrap, auto_offset_reset=reset, fetch_max_wait_ms=100,
                  request_timeout_ms=int(timeout_s * 1000)) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, from_offset)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            records = consumer.poll(200)
            if records:
                return records[0].offset
    raise AssertionError(f"nothing read from {tp} at {from_offset}")


def stored_log_start(data_dir: Path, tp: TopicPartition) -> int:
    """The log start a broker whose data directory is `data_dir` keeps on its disk for `tp`
    (0 while it never moved)."""
    path = data_dir / partition_dir_name(tp.topic, tp.partition) / LOG_START_FILE
    try:
        return int(path.read_text().strip() or 0)
    except FileNotFoundError:
        return 0
