"""A host stuck in I/O: the cluster goes on, and the host rejoins once it is unstuck.

Three brokers, one topic of three partitions (three replicas each, min.insync.replicas=2),
each broker leading one; the stuck host is the controller's. Its processes are frozen as a
disk stuck in I/O would freeze them:

* its workers and worker fork server (SIGSTOP), its supervisor left running. The supervisor
  must never wait on them: it keeps answering, heartbeating and deciding as the controller,
  kills the stalled workers and serves their partitions again from new ones;
* its workers and worker fork server stuck for real, in uninterruptible sleep (a cgroup v1
  freezer), where even SIGKILL waits: the supervisor goes on without them, has their
  leaderships moved to the other in-sync replicas, and replaces them once they end;
* its supervisor's loop alone (the thread, ptrace), the Raft thread beside it left running:
  the metadata-log node must hand the controller to another voter, which then fences the
  stuck broker and moves its leaderships.

Either way, Metadata is answered and writes with acks=all go on within a deadline; once
thawed, the broker rejoins every ISR and no acknowledged record is lost.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import psutil
import pytest

from tests.production import log_ends, read_log
from tests.stuck_processes import can_freeze_in_io, frozen_thread, stuck_in_io
from zlog.client import Admin, NewTopic, Producer
from zlog.client.records import RecordMetadata
from zlog.errors import ZlogError
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC: Final = "stuck"
PARTITIONS: Final = 3
METADATA_TIMEOUT_MS: Final = 3_000  # a broker whose loop turns answers in milliseconds
METADATA_ROUNDS: Final = 25  # requests to each other broker while the workers are frozen
LED_ELSEWHERE_S: Final = 30.0  # replica.lag.time.max.ms (10 s) takes the frozen one out
ANYWHERE_S: Final = 60.0  # plus the worker stall timeout and a restart, or an election
RECOVERY_S: Final = 60.0
ELECTION_S: Final = 20.0  # the stall timeout (1 s), a hand-off and an election, on a busy host


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    with cluster_processes(3, tmp_path) as running:
        yield running


def _workers_and_fork_server(cluster: ClusterProcesses, node: int) -> list[int]:
    supervisor = psutil.Process(cluster.broker(node).supervisor_pid)
    pids = [child.pid for child in supervisor.children(recursive=True)]
    assert pids, "the broker has workers"
    return pids


def _freeze_workers(cluster: ClusterProcesses, node: int) -> list[int]:
    """SIGSTOP the fork server and every worker of broker `node`, not its supervisor."""
    frozen = _workers_and_fork_server(cluster, node)
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    return frozen


def _thaw(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def _metadata_answered_by_the_others(cluster: ClusterProcesses, frozen: int) -> None:
    """Every Metadata request to the other brokers is answered, none times out."""
    others = [broker for node, broker in cluster.brokers.items() if node != frozen]
    failures = []
    for round_index in range(METADATA_ROUNDS):
        for broker in others:
            try:
                broker.metadata([TOPIC], timeout_ms=METADATA_TIMEOUT_MS)
            except (ZlogError, AssertionError) as error:
                failures.append(f"round {round_index}, {broker.endpoint}: {error}")
        time.sleep(0.2)  # spread the rounds over the stall (a pace, not a wait for a state)
    assert not failures, f"{len(failures)} Metadata requests failed: {failures[:3]}"


class Writes:
    """acks=all writes to every partition, and where each acknowledged one landed."""

    def __init__(self, cluster: ClusterProcesses) -> None:
        self.cluster = cluster
        self.producer = Producer(cluster.bootstrap, acks="all", linger_ms=1,
                                 request_timeout_ms=1_500,
                                 delivery_timeout_ms=int(ANYWHERE_S * 1000), retry_backoff_ms=50)
        self.acknowledged: dict[bytes, RecordMetadata] = {}

    def send(self, label: str) -> dict[int, dict[bytes, Future[RecordMetadata]]]:
        """partition -> value -> its future: 20 records to each partition."""
        return {partition: {value: self.producer.send(TOPIC, value, partition=partition)
                            for value in (f"{label}-{partition}-{index}".encode()
                                          for index in range(20))}
                for partition in range(PARTITIONS)}

    def expect(self, futures: dict[bytes, Future[RecordMetadata]], within_s: float,
               what: str) -> None:
        """Every one of `futures` acknowledged within `within_s`."""
        deadline = time.monotonic() + within_s
        for value, future in futures.items():
            try:
                self.acknowledged[value] = future.result(
                    timeout=max(0.0, deadline - time.monotonic()))
            except Exception as error:  # a timeout or the record's own failure
                raise AssertionError(f"{what}: {value!r} not acknowledged in {within_s}s: "
                                     f"{error!r}") from None

    def round(self, label: str, within_s: float) -> None:
        for partition, futures in self.send(label).items():
            self.expect(futures, within_s, f"{TOPIC}-{partition} {label}")

    def nothing_lost(self) -> None:
        ends = log_ends(self.cluster.bootstrap, TOPIC, PARTITIONS)
        log = read_log(self.cluster.bootstrap, TOPIC, ends, RECOVERY_S)
        for value, landed in self.acknowledged.items():
            assert log[landed.partition].get(landed.offset) == value, (
                f"{value!r} was acknowledged at {landed.partition}/{landed.offset}, the log "
                f"holds {log[landed.partition].get(landed.offset)!r}")


@dataclass(frozen=True)
class Scenario:
    cluster: ClusterProcesses
    leaders: dict[int, int]  # partition -> its leader before the fault
    controller: int  # the broker that gets stuck
    writes: Writes

    def wait_led_elsewhere(self) -> None:
        """Every partition the stuck broker led has another leader, serving."""
        stuck = self.controller
        for partition, leader in self.leaders.items():
            if leader == stuck:
                self.cluster.wait_for(lambda p: p.leader not in (stuck, -1) and bool(p.endpoint),
                                      TOPIC, partition, f"a leader other than the stuck {stuck}",
                                      timeout_s=ANYWHERE_S)


@contextlib.contextmanager
def stuck_controller_host(cluster: ClusterProcesses) -> Iterator[Scenario]:
    """Writes acknowledged before the fault the block makes; after it, every partition back
    in full sync, writes acknowledged again, and nothing acknowledged lost."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, replication_factor=3,
                                      configs={"min.insync.replicas": "2"})])
    for partition in range(PARTITIONS):
        cluster.wait_isr(TOPIC, partition, {1, 2, 3})
    leaders = {p: cluster.partition(TOPIC, p).leader for p in range(PARTITIONS)}
    controller = cluster.metadata().controller_id
    assert controller in leaders.values(), "each broker leads one partition"
    writes = Writes(cluster)
    try:
        writes.round("before", RECOVERY_S)
        yield Scenario(cluster, leaders, controller, writes)
        for partition in range(PARTITIONS):
            cluster.wait_isr(TOPIC, partition, {1, 2, 3})
        writes.round("after", RECOVERY_S)
    finally:
        writes.producer.close()
    writes.nothing_lost()


def _controller_seen_by_the_others(cluster: ClusterProcesses, frozen: int) -> int:
    """The controller every other broker names, once they agree on one other than `frozen`."""
    seen: set[int] = set()

    def moved() -> bool:
        seen.clear()
        for node, broker in cluster.brokers.items():
            if node != frozen:
                try:
                    seen.add(broker.metadata(None, timeout_ms=METADATA_TIMEOUT_MS).controller_id)
                except (ZlogError, AssertionError):
                    return False
        return len(seen) == 1 and frozen not in seen and -1 not in seen

    wait_until(moved, ELECTION_S, interval_s=0.05, what=f"a controller other than {frozen}")
    return seen.pop()


def test_the_controllers_workers_frozen_stop_neither_its_supervisor_nor_the_cluster(
        cluster: ClusterProcesses) -> None:
    """SIGSTOP: the stalled workers are killed (SIGKILL ends a stopped process), the frozen
    fork server is judged stuck and replaced, and new workers serve the partitions again."""
    with stuck_controller_host(cluster) as scenario:
        frozen = _freeze_workers(cluster, scenario.controller)
        try:
            sent = scenario.writes.send("frozen")
            _metadata_answered_by_the_others(cluster, scenario.controller)
            for partition, leader in scenario.leaders.items():
                if leader != scenario.controller:
                    scenario.writes.expect(sent[partition], LED_ELSEWHERE_S,
                                           f"{TOPIC}-{partition}, led elsewhere")
            for partition, leader in scenario.leaders.items():
                if leader == scenario.controller:
                    scenario.writes.expect(sent[partition], ANYWHERE_S,
                                           f"{TOPIC}-{partition}, led by the frozen broker")
            stuck = cluster.broker(scenario.controller)
            assert stuck.metadata([TOPIC], timeout_ms=METADATA_TIMEOUT_MS)
            assert cluster.metadata().controller_id == scenario.controller, "its loop turns"
        finally:
            _thaw(frozen)
    wait_until(lambda: len(cluster.broker(scenario.controller).worker_pids()) == 1, RECOVERY_S,
               what="the broker's worker serving again")


@pytest.mark.skipif(not can_freeze_in_io(), reason="needs a writable cgroup v1 freezer (root)")
def test_the_controllers_workers_stuck_in_io_have_their_leaderships_moved(
        cluster: ClusterProcesses) -> None:
    """Uninterruptible sleep: SIGKILL does not end the workers, so nothing may replace them;
    their leaderships go to in-sync followers, and once thawed they end and are replaced."""
    with stuck_controller_host(cluster) as scenario:
        stuck = cluster.broker(scenario.controller)
        with stuck_in_io(_workers_and_fork_server(cluster, scenario.controller)):
            scenario.wait_led_elsewhere()
            assert "after SIGKILL: stuck in uninterruptible I/O" in stuck.log_text()
            sent = scenario.writes.send("stuck")
            _metadata_answered_by_the_others(cluster, scenario.controller)
            assert stuck.metadata([TOPIC], timeout_ms=METADATA_TIMEOUT_MS)
            assert cluster.metadata().controller_id == scenario.controller, "its loop turns"
            for partition, futures in sent.items():
                scenario.writes.expect(futures, ANYWHERE_S, f"{TOPIC}-{partition}, workers stuck")


def test_the_controllers_loop_frozen_hands_the_controller_to_another_broker(
        cluster: ClusterProcesses) -> None:
    """The supervisor's loop thread frozen, its Raft thread running: the metadata-log node
    hands the controller off, and the new controller fences the stuck broker."""
    with (stuck_controller_host(cluster) as scenario,
          frozen_thread(cluster.broker(scenario.controller).supervisor_pid)):
        _controller_seen_by_the_others(cluster, scenario.controller)
        scenario.wait_led_elsewhere()
        sent = scenario.writes.send("stuck")
        _metadata_answered_by_the_others(cluster, scenario.controller)
        for partition, futures in sent.items():
            scenario.writes.expect(futures, ANYWHERE_S, f"{TOPIC}-{partition}, the loop frozen")
