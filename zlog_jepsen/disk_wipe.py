"""A broker's disk wiped (SC5): kill -9, everything it stored gone, started again as the same node.

A host whose disk was replaced comes back under its node id with nothing: no segments, no
leader-epoch checkpoints, no metadata log, no rings, and no `meta.json`, so it makes a new
directory id (zlog_jepsen.storage_faults.wipe_disk). The controller must then treat it as a
new, empty replica of every partition it held: out of every ISR, never elected before it
caught up, back in the ISR only once it fetched everything again. A metadata-log voter must
not count toward a quorum before the leader swapped its new directory in (docs/raft.md
§4.15).

Wiping is power loss with nothing kept, so it may lose nothing acknowledged only while the
other replicas hold everything: with three replicas and min.insync.replicas 2, one disk at a
time, and none while another replica is out of sync. So the fault starts only once every
partition of the cluster (the topic's, and the group offsets' a subscribe run commits to)
has all its replicas in sync with a serving leader, and every voter counts (`wipe_blockers`):
the broker an earlier wipe hit has caught up, and at most one voter of three is ever a new
directory, never a majority. The rest between faults is then at least that long, whatever
the schedule drew. Its end waits for the same condition: the wiped broker back in every ISR
and counted as a voter again; the end event says how long after its restart that held.

The broker starts again either at once (its registration meets its previous session, still
live, DUPLICATE_BROKER_REGISTRATION until that ends: the quick restart of a replaced host) or
after the hold.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from tests.waiting import wait_until
from zlog.client import Admin
from zlog.errors import ZlogError
from zlog.transport.messages import PartitionMetadata
from zlog_jepsen.storage_faults import dir_id, wipe_disk

if TYPE_CHECKING:
    from zlog_jepsen.nemesis import Heal, Nemesis

WIPE_DISK: Final = "wipe-disk"
AT_ONCE: Final = "at-once"
AFTER_HOLD: Final = "after-hold"
RESTARTS: Final = (AT_ONCE, AFTER_HOLD)
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


def _blockers_now(nemesis: Nemesis, admin: Admin) -> list[str]:
    """What blocks a wipe, as the controller sees it: a broker that restarted moments ago
    (the wiped one, catching up on the metadata log) may answer from an older state."""
    cluster = nemesis.cluster
    try:
        described = admin.describe_cluster()
        if described.controller_id not in cluster.brokers:
            return [f"no controller known ({described.controller_id})"]
        topics = cluster.broker(described.controller_id).metadata(None).topics
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


def wipe(nemesis: Nemesis) -> tuple[dict[str, Any], Heal]:
    _wait_whole(nemesis, "every replica in sync and every voter counted before a wipe")
    key, node = nemesis._leader()
    broker = nemesis.cluster.broker(node)
    restart = nemesis.random.choice(RESTARTS)
    details: dict[str, Any] = {
        "target": node, "key": key, "restart": restart,
        "voter": node not in nemesis.cluster.spares,
        "controller": nemesis.cluster.metadata().controller_id == node}
    broker.kill_all()
    details.update(wipe_disk(broker.data_dir, broker.ring_dir))
    started: list[float] = []
    if restart == AT_ONCE:
        broker.start()
        started.append(time.monotonic())

    def rejoined() -> None:
        if not started:
            broker.start()
            started.append(time.monotonic())
        details["new_dir_id"] = dir_id(broker.data_dir)
        _wait_whole(nemesis, f"broker {node} back in every ISR and counted")
        details["whole_after_restart_ms"] = round((time.monotonic() - started[0]) * 1000)

    return details, rejoined
