"""Leaderships this broker holds on partitions it cannot serve: handed to the other replicas.

A worker stuck in uninterruptible I/O (a stuck disk) outlives the SIGKILL that ends a stalled
worker, and no replacement may open its partitions' files while it lives; a worker that crashes
again and again serves nothing either (`WorkerPool.offline`). Its followers cost little (their
leaders take them out of the ISR after `replica_lag_time_max_ms`), but its leaderships would
hold their partitions while this broker, alive and heartbeating, is never fenced. So the
supervisor resigns each of them as a leader that cannot write does (docs/replication.md §3):
an AlterPartition proposing the ISR without this broker, which the controller answers by
electing an in-sync follower in a new leader epoch. With no other in-sync replica the partition
waits for this one: nothing it alone holds is given up.
"""

from __future__ import annotations

from collections.abc import Iterable

from zlog.broker.control.metadata.state import ClusterState
from zlog.broker.worker_protocol import AlterIsr
from zlog.types import TopicPartition


def resignations(state: ClusterState, node_id: int,
                 offline: Iterable[TopicPartition]) -> list[AlterIsr]:
    """The AlterPartition (as a worker's AlterIsr) that hands each offline partition this
    broker leads to its other in-sync replicas; none for one led elsewhere or alone in sync."""
    changes = []
    for topic, index in sorted(offline):
        partition = state.partition(topic, index)
        if partition is None or partition.leader != node_id:
            continue
        rest = tuple(replica for replica in partition.isr if replica != node_id)
        if rest:
            changes.append(AlterIsr(0, topic, index, partition.leader_epoch,
                                    partition.partition_epoch, rest))
    return changes
