"""What a worker reports of the partitions it holds and the groups it coordinates, read off
them with each heartbeat (the gauges of zlog/broker/worker_metrics.py; its counters are
counted where the traffic happens: data_plane.py, transport/server.py)."""

from __future__ import annotations

import logging
from array import array
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

from zlog.broker.data.group_host import GroupHost
from zlog.broker.data.partition import Partition
from zlog.broker.worker_metrics import (
    GAUGES,
    MetricsFile,
    PartitionField,
    SlotKind,
    SlotValues,
    WorkerMetrics,
)
from zlog.shm_segments.log import PartitionLog
from zlog.types import TopicPartition

log = logging.getLogger(__name__)



def open_worker_metrics(path: Path | None) -> WorkerMetrics | None:
    """The worker's metrics file, made by its supervisor; None without one (metrics off, or a
    file this worker cannot use, which costs the metrics only, never the serving)."""
    if path is None:
        return None
    try:
        return WorkerMetrics(MetricsFile(path, writable=True))
    except OSError as error:
        log.warning("no metrics from this worker: %s", error)
        return None


def publish(metrics: WorkerMetrics, partitions: Mapping[TopicPartition, Partition],
            groups: GroupHost) -> None:
    """The gauges, from the worker's loop. A failure here costs the metrics, never the
    worker: it is logged once (a bug to report) and the next heartbeat tries again."""
    global _failure_logged
    try:
        _publish(metrics, partitions, groups)
    except AssertionError:
        raise
    except Exception:
        if not _failure_logged:
            log.exception("publishing this worker's metrics failed")
            _failure_logged = True


_failure_logged = False


def _publish(metrics: WorkerMetrics, partitions: Mapping[TopicPartition, Partition],
             groups: GroupHost) -> None:
    metrics.publish(SlotKind.PARTITION, partition_values(partitions))
    metrics.publish(SlotKind.GROUP, ((group_id, -1, array("q", (members,)))
                                     for group_id, members in groups.group_sizes()))
    metrics.publish(SlotKind.GROUP_OFFSET, (
        (f"{group_id}\0{tp.topic}", tp.partition, array("q", (offset,)))
        for group_id, tp, offset in groups.committed_offsets()))


def partition_values(partitions: Mapping[TopicPartition, Partition]) -> Iterator[SlotValues]:
    """Each partition's gauges, in the order of GAUGES[SlotKind.PARTITION]."""
    for (topic, number), partition in partitions.items():
        log = partition.log
        replicas = partition.replicas
        if isinstance(log, PartitionLog):
            unflushed_bytes, capacity_bytes = log.ring_fill_bytes
            io = log.io
            storage = (log.size_bytes, unflushed_bytes, capacity_bytes, io.flushes, io.flush_ns,
                       io.fsyncs, io.fsync_ns)
        else:
            storage = _NO_STORAGE
        yield topic, number, array("q", (
            log.log_start_offset, log.log_end_offset, partition.high_watermark,
            partition.leader_epoch, partition.is_leader, len(replicas.replicas),
            len(replicas.isr), replicas.min_insync_replicas, log.segment_count,
            len(partition.producers), *storage))


_NO_STORAGE: Final = (0,) * 7  # a log that is not a PartitionLog (tests): sizes unknown
assert (len(GAUGES[SlotKind.PARTITION])
        == PartitionField.PRODUCERS - PartitionField.LOG_START_OFFSET + 1 + len(_NO_STORAGE))
