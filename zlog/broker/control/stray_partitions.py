"""Partition data this broker keeps on disk but no longer holds a replica of.

A reassignment or a drain moves a replica away; a topic is deleted while this broker is down;
a broker removed from the cluster comes back as a new, empty one. In each case the partition's
directory would stay on the data disk forever, counted against nothing and served to no one.
Kafka deletes such a replica when the controller stops it; zlog finds them by comparing the data
directory with the metadata (docs/replication.md, "Replicas that moved away").

Only metadata at least as new as this broker's own registration may be compared (the supervisor
reconciles only then): an older copy, replayed after a restart, could name a replica "not here"
that a later record placed here and put in the ISR, and deleting it would lose what the ISR
promised. A current copy that does not place a replica here means the controller moved it away
after the new replicas caught up, so nothing acknowledged depends on this copy.

Only what zlog created is ever deleted: a directory carrying `partition.metadata` (the topic id
zlog wrote when it made the directory, shm_segments/partition_metadata.py). A plain file, a
symbolic link or a directory without that file is left alone whatever its name, so an
operator's file, another program's directory or a partition directory from a zlog older than
topic ids is never taken for a stray.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from zlog.broker.control.metadata.state import ClusterState
from zlog.broker.topic_configs import validate_topic_name
from zlog.errors import ZlogError
from zlog.types import TopicPartition


def partition_of_dir_name(name: str) -> TopicPartition | None:
    """The partition a data directory entry is named after, None for anything else (the
    metadata log's directory, lock and identity files, lost+found)."""
    topic, dash, index = name.rpartition("-")
    if not dash or not index.isdigit() or index != str(int(index)):
        return None
    try:
        validate_topic_name(topic)
    except ZlogError:
        return None
    return TopicPartition(topic, int(index))


def stray_partitions(entries: Iterable[str], state: ClusterState, node_id: int,
                     topic_id_of: Callable[[str], str | None]) -> list[TopicPartition]:
    """The partitions named by `entries` (a data directory's listing) whose data must go:
    of a topic the metadata does not know, or placed on other brokers only. Partitions of
    topics being deleted are left to the deletion, which tracks its own progress.
    `topic_id_of(name)` is the topic id in that entry's `partition.metadata`, None for an
    entry zlog did not create; it is asked only about entries that would be strays."""
    strays = []
    for name in sorted(entries):
        tp = partition_of_dir_name(name)
        if tp is None or tp.topic in state.deleting:
            continue
        info = state.partition(*tp)
        if (info is None or node_id not in info.replicas) and topic_id_of(name) is not None:
            strays.append(tp)
    return strays
