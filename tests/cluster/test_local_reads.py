"""Local consumers on a cluster: reading an in-sync follower's ring (KIP-392's fetch from a
follower, done on the follower's host), also while the leader is killed under load, and
following leadership away from this host's broker and back.

All three brokers run on this machine, each with its own ring directory; `client_rack` or
`ring_dir` tells the consumer which of them is "its" broker, so a read from any other
broker's ring would show (docs/replication.md §2.6).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import psutil
import pytest

from tests.production import Production, Tailing, check_log, producing
from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from zlog.client.local_ring import ring_path_for
from zlog.shm_segments.ring import RingReader
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

RACKS: Final = {1: "r1", 2: "r2", 3: "r3"}
WAIT_S: Final = 30.0
COMMITTED: Final = 300
UNCOMMITTED: Final = 5
RECORDS_MAX: Final = 1_000_000  # production runs until stopped, well before this
RECORDS_PER_S: Final = 2_000
PROGRESS: Final = 1_000  # records the consumer must read between two checks


def _values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{index:06d}".encode() for index in range(count)]


def _poll(consumer: Consumer, count: int) -> list[tuple[int, bytes]]:
    """At least `count` (offset, value) pairs, or fail after WAIT_S."""
    read: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + WAIT_S
    while len(read) < count:
        assert time.monotonic() < deadline, f"{len(read)} of {count} records in {WAIT_S} s"
        read += [(r.offset, r.value or b"") for r in consumer.poll(100)]
    return read


def _ring_of(cluster: ClusterProcesses, node: int, topic: str) -> Path:
    return ring_path_for(cluster.broker(node).ring_dir.resolve(), topic, 0)


def test_a_consumer_reads_an_in_sync_followers_ring_up_to_its_high_watermark(
        tmp_path: Path) -> None:
    """The consumer names the rack of a follower's broker: it reads that follower's ring, the
    very records and offsets the leader serves, and nothing above the high watermark even
    when the follower already holds more (the other follower is frozen, so the leader takes
    acks=1 records that only it and this follower have)."""
    with cluster_processes(3, tmp_path, racks=RACKS) as cluster:
        topic = "follower-reads"
        tp = TopicPartition(topic, 0)
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics([NewTopic(topic, 1, replication_factor=3)])
        cluster.wait_isr(topic, 0, {1, 2, 3})
        leader = cluster.partition(topic, 0).leader
        follower, frozen = sorted({1, 2, 3} - {leader})
        committed = _values("committed", COMMITTED)
        with Producer(cluster.bootstrap, acks="all", linger_ms=2) as producer:
            for value in committed:
                producer.send(topic, value, partition=0)
            producer.flush(timeout_ms=int(WAIT_S * 1000))

        consumer = Consumer(cluster.bootstrap, local=True, client_rack=RACKS[follower],
                            auto_offset_reset="earliest", fetch_max_wait_ms=100)
        consumer.assign([tp])
        read = _poll(consumer, COMMITTED)
        assert read == list(enumerate(committed))  # the leader's offsets, each value once
        follower_ring = _ring_of(cluster, follower, topic)
        assert consumer.local_ring_path(tp) == follower_ring
        assert consumer.ring_batches_read > 0

        paused = cluster.broker(frozen).worker_pids()
        for pid in paused:
            psutil.Process(pid).suspend()
        try:
            uncommitted = _values("uncommitted", UNCOMMITTED)
            with Producer(cluster.bootstrap, acks=1, linger_ms=0) as producer:
                for value in uncommitted:
                    producer.send(topic, value, partition=0)
                producer.flush(timeout_ms=int(WAIT_S * 1000))
            with RingReader(follower_ring) as ring:  # the follower holds them, uncommitted
                wait_until(lambda: ring.next_offset == COMMITTED + UNCOMMITTED, WAIT_S,
                           what="the follower to copy the acks=1 records")
                assert ring.visible_end_offset == COMMITTED
            for _ in range(5):  # the frozen follower holds the high watermark back
                read += [(r.offset, r.value or b"") for r in consumer.poll(100)]
            assert len(read) == COMMITTED
            assert consumer.highwater(tp) == COMMITTED
        finally:
            for pid in paused:
                psutil.Process(pid).resume()
        read += _poll(consumer, UNCOMMITTED)
        assert read == list(enumerate(committed + uncommitted))
        assert consumer.local_ring_path(tp) == follower_ring
        consumer.close()


class _LoadAndTail:
    """An idempotent acks=all producer at RECORDS_PER_S on one partition, and a consumer
    (`consumer_options`) tailing it from the start on a thread: never an error, and at the
    end exactly the log, in order, each record once (tests/production.py)."""

    def __init__(self, cluster: ClusterProcesses, topic: str, seed: int,
                 **consumer_options: Any) -> None:
        self.cluster, self.seed = cluster, seed
        producer = Producer(cluster.bootstrap, acks="all", linger_ms=1, batch_size=4096,
                            request_timeout_ms=1_500, retry_backoff_ms=50,
                            delivery_timeout_ms=int(WAIT_S * 1000))
        self.production = Production(producer, seed, topic=topic, partitions=1,
                                     records=RECORDS_MAX, window=500, deadline_s=WAIT_S,
                                     records_per_s=RECORDS_PER_S)
        self.tailing = Tailing(cluster.bootstrap, topic, 1, retry_backoff_ms=50,
                               request_timeout_ms=1_500, **consumer_options)
        self.consumer = self.tailing.consumer

    def read(self) -> int:
        return len(self.tailing.read[0])

    def read_past(self, count: int, what: str) -> None:
        wait_until(lambda: self.tailing.failure is not None or self.read() > count,
                   WAIT_S, interval_s=0.02, what=what)
        assert self.tailing.failure is None, repr(self.tailing.failure)

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        with producing(self.production):
            self.tailing.start()
            yield
        log = check_log(self.cluster.bootstrap, self.production, self.seed, set())
        self.tailing.stop_and_check(log, WAIT_S)


def _create(cluster: ClusterProcesses, topic: str) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, replication_factor=3,
                                      configs={"min.insync.replicas": "2"})])
    cluster.wait_isr(topic, 0, {1, 2, 3})


@contextlib.contextmanager
def _explained(details: Callable[[], str]) -> Iterator[None]:
    """A wait that times out says what the consumer and the rings looked like then."""
    try:
        yield
    except AssertionError as stuck:
        try:
            said = details()
        except Exception as error:  # the details are a help, never the failure
            said = f"(no details: {error!r})"
        raise AssertionError(f"{stuck}\n{said}") from None


def _where(load: _LoadAndTail, cluster: ClusterProcesses, home: int, topic: str) -> str:
    consumer, tp = load.consumer, TopicPartition(topic, 0)
    lines = [f"read {load.read()}, position {consumer.position(tp)}, ring batches read "
             f"{consumer.ring_batches_read}, reading {consumer.local_ring_path(tp)}, "
             f"its metadata: {consumer._connections.metadata.partition(topic, 0)}",
             f"cluster: {cluster.partition(topic, 0)}"]
    with contextlib.suppress(Exception), RingReader(_ring_of(cluster, home, topic)) as ring:
        lines.append(f"broker {home}'s ring: {ring.snapshot()}, visible end "
                     f"{ring.visible_end_offset}, writer pid {ring.writer_pid}")
    return "\n".join(lines)


def _kill_leader(cluster: ClusterProcesses, topic: str) -> int:
    """kill -9 the leader's broker and wait for another leader; the killed broker's id."""
    leader = cluster.partition(topic, 0).leader
    cluster.broker(leader).kill_all()
    cluster.wait_for(lambda p: p.leader not in (leader, -1) and bool(p.endpoint),
                     topic, 0, f"a leader other than {leader}")
    return leader


def test_a_consumer_on_a_followers_ring_reads_on_when_the_leader_is_killed(
        tmp_path: Path, seed: int) -> None:
    """Reading a follower's ring (by its rack) under acks=all load, the leader is killed: the
    follower's ring stays (it leads now, or follows the new leader), and the consumer reads on
    from it with no error, no gap, no record twice."""
    with cluster_processes(3, tmp_path, racks=RACKS) as cluster:
        topic = "follower-kill"
        _create(cluster, topic)
        leader = cluster.partition(topic, 0).leader
        follower = min({1, 2, 3} - {leader})
        load = _LoadAndTail(cluster, topic, seed, local=True, client_rack=RACKS[follower])
        with load.running():
            load.read_past(PROGRESS, f"{PROGRESS} records read")
            assert load.consumer.ring_batches_read > 0, "read from the follower's ring"
            _kill_leader(cluster, topic)
            on_ring = load.consumer.ring_batches_read
            load.read_past(load.read() + PROGRESS, "reading on without the old leader")
            assert load.consumer.ring_batches_read > on_ring, "still from the follower's ring"


def test_a_local_consumer_follows_its_leader_to_another_broker_and_back(
        tmp_path: Path, seed: int) -> None:
    """The consumer's broker (`ring_dir`) leads; it is killed under acks=all load: the
    consumer goes on over the network with the new leader, and once its broker is back and
    leads again, returns to its ring. Throughout: no error, no gap, no record twice."""
    with cluster_processes(3, tmp_path, extra_args=("--auto-leader-rebalance", "false"),
                           ) as cluster:
        topic = "follow-leader"
        _create(cluster, topic)
        home = cluster.partition(topic, 0).leader
        assert cluster.partition(topic, 0).replicas[0] == home  # the preferred leader
        # Metadata that never gets old: the consumer must leave the dead ring because its
        # writer is gone, and come back because the old leader's answer says it moved.
        load = _LoadAndTail(cluster, topic, seed, local=True,
                            ring_dir=cluster.broker(home).ring_dir,
                            local_metadata_max_age_ms=600_000)
        consumer = load.consumer
        with load.running():
            load.read_past(PROGRESS, f"{PROGRESS} records read")
            assert consumer.ring_batches_read > 0, "read from its broker's ring"

            assert _kill_leader(cluster, topic) == home
            with RingReader(_ring_of(cluster, home, topic)) as ring:
                dead_end = ring.next_offset  # all the killed leader's ring will ever hold
            load.read_past(dead_end, "records only the new leader has")
            on_ring = consumer.ring_batches_read
            load.read_past(load.read() + PROGRESS, "reading on while its broker is down")
            assert consumer.ring_batches_read == on_ring, "no ring but its broker's"

            cluster.broker(home).start()
            cluster.wait_isr(topic, 0, {1, 2, 3})
            with Admin(cluster.bootstrap) as admin:
                assert admin.elect_preferred_leaders() == 1
            cluster.wait_for(lambda p: p.leader == home and bool(p.endpoint), topic, 0,
                             f"broker {home} leading again")
            with _explained(lambda: _where(load, cluster, home, topic)):
                wait_until(lambda: load.tailing.failure is not None
                           or consumer.ring_batches_read > on_ring, WAIT_S, interval_s=0.02,
                           what="the consumer back on its broker's ring")
                load.read_past(load.read() + PROGRESS, "reading on from the ring")
