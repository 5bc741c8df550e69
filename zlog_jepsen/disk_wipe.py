"""A broker's disk wiped (SC5): kill -9, everything it stored gone, started again as the same node.

A host whose disk was replaced comes back under its node id with nothing: no segments, no
leader-epoch checkpoints, no metadata log, no rings, and no `meta.json`, so it makes a new
directory id (zlog_jepsen.storage_faults.wipe_disk). The controller must then treat it as a
new, empty replica of every partition it held: out of every ISR, never elected before it
caught up, back in the ISR only once it fetched everything again. A metadata-log voter must
not count toward a quorum before the leader swapped its new directory in (docs/raft.md
§4.15).

Wiping is power loss with nothing kept. Under min.insync.replicas 2 every acknowledged write
is on two replicas at least, so one wipe may lose nothing acknowledged as long as no other
replica has lost data it has not fetched again (an earlier wipe's, power loss's or damaged
tail's broker, until it is back in sync). So the fault starts only once every partition of
the cluster (the topic's, and the group offsets' a subscribe run commits to) has all its
replicas in sync with a serving leader, and every voter counts (`wipe_blockers`): the broker
an earlier wipe hit has caught up, and at most one voter of three is ever a new directory,
never a majority. The rest between faults is then at least that long, whatever the schedule
drew. Its end waits for the same condition: the wiped broker back in every ISR and counted
as a voter again; the end event says how long after its restart that held.

The broker starts again either at once (its registration meets its previous session, still
live, DUPLICATE_BROKER_REGISTRATION until that ends: the quick restart of a replaced host) or
after the hold.

Two shapes. In-sync: a random key's leader is wiped while every replica is in sync. Sole-ISR
(drawn half the time; it needs the spare broker, which never votes): for a key whose leader
is a voter and whose other replicas are the spare and one voter, those two are killed (their
data stays: kill -9), the controller drops them from the ISR once their sessions end, and
the leader, now the partition's only in-sync replica, is wiped. Every write acknowledged
under min.insync.replicas 2 is still on one of the killed replicas, so nothing acknowledged
may be lost: the wiped broker must not be elected on its empty disk, and nobody may truncate
to it. The partition may stay offline until a killed replica is back, and the metadata log
has no quorum meanwhile (one voter down, one wiped), which is unavailability, not loss. The
killed brokers start again after the wiped one, in the fault's end.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from zlog.client import Admin, ClusterDescription
from zlog.errors import ZlogError
from zlog.transport.messages.admin import (
    PartitionMetadata,
    TopicMetadata,
)
from zlog_jepsen.storage_faults import dir_id, wipe_disk
from zlog_testbed.waiting import wait_until

if TYPE_CHECKING:
    from zlog_jepsen.nemesis import Heal, Nemesis

WIPE_DISK: Final = "wipe-disk"
AT_ONCE: Final = "at-once"
AFTER_HOLD: Final = "after-hold"
RESTARTS: Final = (AT_ONCE, AFTER_HOLD)
IN_SYNC: Final = "in-sync"
SOLE_ISR: Final = "sole-isr"
SHAPES: Final = (IN_SYNC, SOLE_ISR)
SOLE_TIMEOUT_S: Final = 30.0
"""For the controller to drop the killed replicas from the ISR: their sessions (1.5 s) end."""
WHOLE_TIMEOUT_S: Final = 180.0
"""Until every replica is in sync and every voter counts: a wiped broker fetches every
partition it holds again (in a subscribe run the 50 group-offsets partitions too) on a shared
two-core machine."""
ADMIN_TIMEOUT_MS: Final = 5_000
POLL_INTERVAL_S: Final = 0.25
NOT_COUNTED: Final = -1
"""A voter's lag in DescribeCluster while the leader has not swapped its directory in."""


def wipe_blockers(partitions: Iterable[tuple[str, PartitionMetadata]],
                  voter_lag_blocks: Mapping[int, int] | None,
                  voters: Collection[int]) -> list[str]:
    """What stands in the way of wiping a broker now, said for the record (nothing: go):
    a partition with a replica out of sync or no serving leader, a voter not counted."""
    blockers = [f"{topic}-{p.partition}: ISR {sorted(p.isr)} of replicas {sorted(p.replicas)}"
                f"{'' if p.endpoint and p.error_code == 0 else ', no serving leader'}"
                for topic, p in partitions
                if set(p.isr) != set(p.replicas) or not p.endpoint or p.error_code != 0]
    if voter_lag_blocks is None:
        blockers.append("the voters' progress unknown (no metadata-log leader answered)")
    else:
        blockers += [f"voter {node} not counted" for node in sorted(voters)
                     if voter_lag_blocks.get(node, NOT_COUNTED) < 0]
    return blockers


def sole_isr_candidates(partitions: Iterable[PartitionMetadata],
                        spares: Collection[int]) -> list[tuple[int, int, tuple[int, ...]]]:
    """(key, its leader, the other replicas) of each partition whose leader is a voter and
    whose other replicas are a spare and at most one voter: killed, they leave the leader its
    partition's only in-sync replica while the voters keep a quorum."""
    found = []
    for p in partitions:
        others = tuple(sorted(r for r in p.replicas if r != p.leader))
        if (p.leader in p.replicas and p.leader not in spares
                and any(r in spares for r in others)
                and sum(1 for r in others if r not in spares) <= 1):
            found.append((p.partition, p.leader, others))
    return found


def _controller_view(nemesis: Nemesis, admin: Admin
                     ) -> tuple[ClusterDescription, tuple[TopicMetadata, ...]]:
    """The cluster and every topic as the controller sees them: a broker that restarted
    moments ago (a wiped one, catching up on the metadata log) may answer from an older
    state. Raises ZlogError or AssertionError when it does not answer."""
    described = admin.describe_cluster()
    if described.controller_id not in nemesis.cluster.brokers:
        raise AssertionError(f"no controller known ({described.controller_id})")
    broker = nemesis.cluster.broker(described.controller_id)
    return described, broker.metadata(None).topics


def _blockers_now(nemesis: Nemesis, admin: Admin) -> list[str]:
    cluster = nemesis.cluster
    try:
        described, topics = _controller_view(nemesis, admin)
    except (ZlogError, AssertionError) as error:
        return [f"no answer: {error}"]
    if nemesis.topic not in {t.name for t in topics}:
        return [f"{nemesis.topic} not in the controller's metadata"]
    voters = [node for node in cluster.brokers if node not in cluster.spares]
    return wipe_blockers(((t.name, p) for t in topics for p in t.partitions),
                         described.voter_lag_blocks, voters)


def _wait_whole(nemesis: Nemesis, what: str) -> None:
    """Until nothing blocks a wipe."""
    last: list[str] = []

    def whole() -> bool:
        last[:] = _blockers_now(nemesis, admin)
        return not last

    with Admin(nemesis.cluster.bootstrap, request_timeout_ms=ADMIN_TIMEOUT_MS) as admin:
        try:
            wait_until(whole, WHOLE_TIMEOUT_S, POLL_INTERVAL_S, what)
        except AssertionError as error:
            raise AssertionError(f"{error}; still: {'; '.join(last)}") from None


def _topic_now(nemesis: Nemesis, admin: Admin) -> tuple[PartitionMetadata, ...]:
    """The topic's partitions as the controller sees them (none when it does not answer)."""
    try:
        _, topics = _controller_view(nemesis, admin)
    except (ZlogError, AssertionError):
        return ()
    return next((t.partitions for t in topics if t.name == nemesis.topic), ())


def _wait_alone(nemesis: Nemesis, key: int, node: int) -> list[int]:
    """Until broker `node` is the only in-sync replica of `key`'s partition (the others are
    down), or SOLE_TIMEOUT_S passed; the ISR last seen."""
    seen: list[int] = []

    def alone() -> bool:
        found = [p for p in _topic_now(nemesis, admin) if p.partition == key]
        seen[:] = sorted(found[0].isr) if found else seen
        return seen == [node]

    # wiped all the same if not: the killed replicas keep what was acknowledged
    with (Admin(nemesis.cluster.bootstrap, request_timeout_ms=ADMIN_TIMEOUT_MS) as admin,
          contextlib.suppress(AssertionError)):
        wait_until(alone, SOLE_TIMEOUT_S, POLL_INTERVAL_S, f"broker {node} alone in sync")
    return seen


def _target(nemesis: Nemesis) -> tuple[str, int, int, tuple[int, ...]]:
    """(shape, key, the broker to wipe, the brokers to kill first)."""
    cluster = nemesis.cluster
    if cluster.spares and nemesis.random.choice(SHAPES) == SOLE_ISR:
        with Admin(cluster.bootstrap, request_timeout_ms=ADMIN_TIMEOUT_MS) as admin:
            candidates = sole_isr_candidates(_topic_now(nemesis, admin), cluster.spares)
        if candidates:
            key, node, others = nemesis.random.choice(candidates)
            return SOLE_ISR, key, node, others
    key, node = nemesis._leader()
    return IN_SYNC, key, node, ()


def wipe(nemesis: Nemesis) -> tuple[dict[str, Any], Heal]:
    _wait_whole(nemesis, "every replica in sync and every voter counted before a wipe")
    cluster = nemesis.cluster
    shape, key, node, others = _target(nemesis)
    broker = cluster.broker(node)
    restart = nemesis.random.choice(RESTARTS)
    details: dict[str, Any] = {
        "target": node, "key": key, "shape": shape, "restart": restart,
        "voter": node not in cluster.spares,
        "controller": cluster.metadata().controller_id == node}
    if others:
        for other in others:
            cluster.broker(other).kill_all()
        details.update(killed=list(others), isr_at_wipe=_wait_alone(nemesis, key, node))
    broker.kill_all()
    details.update(wipe_disk(broker.data_dir, broker.ring_dir))
    started: list[float] = []
    if restart == AT_ONCE:  # with a voter killed there is no quorum: ready only once it is back
        broker.start(wait=not others)
        started.append(time.monotonic())

    def rejoined() -> None:
        if not started:
            broker.start(wait=not others)
            started.append(time.monotonic())
        for other in others:  # after the wiped broker: it meets them as they come back
            cluster.broker(other).start()
        broker.wait_ready()
        details["new_dir_id"] = dir_id(broker.data_dir)
        _wait_whole(nemesis, f"broker {node} back in every ISR and counted")
        details["whole_after_restart_ms"] = round((time.monotonic() - started[0]) * 1000)

    return details, rejoined
