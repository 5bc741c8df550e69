"""KIP-101's two scenarios, with real brokers: replicas agree by leader epoch, not by HW.

Kafka once truncated a restarted follower to its high watermark, which could lose an
acknowledged batch (scenario 1) or leave two replicas with different batches at one offset
(scenario 2). zlog's followers truncate only where their log diverges from the leader's,
found by leader epoch (docs/replication.md), and a broker that restarts leaves the ISRs
another usable member keeps until it caught up again. Both scenarios are played here on a
three-broker cluster with a topic of two replicas and min.insync.replicas=1 (as in the KIP).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import psutil
import pytest

from tests.cluster.test_replication import _consume_all, _produce, _values
from tests.cluster_fixtures import log_bytes
from zlog.broker.replica_settings import REPLICA_DEFAULTS
from zlog.client import Admin, NewTopic, Producer
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes

pytestmark = pytest.mark.slow

TOPIC: Final = "kip101"
WAIT_S: Final = 60.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    with cluster_processes(3, tmp_path) as running:
        yield running


def _two_replicas(cluster: ClusterProcesses, **configs: str) -> tuple[int, int]:
    """(leader, follower) of a new topic with two replicas, both in sync."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, replication_factor=2,
                                      configs={"min.insync.replicas": "1", **configs})])
    cluster.wait_for(lambda p: len(p.isr) == 2 and bool(p.endpoint), TOPIC, 0,
                     "both replicas in sync")
    partition = cluster.partition(TOPIC, 0)
    follower = next(r for r in partition.replicas if r != partition.leader)
    return partition.leader, follower


def _acked_then_follower_restarted_then_leader_killed(
        cluster: ClusterProcesses, leader: int, follower: int) -> list[bytes]:
    """Scenario 1's steps: acks=all records, the follower restarted (so out of the ISR), then
    the leader killed; the records acknowledged."""
    acked = _values("acked", 1_000)
    _produce(cluster.bootstrap, TOPIC, acked)
    cluster.broker(follower).kill_all()
    cluster.broker(follower).start()
    cluster.wait_for(lambda p: p.isr == (leader,), TOPIC, 0,
                     "the restarted follower out of the ISR")
    cluster.broker(leader).kill_all()
    return acked


def test_scenario_1_a_restarted_follower_is_not_elected_with_what_it_may_lack(
        cluster: ClusterProcesses) -> None:
    """The follower restarts, then the leader dies: the follower (out of the ISR since its
    restart) is not elected; the partition waits for the leader, and nothing acknowledged is
    lost; then the follower catches up byte for byte."""
    leader, follower = _two_replicas(cluster)
    acked = _acked_then_follower_restarted_then_leader_killed(cluster, leader, follower)
    # The leader is fenced; the live follower is usable but not in the ISR: no leader.
    cluster.wait_for(lambda p: p.leader == -1 and p.isr == (leader,), TOPIC, 0,
                     "no leader while only the dead leader is in sync")
    assert follower in {b.node_id for b in cluster.metadata().brokers}
    cluster.broker(leader).start()
    cluster.wait_isr(TOPIC, 0, {leader, follower})
    assert cluster.partition(TOPIC, 0).leader == leader
    assert _consume_all(cluster.bootstrap, TOPIC, 0, len(acked)) == acked
    for broker in cluster.brokers.values():
        assert broker.stop() == 0
    assert log_bytes(cluster.broker(leader), TOPIC, 0) == \
        log_bytes(cluster.broker(follower), TOPIC, 0)


def test_with_unclean_election_enabled_the_out_of_sync_follower_takes_over(
        cluster: ClusterProcesses) -> None:
    """Scenario 1 with unclean.leader.election.enable=true: the restarted follower, out of the
    ISR, is elected when the leader dies (available again, at the risk the controller logs)."""
    leader, follower = _two_replicas(cluster, **{"unclean.leader.election.enable": "true"})
    acked = _acked_then_follower_restarted_then_leader_killed(cluster, leader, follower)
    cluster.wait_for(lambda p: p.leader == follower and p.isr == (follower,)
                     and bool(p.endpoint), TOPIC, 0, "the out-of-sync follower elected")
    assert any("unclean leader election" in broker.log_text()
               for node, broker in cluster.brokers.items() if node != leader)
    assert _consume_all(cluster.bootstrap, TOPIC, 0, len(acked)) == acked  # it had them all


def divergent_tail_then_leader_killed(cluster: ClusterProcesses, topic: str, leader: int,
                                      follower: int, write_tail: Callable[[], None]) -> None:
    """Scenario 2's first half: `write_tail` gives the leader batches its follower (worker
    frozen, broker alive) never fetches; the leader dies and the follower leads alone."""
    (frozen_worker,) = cluster.broker(follower).worker_pids()
    psutil.Process(frozen_worker).suspend()  # stops fetching; its broker still heartbeats
    # Its last fetch may be parked at the leader; were the tail written now, that fetch would
    # carry it to the frozen worker, which would store it on waking, before it learns it
    # leads (as a Kafka follower would): no divergence left to cut. The leader answers a
    # parked fetch, empty, within replica.fetch.wait.max.ms; wait that out.
    time.sleep(4 * REPLICA_DEFAULTS.fetch_wait_max_ms / 1000)
    try:
        write_tail()
        cluster.broker(leader).kill_all()
        cluster.wait_for(lambda p: p.leader == follower and p.isr == (follower,), topic, 0,
                         "the follower elected, alone in the ISR")
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(frozen_worker).resume()


def test_scenario_2_a_replica_with_a_divergent_tail_truncates_it_by_leader_epoch(
        cluster: ClusterProcesses) -> None:
    """The leader takes acks=1 batches its follower never fetched (the follower's worker is
    frozen, its broker alive); the leader dies and the follower, alone in the ISR, leads a new
    epoch and takes new batches at the same offsets; when the old leader returns it cuts its
    divergent tail where the epochs part and copies the new leader's batches: both logs end
    byte for byte the same."""
    leader, follower = _two_replicas(cluster)
    acked = _values("acked", 1_000)
    _produce(cluster.bootstrap, TOPIC, acked)

    def unreplicated() -> None:
        with Producer(cluster.endpoints[leader], acks=1, linger_ms=0) as producer:
            for value in _values("unreplicated", 200):
                producer.send(TOPIC, value, partition=0)
            producer.flush(timeout_ms=int(WAIT_S * 1000))

    divergent_tail_then_leader_killed(cluster, TOPIC, leader, follower, unreplicated)
    cluster.wait_for(lambda p: p.leader == follower and bool(p.endpoint), TOPIC, 0,
                     "the new leader serving")
    later = _values("later", 300)
    _produce(cluster.bootstrap, TOPIC, later)
    cluster.broker(leader).start()
    cluster.wait_isr(TOPIC, 0, {leader, follower})
    assert "where it diverged from its leader" in cluster.broker(leader).log_text()
    assert _consume_all(cluster.bootstrap, TOPIC, 0, len(acked) + len(later)) == acked + later
    for broker in cluster.brokers.values():
        assert broker.stop() == 0
    assert log_bytes(cluster.broker(leader), TOPIC, 0) == \
        log_bytes(cluster.broker(follower), TOPIC, 0)
