"""Membership faults (F7): the cluster's replica sets change while the workload runs.

They need a broker beyond the three that hold each partition, so a run whose schedule has one
starts a spare (`SPARE_BROKERS`): it joins the metadata log as a learner (it never votes, so
the quorum stays the three voters') and holds replicas like any broker. Each fault goes
through the operator's own path, the Admin API and the `zlog cluster` commands; it starts
once every broker is live, and its end waits until the cluster is back to a partition layout
where every replica set is whole and in sync, so the next fault starts from a cluster that
moved nothing halfway.

- reassign: one key's partition swaps one of its replicas (the leader, as likely as any) for
  the broker holding none of it; at the end it moves back to the replicas it had, in their
  order (the preferred leader's place included).
- reassign-kill: the same move, and the broker the replica moves to is killed (kill -9)
  while it catches up; at the end it starts again on its data, the move completes, and the
  partition moves back.
- drain: a partition leader's broker is drained (`zlog cluster remove-broker`): every replica
  it holds moves to the others, and the controller deregisters it. At the end its process is
  restarted, registers as a new, empty broker, and `zlog cluster add-broker` gives it its fair
  share of replicas and preferred leaderships again.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from zlog.client import Admin, TopicPartition
from zlog.errors import ErrorCode, ZlogError
from zlog_jepsen.disk_wipe import WIPE_DISK
from zlog_testbed.waiting import wait_until

if TYPE_CHECKING:
    from zlog_jepsen.nemesis import Heal, Nemesis

REASSIGN: Final = "reassign"
REASSIGN_KILL: Final = "reassign-kill"
DRAIN: Final = "drain"
MEMBERSHIP_KINDS: Final = (REASSIGN, REASSIGN_KILL, DRAIN)
SPARE_BROKERS: Final = 1
SETTLE_TIMEOUT_S: Final = 240.0
"""A move or a drain finishing on a loaded two-core machine: in subscribe mode a drain moves
the replicas of the 50 `__consumer_offsets` partitions too (41 moves in one soak run, which
outlasted 90 s while brokers starved of CPU were fenced and unfenced)."""
ADMIN_TIMEOUT_MS: Final = 5_000
POLL_INTERVAL_S: Final = 0.1

Start = Callable[["Nemesis"], tuple[dict[str, Any], "Heal"]]


SPARE_KINDS: Final = (*MEMBERSHIP_KINDS, WIPE_DISK)
"""The kinds that need a broker outside each replica set (the wipe, for its sole-ISR shape)."""


def needs_spare(kinds: tuple[str, ...]) -> int:
    """How many brokers beyond the replication factor a schedule of `kinds` needs."""
    return SPARE_BROKERS if set(kinds) & set(SPARE_KINDS) else 0


def _admin(nemesis: Nemesis) -> Admin:
    return Admin(nemesis.cluster.bootstrap, request_timeout_ms=ADMIN_TIMEOUT_MS)


def _holds(check: Callable[[], bool]) -> Callable[[], bool]:
    """`check`, with a broker that did not answer this time counted as not yet."""
    def holding() -> bool:
        try:
            return check()
        except (ZlogError, AssertionError):
            return False
    return holding


def _settled(nemesis: Nemesis, key: int, replicas: tuple[int, ...]) -> None:
    """Until `key`'s partition has exactly `replicas`, all in sync, with a serving leader,
    and no move is left in progress anywhere."""
    wanted = set(replicas)
    with _admin(nemesis) as admin:
        wait_until(_holds(lambda: not admin.list_partition_reassignments()), SETTLE_TIMEOUT_S,
                   POLL_INTERVAL_S, "every reassignment done")
    nemesis.cluster.wait_for(
        lambda p: p.replicas == replicas and set(p.isr) == wanted and p.error_code == 0
        and bool(p.endpoint), nemesis.topic, key, f"replicas {list(replicas)}, all in sync",
        SETTLE_TIMEOUT_S)


def _all_live(nemesis: Nemesis) -> None:
    """Until every broker is registered and live: a fault before this one may have left one
    restarting or fenced, and a move onto it, or a drain that needs it, would be refused
    (INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICATION_FACTOR)."""
    every = set(nemesis.cluster.brokers)
    with _admin(nemesis) as admin:
        wait_until(_holds(lambda: {b.node_id for b in admin.describe_cluster().brokers
                                   if b.state == "live"} == every),
                   SETTLE_TIMEOUT_S, POLL_INTERVAL_S, f"brokers {sorted(every)} all live")


def _move_one(nemesis: Nemesis) -> tuple[int, tuple[int, ...], tuple[int, ...], int]:
    """(key, its replicas now, the target, the broker gaining a replica): one replica,
    picked at random, swapped for a broker that holds none of the partition."""
    _all_live(nemesis)
    key = nemesis.random.randrange(nemesis.keys)
    before = tuple(nemesis.cluster.partition(nemesis.topic, key).replicas)
    outside = sorted(set(nemesis.cluster.brokers) - set(before))
    if not outside:
        raise RuntimeError(f"key {key}'s partition is on every broker {list(before)}: a "
                           "membership fault needs a spare broker")
    gaining = nemesis.random.choice(outside)
    leaving = nemesis.random.choice(before)
    target = tuple(gaining if replica == leaving else replica for replica in before)
    _reassign(nemesis, key, target)
    return key, before, target, gaining


def _reassign(nemesis: Nemesis, key: int, replicas: tuple[int, ...]) -> None:
    """Ask for `key`'s partition on `replicas` once every broker is live; a broker fenced
    again in between (a starved host misses its heartbeats) makes the controller refuse the
    move (INVALID_REPLICA_ASSIGNMENT), and then it is asked again, until SETTLE_TIMEOUT_S."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        _all_live(nemesis)
        try:
            with _admin(nemesis) as admin:
                admin.alter_partition_reassignments(
                    {TopicPartition(nemesis.topic, key): replicas})
            return
        except ZlogError as error:
            if (error.code != ErrorCode.INVALID_REPLICA_ASSIGNMENT
                    or time.monotonic() > deadline):
                raise
        time.sleep(POLL_INTERVAL_S)


def _back(nemesis: Nemesis, key: int, before: tuple[int, ...],
          target: tuple[int, ...]) -> None:
    """Let the move to `target` finish, then move the partition back to `before`."""
    _settled(nemesis, key, target)
    _reassign(nemesis, key, before)
    _settled(nemesis, key, before)


def reassign(nemesis: Nemesis) -> tuple[dict[str, Any], Heal]:
    key, before, target, gaining = _move_one(nemesis)
    return ({"key": key, "target": gaining, "from": list(before), "to": list(target)},
            lambda: _back(nemesis, key, before, target))


def reassign_kill(nemesis: Nemesis) -> tuple[dict[str, Any], Heal]:
    key, before, target, gaining = _move_one(nemesis)
    broker = nemesis.cluster.broker(gaining)
    broker.kill_all()

    def restarted() -> None:
        broker.start()
        _back(nemesis, key, before, target)

    return ({"key": key, "target": gaining, "from": list(before), "to": list(target),
             "killed": gaining}, restarted)


def _zlog(nemesis: Nemesis, *arguments: str) -> None:
    """A `zlog` command against the cluster, as an operator runs it; it must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", "zlog", *arguments, "--bootstrap", nemesis.cluster.bootstrap],
        capture_output=True, text=True, timeout=SETTLE_TIMEOUT_S * 2, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"zlog {' '.join(arguments)} exited {done.returncode}: "
                           f"{done.stderr.strip() or done.stdout.strip()}")


def drain(nemesis: Nemesis) -> tuple[dict[str, Any], Heal]:
    _all_live(nemesis)
    key, node = nemesis._leader()
    with _admin(nemesis) as admin:
        moving = admin.remove_broker(node)

    def rejoined() -> None:
        with _admin(nemesis) as admin:
            wait_until(_holds(lambda: all(b.node_id != node
                                          for b in admin.describe_cluster().brokers)),
                       SETTLE_TIMEOUT_S, POLL_INTERVAL_S, f"broker {node} deregistered")
            broker = nemesis.cluster.broker(node)
            broker.kill_all()
            broker.start()
            wait_until(_holds(lambda: any(b.node_id == node and b.state == "live"
                                          for b in admin.describe_cluster().brokers)),
                       SETTLE_TIMEOUT_S, POLL_INTERVAL_S, f"broker {node} registered again")
        _zlog(nemesis, "cluster", "add-broker", str(node),
              "--wait-timeout-s", str(SETTLE_TIMEOUT_S))
        nemesis.cluster.wait_fully_replicated(nemesis.topic, nemesis.keys, SETTLE_TIMEOUT_S)

    return {"target": node, "key": key, "partitions_moving": moving}, rejoined


MEMBERSHIP_STARTS: Final[dict[str, Start]] = {
    REASSIGN: reassign,
    REASSIGN_KILL: reassign_kill,
    DRAIN: drain,
}
