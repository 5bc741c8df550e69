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
replicas in sync with a serving leader, and every voter counts
(zlog_jepsen.cluster_view.wipe_blockers): the broker an earlier wipe hit has caught up, and
at most one voter of three is ever a new directory, never a majority. The rest between
faults is then at least that long, whatever the schedule drew. Its end waits for the same
condition: the wiped broker back in every ISR and counted as a voter again; the end event
says how long after its restart that held.

The broker starts again either at once (its registration meets its previous session, still
live, DUPLICATE_BROKER_REGISTRATION until that ends: the quick restart of a replaced host) or
after the hold.

Two shapes. In-sync: a random key's leader is wiped while every replica is in sync. Sole-ISR
(drawn half the time, or forced by the schedule; it needs the spare broker, which never
votes): for a key whose leader is a voter and whose other replicas are the spare and one
voter, those two are killed (their data stays: kill -9) and the leader, now the partition's
only in-sync replica, is wiped. zlog must not elect it on its empty disk: its partitions stay
without a leader until an operator turns unclean election on, which the end does, as one
would (zlog_jepsen.sole_isr). The metadata log usually has no quorum meanwhile (one voter
down, one wiped), which is unavailability, not loss.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any, Final

from zlog.client import Admin
from zlog.transport.messages.admin import PartitionMetadata
from zlog_jepsen.cluster_view import ADMIN_TIMEOUT_MS, topic_now, wait_whole
from zlog_jepsen.sole_isr import SoleIsr
from zlog_jepsen.storage_faults import dir_id, wipe_disk

if TYPE_CHECKING:
    from zlog_jepsen.nemesis import Heal, Nemesis

WIPE_DISK: Final = "wipe-disk"
AT_ONCE: Final = "at-once"
AFTER_HOLD: Final = "after-hold"
RESTARTS: Final = (AT_ONCE, AFTER_HOLD)
IN_SYNC: Final = "in-sync"
SOLE_ISR: Final = "sole-isr"
SHAPES: Final = (IN_SYNC, SOLE_ISR)


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


def _target(nemesis: Nemesis) -> tuple[str, int, int, tuple[int, ...]]:
    """(shape, key, the broker to wipe, the brokers to kill first)."""
    cluster = nemesis.cluster
    if cluster.spares and nemesis.random.choice(nemesis.schedule.wipe_shapes) == SOLE_ISR:
        with Admin(cluster.bootstrap, request_timeout_ms=ADMIN_TIMEOUT_MS) as admin:
            candidates = sole_isr_candidates(topic_now(nemesis, admin), cluster.spares)
        if candidates:
            key, node, others = nemesis.random.choice(candidates)
            return SOLE_ISR, key, node, others
    key, node = nemesis._leader()
    return IN_SYNC, key, node, ()


def wipe(nemesis: Nemesis) -> tuple[dict[str, Any], Heal]:
    wait_whole(nemesis, "every replica in sync and every voter counted before a wipe")
    cluster = nemesis.cluster
    shape, key, node, others = _target(nemesis)
    broker = cluster.broker(node)
    restart = nemesis.random.choice(RESTARTS)
    details: dict[str, Any] = {
        "target": node, "key": key, "shape": shape, "restart": restart,
        "voter": node not in cluster.spares,
        "controller": cluster.metadata().controller_id == node}
    sole = (SoleIsr(nemesis, key, node, others, functools.partial(nemesis.record, WIPE_DISK))
            if shape == SOLE_ISR else None)
    if sole is not None:
        details.update(sole.leave_alone())
    broker.kill_all()
    details.update(wipe_disk(broker.data_dir, broker.ring_dir))
    started: list[float] = []
    if restart == AT_ONCE:  # with a voter killed, usually no quorum: ready once it is back
        broker.start(wait=sole is None)
        started.append(time.monotonic())

    def rejoined() -> None:
        if not started:
            broker.start(wait=sole is None)
            started.append(time.monotonic())
        if sole is not None:
            sole.bring_back()
            details["unclean_election_topics"] = sole.unclean_topics
        broker.wait_ready()
        details["new_dir_id"] = dir_id(broker.data_dir)
        wait_whole(nemesis, f"broker {node} back in every ISR and counted")
        details["whole_after_restart_ms"] = round((time.monotonic() - started[0]) * 1000)
        if sole is not None:
            sole.restore()

    return details, rejoined
