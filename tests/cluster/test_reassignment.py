"""Replicas moving between live brokers: a reassignment under acks=all load, bad ones refused,
a broker drained and removed, a broker added and given its share (docs/replication.md §4.5).

The drain and add tests share one cluster of four metadata-log voters on 127.0.0.1-4 of which
three start: the fourth joins later, as a new machine would.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.cluster_fixtures import log_bytes
from tests.production import Production, check_log
from zlog.client import Admin, NewTopic, Producer, TopicPartition
from zlog.client.local_ring import ring_path_for
from zlog.errors import ErrorCode, ZlogError
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

WAIT_S: Final = 60.0
RECORDS_PER_S: Final = 2_000


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    with cluster_processes(3, tmp_path) as running:
        yield running


def _zlog(bootstrap: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zlog", *arguments, "--bootstrap", bootstrap],
                          capture_output=True, text=True, timeout=WAIT_S * 2, check=False)


def _replicas(admin: Admin, topic: str) -> dict[int, tuple[int, ...]]:
    (found,) = admin.describe_topics([topic])
    return {p.partition: p.replicas for p in found.partitions}


def _wait_no_moves(admin: Admin) -> None:
    wait_until(lambda: not admin.list_partition_reassignments(), WAIT_S, interval_s=0.1,
               what="every reassignment done")


def test_a_reassignment_under_acks_all_loses_doubles_and_diverges_nothing(
        cluster: ClusterProcesses, seed: int) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("m", 1, replication_factor=2,
                                      configs={"min.insync.replicas": "2"})])
        before = cluster.partition("m", 0)
        cluster.wait_isr("m", 0, set(before.replicas))
        (newcomer,) = {1, 2, 3} - set(before.replicas)
        # The leader leaves: its replica is replaced by the broker that had none.
        target = (newcomer, before.replicas[1]) if before.leader == before.replicas[0] else (
            before.replicas[0], newcomer)
        leaving = before.leader
        producer = Producer(cluster.bootstrap, acks="all", linger_ms=1, retry_backoff_ms=50,
                            delivery_timeout_ms=int(WAIT_S * 1000))
        production = Production(producer, seed, topic="m", partitions=1, records=1_000_000,
                                window=200, deadline_s=WAIT_S, records_per_s=RECORDS_PER_S)
        try:
            production.start()
            wait_until(lambda: production.acknowledged_count >= 1_000, WAIT_S, interval_s=0.02,
                       what="records before the move")
            admin.alter_partition_reassignments({TopicPartition("m", 0): target})
            moving = admin.list_partition_reassignments()
            if moving:  # not already done: it shows what is added and removed
                assert moving[TopicPartition("m", 0)].adding == (newcomer,)
                assert moving[TopicPartition("m", 0)].removing == (leaving,)
            cluster.wait_for(lambda p: p.replicas == target and set(p.isr) == set(target)
                             and p.leader in target and bool(p.endpoint), "m", 0,
                             f"replicas {list(target)}, all in sync", timeout_s=WAIT_S)
            after = production.acknowledged_count
            wait_until(lambda: production.acknowledged_count >= after + 1_000, WAIT_S,
                       interval_s=0.02, what="records after the move")
            production.stop()
            producer.flush(timeout_ms=int(WAIT_S * 1000))
        finally:
            production.stop()
            producer.close(timeout_ms=5_000)
        assert not admin.list_partition_reassignments()
    # The replica that moved away leaves nothing behind on its broker: data and ring.
    gone = cluster.broker(leaving)
    wait_until(lambda: not (gone.data_dir / "m-0").exists()
               and not ring_path_for(gone.ring_dir, "m", 0).exists(), WAIT_S, interval_s=0.05,
               what=f"broker {leaving} deleting the replica it no longer holds")
    check_log(cluster.bootstrap, production, seed, set())
    for broker in cluster.brokers.values():
        assert broker.stop() == 0
    kept = {node: log_bytes(cluster.broker(node), "m", 0) for node in target}
    assert kept[target[0]] and kept[target[0]] == kept[target[1]]


def _bad_reassignments_are_refused(admin: Admin, bootstrap: str, topic: str) -> None:
    """Kafka's codes, and nothing moves."""
    before = _replicas(admin, topic)
    tp = TopicPartition(topic, 0)
    refusals: dict[ErrorCode, dict[TopicPartition, tuple[int, ...] | None]] = {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: {TopicPartition(topic, 7): (1, 2)},
        ErrorCode.INVALID_REPLICA_ASSIGNMENT: {tp: (1, 1)},
        ErrorCode.NO_REASSIGNMENT_IN_PROGRESS: {tp: None},
        ErrorCode.INVALID_REPLICATION_FACTOR: {tp: (1, 2, 3)},
    }
    for code, targets in refusals.items():
        with pytest.raises(ZlogError) as refused:
            admin.alter_partition_reassignments(targets)
        assert refused.value.code == code, refused.value
    for replicas in ((), (1, 9)):
        with pytest.raises(ZlogError) as refused:
            admin.alter_partition_reassignments({tp: replicas})
        assert refused.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    run = _zlog(bootstrap, "partition", "reassign", topic, "0", "--replicas", "1,9")
    assert run.returncode == 1 and "INVALID_REPLICA_ASSIGNMENT (39)" in run.stderr, run.stderr
    assert not admin.list_partition_reassignments()
    assert _replicas(admin, topic) == before


def test_a_broker_is_drained_removed_and_a_new_one_gets_its_share(tmp_path: Path) -> None:
    cluster = ClusterProcesses(4)
    try:
        for node in (1, 2, 3):
            cluster.broker(node).start(wait=False)
        for node in (1, 2, 3):
            cluster.broker(node).wait_ready()
        bootstrap = ",".join(cluster.endpoints[node] for node in (1, 2, 3))
        with Admin(bootstrap) as admin:
            admin.create_topics([NewTopic("two", 3, replication_factor=2),
                                 NewTopic("three", 1, replication_factor=3)])
            _bad_reassignments_are_refused(admin, bootstrap, "two")
            refused = _zlog(bootstrap, "cluster", "remove-broker", "3")
            assert refused.returncode != 0, refused.stdout
            assert "INVALID_REPLICATION_FACTOR" in refused.stderr, refused.stderr
            assert {b.state for b in admin.describe_cluster().brokers} == {"live"}
            admin.delete_topics(["three"])

            drained = _zlog(bootstrap, "cluster", "remove-broker", "3")
            assert drained.returncode == 0, drained.stderr
            assert "removed from the cluster" in drained.stdout
            assert [b.node_id for b in admin.describe_cluster().brokers] == [1, 2]
            for partition, replicas in _replicas(admin, "two").items():
                assert sorted(replicas) == [1, 2], (partition, replicas)
                cluster.wait_isr("two", partition, {1, 2})
            missing = _zlog(bootstrap, "cluster", "remove-broker", "3")
            assert "BROKER_ID_NOT_REGISTERED" in missing.stderr, missing.stderr

            unknown = _zlog(bootstrap, "cluster", "add-broker", "4")
            assert unknown.returncode != 0 and "BROKER_ID_NOT_REGISTERED" in unknown.stderr
            cluster.broker(4).start()
            added = _zlog(bootstrap, "cluster", "add-broker", "4")
            assert added.returncode == 0, added.stderr
            replicas = _replicas(admin, "two")
            assert sum(4 in r for r in replicas.values()) == 2, replicas  # 6 replicas, 3 brokers
            assert sum(r[0] == 4 for r in replicas.values()) == 1, replicas  # a leadership
            for partition, members in replicas.items():
                cluster.wait_isr("two", partition, set(members))

            # The drained broker's process, restarted, joins as a new, empty broker.
            cluster.broker(3).stop()
            cluster.broker(3).start()
            wait_until(lambda: {b.node_id: b.state for b in admin.describe_cluster().brokers}.get(3)
                       == "live", WAIT_S, interval_s=0.1, what="broker 3 registered again")
            assert all(3 not in r for r in _replicas(admin, "two").values())
            # ... and deletes the replicas it was drained of, which it kept while removed.
            gone = cluster.broker(3).data_dir
            wait_until(lambda: not any(gone.glob("two-*")), WAIT_S, interval_s=0.05,
                       what="broker 3 deleting the replicas it was drained of")
    finally:
        for node, broker in cluster.brokers.items():
            if broker.process is not None and broker.process.poll() is None:
                print(f"\n--- broker {node} log (tail) ---\n{broker.log_tail()}")
        cluster.close(tmp_path)
