"""Retention never deletes what the followers may not hold yet: segments wait for the high
watermark.

A leader whose follower stops fetching keeps its high watermark (HW) where that follower was.
Retention that deleted the segments above it would move the log start past the HW, and the
leader takes its log start as a floor for its HW: acks=all batches held by the leader alone
would be acknowledged, and they are gone; the follower, back, finds its log end below the
leader's log start and starts over there, never having held them.

Here the follower's fetches are cut (its broker still heartbeats, and `replica.lag.time.max.ms`
is long, so it stays in the ISR) while acks=all batches wait and acks=1 traffic rolls segments
past a tiny `retention.bytes`. The cut is the leader's data port, from every other broker; the
test's clients still reach it. No acks=all batch may be acknowledged before the follower
fetches again, and the follower must never have to start over.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Final

import pytest

from tests.cluster.test_replication import _values
from zlog.client import Admin, NewTopic, Producer, RecordMetadata
from zlog_testbed.cluster_network import ProxiedCluster, proxied_cluster
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC: Final = "retained"
WAIT_S: Final = 60.0
SEGMENT_BYTES: Final = 2_048
BATCH_BYTES: Final = 512
LAG_TIME_MAX_MS: Final = 120_000  # the cut follower stays in the ISR for the whole test


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ProxiedCluster]:
    with proxied_cluster(3, tmp_path, extra_args=[
            "--replica-lag-time-max-ms", str(LAG_TIME_MAX_MS)]) as running:
        yield running


def _retention_ran(cluster: ProxiedCluster, leader: int) -> bool:
    """The leader's retention pass met the rolled segments: it deleted some, or said it
    waits for the high watermark."""
    text = cluster.broker(leader).log_text()
    return (f"segments of {TOPIC}-0" in text
            or f"{TOPIC}-0: retention waits for the high watermark" in text)


def test_retention_waits_for_a_cut_off_follower_and_acknowledges_nothing_without_it(
        cluster: ProxiedCluster) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, replication_factor=2, configs={
            "min.insync.replicas": "2", "segment.bytes": str(SEGMENT_BYTES),
            "retention.bytes": "0"})])
    cluster.wait_for(lambda p: len(p.isr) == 2 and bool(p.endpoint), TOPIC, 0,
                     "both replicas in sync")
    partition = cluster.partition(TOPIC, 0)
    leader = partition.leader
    follower = next(r for r in partition.replicas if r != leader)
    acked_at: dict[int, float] = {}  # record index -> when it was acknowledged
    healed_at = float("inf")
    safe = Producer(cluster.bootstrap, acks="all", linger_ms=0, batch_size=BATCH_BYTES)
    try:
        safe.send(TOPIC, b"before the cut", partition=0).result(timeout=WAIT_S)
        cluster.isolate(leader, ("data",))
        futures: list[Future[RecordMetadata]] = []
        for index, value in enumerate(_values("acks-all", 20)):
            future = safe.send(TOPIC, value, partition=0)
            future.add_done_callback(
                lambda done, index=index: done.exception() is None
                and acked_at.setdefault(index, time.monotonic()))
            futures.append(future)
        with Producer(cluster.bootstrap, acks=1, linger_ms=0, batch_size=BATCH_BYTES,
                      bulk_batch_size=BATCH_BYTES, compression=None) as fast:
            for value in _values("acks-1", 300):  # several segments past retention.bytes
                fast.send(TOPIC, value, partition=0)
            fast.flush(timeout_ms=int(WAIT_S * 1000))
            wait_until(lambda: _retention_ran(cluster, leader), WAIT_S,
                       what="a retention pass on the leader")
        healed_at = time.monotonic()
        cluster.heal()
        for future in futures:
            future.result(timeout=WAIT_S)
    finally:
        cluster.heal()
        safe.close()
    early = sorted(index for index, at in acked_at.items() if at < healed_at)
    assert not early, f"acks=all records {early} acknowledged while the follower was cut off"
    assert "starting over" not in cluster.broker(follower).log_text(), \
        "the follower lacked acknowledged records the leader had deleted"
    assert f"{TOPIC}-0: retention waits for the high watermark" in \
        cluster.broker(leader).log_text(), "a log past its retention says why"
