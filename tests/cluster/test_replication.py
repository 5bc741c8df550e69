"""Three brokers on 127.0.0.1-3: registration, ISR replication, acks=all, restart and rejoin.

Each test runs a real cluster (`zlog_testbed/cluster_processes.py`): three `zlog serve`
processes, each a voter of the metadata log, with partition workers that replicate worker to
worker over TCP.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import psutil
import pytest

from tests.cluster_fixtures import log_bytes
from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

RECORDS: Final = 3_000
WAIT_S: Final = 60.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    with cluster_processes(3, tmp_path) as running:
        yield running


def _values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{index:06d}".encode() for index in range(count)]


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer(bootstrap, acks="all", linger_ms=2)
    try:
        futures = [producer.send(topic, value, partition=partition) for value in values]
        offsets = [future.result(timeout=WAIT_S).offset for future in futures]
    finally:
        producer.close()
    assert offsets == list(range(offsets[0], offsets[0] + len(values)))


def _consume_all(bootstrap: str, topic: str, partition: int, count: int) -> list[bytes]:
    consumer = Consumer(bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, partition)])
    values: list[bytes] = []
    try:
        for _ in range(2_000):
            values += [record.value for record in consumer.poll(200) if record.value is not None]
            if len(values) >= count:
                break
    finally:
        consumer.close()
    return values


def test_a_cluster_forms_and_every_broker_answers_for_it(cluster: ClusterProcesses) -> None:
    for broker in cluster.brokers.values():  # each applies the registrations in its turn
        wait_until(lambda broker=broker: sorted(
            b.node_id for b in broker.metadata(None).brokers) == [1, 2, 3], WAIT_S,
            what="every broker registered")
        assert broker.metadata(None).controller_id in (1, 2, 3)
    with Admin(cluster.endpoints[2]) as admin:
        described = admin.describe_cluster()  # forwarded to the controller
    assert [(b.node_id, b.state) for b in described.brokers] == [
        (1, "live"), (2, "live"), (3, "live")]
    assert len({b.broker_epoch for b in described.brokers}) == 3
    assert described.voter_lag_blocks is not None
    assert sorted(described.voter_lag_blocks) == [1, 2, 3]
    # A metadata change sent to any broker is forwarded to the controller.
    for node in (1, 2, 3):
        with Admin(cluster.endpoints[node]) as admin:
            admin.create_topics([NewTopic(f"via-{node}", 3, replication_factor=3)])
    for node in (1, 2, 3):
        for partition in range(3):
            cluster.wait_isr(f"via-{node}", partition, {1, 2, 3})
    leaders = {cluster.partition("via-1", p).leader for p in range(3)}
    assert leaders == {1, 2, 3}  # leaders spread over the brokers


def test_acks_all_replicates_to_every_isr_member_byte_for_byte(
        cluster: ClusterProcesses) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("r", 1, replication_factor=3)])
    cluster.wait_isr("r", 0, {1, 2, 3})
    values = _values("r", RECORDS)
    _produce(cluster.bootstrap, "r", values)
    assert _consume_all(cluster.bootstrap, "r", 0, RECORDS) == values
    for broker in cluster.brokers.values():
        assert broker.stop() == 0
    stored = {node: log_bytes(broker, "r", 0)
              for node, broker in cluster.brokers.items()}
    assert stored[1] and stored[1] == stored[2] == stored[3]


def test_a_killed_broker_is_replaced_in_leadership_and_rejoins_the_isr(
        cluster: ClusterProcesses) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("k", 1, replication_factor=3)])
    cluster.wait_isr("k", 0, {1, 2, 3})
    first = _values("before", RECORDS)
    _produce(cluster.bootstrap, "k", first)
    leader = cluster.partition("k", 0).leader
    cluster.broker(leader).kill_all()
    others = {1, 2, 3} - {leader}
    cluster.wait_for(lambda p: p.leader in others and leader not in p.isr
                     and p.error_code == 0 and bool(p.endpoint),
                     "k", 0, f"a new leader among {sorted(others)}")
    status = _cluster_status(cluster.endpoints[min(others)])
    assert f"{leader}\tfenced\t" in status, status
    for node in others:
        assert f"{node}\tlive\t" in status, status
    second = _values("after", RECORDS)
    _produce(cluster.bootstrap, "k", second)
    cluster.broker(leader).start()
    cluster.wait_isr("k", 0, {1, 2, 3})
    assert _consume_all(cluster.bootstrap, "k", 0, 2 * RECORDS) == first + second


def _cluster_status(bootstrap: str) -> str:
    """`zlog cluster status`, as an operator runs it."""
    done = subprocess.run([sys.executable, "-m", "zlog.cli", "cluster", "status",
                           "--bootstrap", bootstrap], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_killed_broker_is_fenced_when_its_connection_drops_not_a_session_later(
        tmp_path: Path) -> None:
    """With a session of a minute, the killed leader is still replaced within seconds: the
    controller's own connection to it dropped with the process, and its control port refuses
    connections or nothing was heard since (zlog/broker/control/controller/broker_probes.py)."""
    with cluster_processes(3, tmp_path, extra_args=(
            "--broker-session-timeout-ms", "60000")) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics([NewTopic("probe", 1, replication_factor=3)])
        cluster.wait_isr("probe", 0, {1, 2, 3})
        leader = cluster.partition("probe", 0).leader
        cluster.broker(leader).kill_all()
        others = {1, 2, 3} - {leader}
        cluster.wait_for(lambda p: p.leader in others, "probe", 0,
                         "a new leader well within the session", timeout_s=20.0)
        assert any(f"broker {leader} fenced: its control" in cluster.broker(node).log_text()
                   for node in others)


def test_a_topic_grown_from_the_cli_gets_replicated_partitions_spread_over_the_brokers(
        cluster: ClusterProcesses) -> None:
    """`zlog topic alter NAME --partitions N` on a cluster: the new partitions get the topic's
    three replicas, every one in sync, leaders round-robin over the brokers where the
    topic's placement left off, and take acks=all writes."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("grown", 1, replication_factor=3)])
    done = subprocess.run([sys.executable, "-m", "zlog.cli", "topic", "alter", "grown",
                           "--partitions", "4", "--bootstrap", cluster.bootstrap],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "4 partitions" in done.stdout
    for partition in range(4):
        cluster.wait_isr("grown", partition, {1, 2, 3})
    leaders = {cluster.partition("grown", p).leader for p in range(4)}
    assert leaders == {1, 2, 3}
    values = _values("grown", 500)
    _produce(cluster.bootstrap, "grown", values, partition=3)
    assert _consume_all(cluster.bootstrap, "grown", 3, len(values)) == values


def test_zlog_leader_elect_preferred_gives_leadership_back_to_the_first_replica(
        tmp_path: Path) -> None:
    """With the automatic rebalance off, a preferred leader that was killed and came back
    stays a follower; `zlog leader elect --preferred` gives it its leadership back, once in
    sync, and says how many moved; asked again, nothing moves."""
    with cluster_processes(3, tmp_path, extra_args=(
            "--auto-leader-rebalance", "false")) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics([NewTopic("preferred", 1, replication_factor=3)])
        cluster.wait_isr("preferred", 0, {1, 2, 3})
        first = cluster.partition("preferred", 0).replicas[0]
        assert cluster.partition("preferred", 0).leader == first
        cluster.broker(first).kill_all()
        cluster.wait_for(lambda p: p.leader not in (first, -1), "preferred", 0,
                         "another leader")
        cluster.broker(first).start()
        cluster.wait_isr("preferred", 0, {1, 2, 3})
        assert cluster.partition("preferred", 0).leader != first

        def elect() -> str:
            done = subprocess.run([sys.executable, "-m", "zlog.cli", "leader", "elect",
                                   "--preferred", "--bootstrap", cluster.bootstrap],
                                  capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, done.stderr
            return done.stdout

        assert "1 partition(s) moved" in elect()
        cluster.wait_for(lambda p: p.leader == first and bool(p.endpoint), "preferred", 0,
                         "the preferred replica leading again")
        assert "already" in elect()


def test_a_local_consumer_on_the_leaders_host_sees_nothing_above_the_high_watermark(
        cluster: ClusterProcesses) -> None:
    """Consumer(local=True) reads the leader's ring on its host, with no fetch: it too must stop
    at the high watermark. With both followers' workers frozen the leader takes acks=1 records
    no follower holds; the ring reader returns the committed records only, and the rest once
    the followers have copied them."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("local", 1, replication_factor=3)])
    cluster.wait_isr("local", 0, {1, 2, 3})
    leader = cluster.partition("local", 0).leader
    committed = _values("committed", 10)
    _produce(cluster.bootstrap, "local", committed)
    followers = [pid for node in cluster.brokers if node != leader
                 for pid in cluster.broker(node).worker_pids()]
    for pid in followers:
        psutil.Process(pid).suspend()
    try:
        uncommitted = _values("uncommitted", 5)
        with Producer(cluster.endpoints[leader], acks=1, linger_ms=0) as producer:
            for value in uncommitted:
                producer.send("local", value, partition=0)
            producer.flush(timeout_ms=int(WAIT_S * 1000))
        consumer = Consumer(cluster.endpoints[leader], auto_offset_reset="earliest",
                            local=True)
        consumer.assign([TopicPartition("local", 0)])
        seen = _poll_values(consumer, len(committed))
        assert consumer.ring_batches_read > 0, "read from the leader's ring"
        for _ in range(5):  # the followers are frozen: the high watermark cannot move
            seen += [r.value for r in consumer.poll(100) if r.value is not None]
        assert seen == committed
    finally:
        for pid in followers:
            psutil.Process(pid).resume()
    seen += _poll_values(consumer, len(uncommitted))
    consumer.close()
    assert seen == committed + uncommitted


def _poll_values(consumer: Consumer, count: int) -> list[bytes]:
    """At least `count` values from `consumer`, or fail after WAIT_S."""
    values: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    while len(values) < count:
        assert time.monotonic() < deadline, f"{len(values)} of {count} values in {WAIT_S} s"
        values += [r.value for r in consumer.poll(100) if r.value is not None]
    return values


def test_replicas_spread_over_racks_when_every_broker_names_one(tmp_path: Path) -> None:
    """Brokers 1 and 2 share rack a, broker 3 is alone in rack b: every partition of a topic of
    replication factor 2 keeps one replica in each rack, and leaders still spread over all
    three brokers; `zlog cluster status` shows each broker's rack."""
    racks = {1: "a", 2: "a", 3: "b"}
    with cluster_processes(3, tmp_path, racks=racks) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics([NewTopic("racked", 6, replication_factor=2)])
        for partition in range(6):
            found = cluster.partition("racked", partition)
            assert {racks[b] for b in found.replicas} == {"a", "b"}, found
        assert {cluster.partition("racked", p).leader for p in range(6)} == {1, 2, 3}
        status = subprocess.run([sys.executable, "-m", "zlog.cli", "cluster", "status",
                                 "--bootstrap", cluster.bootstrap],
                                capture_output=True, text=True, timeout=60, check=False)
        assert status.returncode == 0, status.stderr
        rows = {line.split("\t")[0]: line.split("\t") for line in status.stdout.splitlines()}
        assert [rows[str(node)][3] for node in (1, 2, 3)] == ["a", "a", "b"]
