"""An idempotent producer idle while segments roll keeps its place across a truncation and a
leader change (docs/storage.md, "Producer-state snapshots").

Followers keep the producer table in memory as they copy batches, so a leader kill alone
loses nothing; the table is *rebuilt* when a replica cuts its log (or reopens it). Here the
old leader comes back with a divergent tail, cuts it, and is elected again: its rebuilt table
must still know the producer that sent a few records and then waited while another rolled a
dozen segments, or that producer's next send fails with UNKNOWN_PRODUCER_ID.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.cluster.test_replication import _consume_all, _values
from tests.cluster.test_truncation import divergent_tail_then_leader_killed
from zlog.client import Admin, NewTopic, Producer
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes

pytestmark = pytest.mark.slow

TOPIC: Final = "idle"
WAIT_S: Final = 60.0
SEGMENT_BYTES: Final = 2_048  # a few batches a segment: the busy producer rolls many
BATCH_BYTES: Final = 512


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    with cluster_processes(3, tmp_path) as running:
        yield running


def _send(producer: Producer, values: list[bytes]) -> list[int]:
    futures = [producer.send(TOPIC, value, partition=0) for value in values]
    return [future.result(timeout=WAIT_S).offset for future in futures]


def _small_batches(bootstrap: str, *, acks: str) -> Producer:
    return Producer(bootstrap, acks=acks, linger_ms=0, batch_size=BATCH_BYTES,
                    bulk_batch_size=BATCH_BYTES, compression=None)


def test_an_idle_producer_sends_on_to_a_leader_that_cut_its_log(
        cluster: ClusterProcesses) -> None:
    """The idle producer's next send is in order on the old leader after that replica cut
    its divergent tail and was elected again: one copy of every record, none refused."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, replication_factor=2, configs={
            "min.insync.replicas": "1", "segment.bytes": str(SEGMENT_BYTES)})])
    cluster.wait_for(lambda p: len(p.isr) == 2 and bool(p.endpoint), TOPIC, 0,
                     "both replicas in sync")
    partition = cluster.partition(TOPIC, 0)
    leader = partition.leader
    follower = next(r for r in partition.replicas if r != leader)
    idle = Producer(cluster.bootstrap, acks="all", linger_ms=0)
    try:
        before = _values("idle-before", 3)
        _send(idle, before)
        busy = _values("busy", 1_000)  # about a dozen segments after the idle producer's
        with _small_batches(cluster.bootstrap, acks="all") as producer:
            _send(producer, busy)

        def unreplicated() -> None:  # a tail the frozen follower never fetches
            with _small_batches(cluster.endpoints[leader], acks="1") as producer:
                _send(producer, _values("unreplicated", 100))

        divergent_tail_then_leader_killed(cluster, TOPIC, leader, follower, unreplicated)
        later = _values("later", 100)  # the new leader's epoch holds batches
        with _small_batches(cluster.bootstrap, acks="all") as producer:
            _send(producer, later)
        cluster.broker(leader).start()  # cuts its divergent tail, catches up
        cluster.wait_isr(TOPIC, 0, {leader, follower})
        assert "where it diverged from its leader" in cluster.broker(leader).log_text()
        cluster.broker(follower).kill_all()
        cluster.wait_for(lambda p: p.leader == leader and bool(p.endpoint), TOPIC, 0,
                         "the old leader leading again")
        after = _values("idle-after", 3)
        _send(idle, after)
    finally:
        idle.close()
    expected = before + busy + later + after
    assert _consume_all(cluster.bootstrap, TOPIC, 0, len(expected)) == expected
