"""Leaders killed under acks=all load: nothing acknowledged lost, nothing written twice.

Three brokers, one topic of two partitions with three replicas and min.insync.replicas=2; an
idempotent producer sends unique values with acks=all on a thread (tests/production.py), and
each round kill -9s the whole broker that leads one of the partitions (supervisor and workers,
often the controller too), waits for a new leader, restarts the killed broker on its data dir
and waits until it is back in every ISR. Afterwards each partition, read from the start, holds
every acknowledged record exactly where the producer was told, each value once, no gaps; and
a consumer reading all along never saw an error, a gap or a batch read twice.
Rerun a case with `pytest --seed N`.
"""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import psutil
import pytest

from tests.cluster_fixtures import (
    assert_one_writer_at_a_time,
    produce_to_worker,
    writes_across_a_leader_change,
)
from tests.production import Tailing, acks_all_production, check_log, producing
from zlog.client import Admin, NewTopic
from zlog.errors import ErrorCode
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC: Final = "failover"
PARTITIONS: Final = 2
ACKS_BETWEEN_KILLS: Final = 2_000  # at most, acknowledged records between two kills
RECORDS_PER_S: Final = 5_000  # the pace of production (a broker restart takes seconds)
RECORDS_MAX: Final = 2_000_000  # production runs until stopped, well before this
UNACKED_WINDOW: Final = 500
REQUEST_TIMEOUT_MS: Final = 1_500  # a request to a dead leader times out and is retried
DEADLINE_S: Final = 90.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    with cluster_processes(3, tmp_path) as running:
        yield running


def _kill_rounds(cluster: ClusterProcesses, seed: int, rounds: int) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, replication_factor=3,
                                      configs={"min.insync.replicas": "2"})])
    for partition in range(PARTITIONS):
        cluster.wait_isr(TOPIC, partition, {1, 2, 3})
    rng = random.Random(seed)
    production = acks_all_production(cluster.bootstrap, seed, topic=TOPIC,
                                     partitions=PARTITIONS, records=RECORDS_MAX,
                                     window=UNACKED_WINDOW, deadline_s=DEADLINE_S,
                                     records_per_s=RECORDS_PER_S,
                                     request_timeout_ms=REQUEST_TIMEOUT_MS,
                                     max_block_ms=int(DEADLINE_S * 1000))
    survivors: set[int] = set()
    tailing = Tailing(cluster.bootstrap, TOPIC, PARTITIONS)
    with producing(production):
        tailing.start()
        for round_index in range(rounds):
            production.await_more_acks(rng.randrange(ACKS_BETWEEN_KILLS // 4,
                                                     ACKS_BETWEEN_KILLS))
            partition = rng.randrange(PARTITIONS)
            victim = cluster.partition(TOPIC, partition).leader
            cluster.broker(victim).kill_all()
            survivors |= set(production.acknowledged())
            print(f"round {round_index}: killed broker {victim} (leader of {TOPIC}-{partition}) "
                  f"after {len(survivors)} acknowledged records")
            cluster.wait_for(lambda p, victim=victim: p.leader not in (victim, -1)
                             and p.error_code == 0 and bool(p.endpoint),
                             TOPIC, partition, f"a leader other than {victim}")
            cluster.broker(victim).start()
            for each in range(PARTITIONS):
                cluster.wait_isr(TOPIC, each, {1, 2, 3})
        production.await_more_acks(ACKS_BETWEEN_KILLS)  # the cluster whole again serves
    assert production.sent < RECORDS_MAX, "production ended before the last kill"
    log = check_log(cluster.bootstrap, production, seed, survivors)
    tailing.stop_and_check(log, DEADLINE_S)


def test_killing_leaders_under_acks_all_loses_and_doubles_nothing(
        cluster: ClusterProcesses, seed: int) -> None:
    _kill_rounds(cluster, seed, rounds=3)


@pytest.mark.soak
def test_twenty_leader_kills_under_acks_all(cluster: ClusterProcesses, seed: int) -> None:
    _kill_rounds(cluster, seed, rounds=20)


def test_a_rolling_restart_under_acks_all_load_surfaces_no_error(
        cluster: ClusterProcesses, seed: int) -> None:
    """SIGTERM moves a broker's leaderships away before it stops (a controlled shutdown), so
    a restart of each broker in turn costs the producer retries, never an error."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, replication_factor=3,
                                      configs={"min.insync.replicas": "2"})])
    for partition in range(PARTITIONS):
        cluster.wait_isr(TOPIC, partition, {1, 2, 3})
    production = acks_all_production(cluster.bootstrap, seed, topic=TOPIC,
                                     partitions=PARTITIONS, records=RECORDS_MAX,
                                     window=UNACKED_WINDOW, deadline_s=DEADLINE_S,
                                     records_per_s=RECORDS_PER_S,
                                     request_timeout_ms=REQUEST_TIMEOUT_MS)
    with producing(production):
        for node, broker in cluster.brokers.items():
            production.await_more_acks(ACKS_BETWEEN_KILLS)
            led = [p for p in range(PARTITIONS) if cluster.partition(TOPIC, p).leader == node]
            assert broker.stop() == 0
            assert "controlled shutdown: leaderships moved" in broker.log_tail()
            for partition in led:  # moved before the broker stopped, not after a timeout
                assert cluster.partition(TOPIC, partition).leader != node
            broker.start()
            for partition in range(PARTITIONS):
                cluster.wait_isr(TOPIC, partition, {1, 2, 3})
        production.await_more_acks(ACKS_BETWEEN_KILLS)
    check_log(cluster.bootstrap, production, seed, set())


def test_a_leader_frozen_past_its_session_is_replaced_and_rejoins_as_a_follower(
        cluster: ClusterProcesses, seed: int) -> None:
    """SIGSTOP the leader's whole broker for longer than the session timeout: the others
    elect a new leader and the producer carries on there; after SIGCONT the old leader learns
    it was replaced, truncates what it alone held, and rejoins the ISR. Nothing acknowledged
    is lost: the frozen leader could not have acknowledged an acks=all write on its own."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, replication_factor=3,
                                      configs={"min.insync.replicas": "2"})])
    cluster.wait_isr(TOPIC, 0, {1, 2, 3})
    production = acks_all_production(cluster.bootstrap, seed, topic=TOPIC,
                                     partitions=1, records=RECORDS_MAX,
                                     window=UNACKED_WINDOW, deadline_s=DEADLINE_S,
                                     records_per_s=RECORDS_PER_S,
                                     request_timeout_ms=REQUEST_TIMEOUT_MS)
    with producing(production):
        production.await_more_acks(ACKS_BETWEEN_KILLS)
        victim = cluster.partition(TOPIC, 0).leader
        frozen = cluster.broker(victim)
        frozen.pause()
        survivors = set(production.acknowledged())
        try:
            cluster.wait_for(lambda p: p.leader not in (victim, -1) and victim not in p.isr
                             and bool(p.endpoint), TOPIC, 0, f"a leader other than {victim}")
            replaced_epoch = cluster.partition(TOPIC, 0).leader_epoch
            production.await_more_acks(ACKS_BETWEEN_KILLS)  # served by the new leader
        finally:
            frozen.resume()
        cluster.wait_isr(TOPIC, 0, {1, 2, 3})
        # Back as a follower: it leads again only if a later election (the preferred-leader
        # rebalance, once it is back in the ISR) chose it, at a newer epoch.
        now = cluster.partition(TOPIC, 0)
        assert now.leader != victim or now.leader_epoch > replaced_epoch, now
        production.await_more_acks(ACKS_BETWEEN_KILLS)
    check_log(cluster.bootstrap, production, seed, survivors)


def _produce_acks_1(worker_endpoint: str) -> int:
    return produce_to_worker(worker_endpoint, TOPIC, 0, acks=1)


def test_a_leader_cut_off_from_the_controller_stops_taking_writes(
        cluster: ClusterProcesses) -> None:
    """Only the leader's supervisor is frozen: its workers still serve, but its heartbeats
    stop. Once the controller has fenced it and elected another leader, the old leader's
    worker, its lease run out, refuses even acks=1 writes (the retriable
    NOT_LEADER_OR_FOLLOWER): there are never two leaders taking writes. Thawed, the broker
    heartbeats again and rejoins as a follower."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, replication_factor=3)])
    cluster.wait_isr(TOPIC, 0, {1, 2, 3})
    before = cluster.partition(TOPIC, 0)
    assert _produce_acks_1(before.endpoint) == ErrorCode.NONE
    supervisor = psutil.Process(cluster.broker(before.leader).process.pid)
    supervisor.suspend()
    try:
        cluster.wait_for(lambda p: p.leader not in (before.leader, -1) and bool(p.endpoint),
                         TOPIC, 0, f"a leader other than {before.leader}")
        assert _produce_acks_1(before.endpoint) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        supervisor.resume()
    cluster.wait_isr(TOPIC, 0, {1, 2, 3})


def test_a_leader_whose_supervisor_alone_is_killed_takes_no_write_beside_its_replacement(
        cluster: ClusterProcesses) -> None:
    """kill -9 of the leader's supervisor only. Its control port refuses connections at
    once, so the controller elects another leader without waiting out a lease; the worker
    it leaves must take no write from then on (it stops with its parent, the fork server,
    which dies with the supervisor). acks=1 writes go straight to the old worker and, once
    elected, to the new leader: none reaches the old one after the new one took a write."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, replication_factor=3)])
    cluster.wait_isr(TOPIC, 0, {1, 2, 3})
    before = cluster.partition(TOPIC, 0)
    assert _produce_acks_1(before.endpoint) == ErrorCode.NONE
    broker = cluster.broker(before.leader)
    assert broker.process is not None
    orphans = psutil.Process(broker.process.pid).children(recursive=True)
    assert orphans, "the supervisor has no worker"
    os.kill(broker.process.pid, signal.SIGKILL)
    broker.process.wait()
    broker.process = None

    def new_endpoint() -> str | None:
        try:
            now = cluster.partition(TOPIC, 0)
        except AssertionError:
            return None
        return now.endpoint if now.leader not in (before.leader, -1) else None

    old, new = writes_across_a_leader_change(before.endpoint, TOPIC, new_endpoint,
                                             new_writes=20, deadline_s=DEADLINE_S)
    assert_one_writer_at_a_time(old, new)
    wait_until(lambda: not any(orphan.is_running()
                               and orphan.status() != psutil.STATUS_ZOMBIE
                               for orphan in orphans),
               DEADLINE_S, what="the killed supervisor's fork server and workers to stop")
    broker.start()
    cluster.wait_isr(TOPIC, 0, {1, 2, 3})
