"""Ways to move a partition's leadership on a running cluster, for tests of what clients see
meanwhile: kill -9 the leader's worker (the partition stays with its broker, the worker is
replaced), kill -9 the leader's whole broker (an in-sync follower takes over; the broker is
restarted afterwards), and a preferred election (no process dies: the old leader answers
NOT_LEADER_OR_FOLLOWER). Each move returns `settled`, true once the cluster is whole again;
a test keeps calling its client until then."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from zlog.client import Admin
from zlog.errors import ErrorCode
from zlog.transport.messages.admin import PartitionMetadata
from zlog_testbed.cluster_processes import ClusterProcesses
from zlog_testbed.waiting import wait_until

MOVE_WAIT_S: Final = 60.0

Settled = Callable[[], bool]


def serving(partition: PartitionMetadata) -> bool:
    """A leader whose worker serves the partition, as a broker's metadata says."""
    return partition.error_code == ErrorCode.NONE and partition.leader >= 0 \
        and bool(partition.endpoint)


def partition_now(cluster: ClusterProcesses, topic: str, partition: int,
                  ) -> PartitionMetadata | None:
    """The partition as one broker sees it now; None if none answers."""
    try:
        (found,) = cluster.metadata([topic]).topics
    except AssertionError:  # no broker answered this time
        return None
    return next((p for p in found.partitions if p.partition == partition), None)


def _holds(cluster: ClusterProcesses, topic: str, partition: int,
           check: Callable[[PartitionMetadata], bool]) -> bool:
    seen = partition_now(cluster, topic, partition)
    return seen is not None and check(seen)


def _whole(cluster: ClusterProcesses, topic: str, partition: int,
           replicas: tuple[int, ...]) -> bool:
    """Served, and every replica in sync again."""
    return _holds(cluster, topic, partition,
                  lambda p: serving(p) and set(p.isr) == set(replicas))


@dataclass
class Move:
    """What moved, and when the cluster is whole again (every replica back in sync)."""

    what: str
    settled: Settled


def kill_leader_worker(cluster: ClusterProcesses, topic: str, partition: int) -> Move:
    before = cluster.partition(topic, partition)
    broker = cluster.broker(before.leader)
    killed = broker.worker_pid_for(before.endpoint)
    broker.kill_worker(killed)

    def replaced() -> bool:
        if killed in broker.worker_pids() or len(broker.worker_pids()) != broker.workers:
            return False
        return _whole(cluster, topic, partition, before.replicas)

    return Move(f"the worker of leader {before.leader} killed", replaced)


def kill_leader_broker(cluster: ClusterProcesses, topic: str, partition: int) -> Move:
    """The leader's broker killed; restarted (by `settled`) once another leader serves."""
    before = cluster.partition(topic, partition)
    victim = cluster.broker(before.leader)
    victim.kill_all()

    def back() -> bool:
        if victim.process is None:
            if _holds(cluster, topic, partition,
                      lambda p: serving(p) and p.leader != before.leader):
                victim.start()
            return False
        return _whole(cluster, topic, partition, before.replicas)

    return Move(f"broker {before.leader}, the leader, killed", back)


def elect_preferred(cluster: ClusterProcesses, topic: str, partition: int) -> Move:
    """Leadership back to the preferred replica (it must not lead now), no process killed."""
    before = cluster.partition(topic, partition)
    preferred = before.replicas[0]
    assert before.leader != preferred, "the preferred replica leads already"
    with Admin(cluster.bootstrap) as admin:
        assert admin.elect_preferred_leaders() >= 1
    return Move(f"leadership moved from {before.leader} back to {preferred}",
                lambda: _holds(cluster, topic, partition,
                               lambda p: serving(p) and p.leader == preferred))


MOVES: Final = (kill_leader_worker, kill_leader_broker, elect_preferred)
"""In this order, each leaves what the next needs (the last needs a preferred replica that
came back as a follower)."""


def call_until(settled: Settled, call: Callable[[], object], what: str) -> int:
    """`call()` again and again until the cluster has `settled`, then once more; how many
    calls were made. An error a call raises fails the test: clients retry inside."""
    calls = 0

    def one_more() -> bool:
        nonlocal calls
        call()
        calls += 1
        return settled()

    wait_until(one_more, MOVE_WAIT_S, interval_s=0.05, what=what)
    call()
    return calls + 1
