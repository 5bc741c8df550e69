"""The cluster as its controller sees it, and the wait until it is whole again.

A wipe (zlog_jepsen.disk_wipe) starts and ends only while the cluster is whole: every partition
of the cluster (the topic's, and the group offsets' a subscribe run commits to) has all its
replicas in sync with a serving leader, and every voter of the metadata log counts. The
controller is asked because it decides: a broker that restarted moments ago (a wiped one,
catching up on the metadata log) may answer from an older state.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Final

from zlog.client import Admin, ClusterDescription
from zlog.errors import ZlogError
from zlog.transport.messages.admin import PartitionMetadata, TopicMetadata
from zlog_testbed.waiting import wait_until

if TYPE_CHECKING:
    from zlog_jepsen.nemesis import Nemesis

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


def controller_view(nemesis: Nemesis, admin: Admin
                    ) -> tuple[ClusterDescription, tuple[TopicMetadata, ...]]:
    """The cluster and every topic as the controller sees them. Raises ZlogError or
    AssertionError when it does not answer."""
    described = admin.describe_cluster()
    if described.controller_id not in nemesis.cluster.brokers:
        raise AssertionError(f"no controller known ({described.controller_id})")
    broker = nemesis.cluster.broker(described.controller_id)
    return described, broker.metadata(None).topics


def _blockers_now(nemesis: Nemesis, admin: Admin) -> list[str]:
    cluster = nemesis.cluster
    try:
        described, topics = controller_view(nemesis, admin)
    except (ZlogError, AssertionError) as error:
        return [f"no answer: {error}"]
    if nemesis.topic not in {t.name for t in topics}:
        return [f"{nemesis.topic} not in the controller's metadata"]
    voters = [node for node in cluster.brokers if node not in cluster.spares]
    return wipe_blockers(((t.name, p) for t in topics for p in t.partitions),
                         described.voter_lag_blocks, voters)


def wait_whole(nemesis: Nemesis, what: str) -> None:
    """Until nothing blocks a wipe, or WHOLE_TIMEOUT_S (AssertionError, naming what still
    blocks)."""
    last: list[str] = []

    def whole() -> bool:
        last[:] = _blockers_now(nemesis, admin)
        return not last

    with Admin(nemesis.cluster.bootstrap, request_timeout_ms=ADMIN_TIMEOUT_MS) as admin:
        try:
            wait_until(whole, WHOLE_TIMEOUT_S, POLL_INTERVAL_S, what)
        except AssertionError as error:
            raise AssertionError(f"{error}; still: {'; '.join(last)}") from None


def topic_now(nemesis: Nemesis, admin: Admin) -> tuple[PartitionMetadata, ...]:
    """The workload topic's partitions as the controller sees them (none when it does not
    answer)."""
    try:
        _, topics = controller_view(nemesis, admin)
    except (ZlogError, AssertionError):
        return ()
    return next((t.partitions for t in topics if t.name == nemesis.topic), ())
