"""What a worker reports of the partitions it holds and the groups it coordinates, read off
them with each heartbeat (the gauges of zlog/broker/worker_metrics.py; its counters are
counted where the traffic happens: data_plane.py, transport/server.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from pathlib import Path

from zlog.broker.data.group_host import GroupHost
from zlog.broker.data.partition import Partition
from zlog.broker.worker_metrics import (
    GroupField,
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
    metrics.publish(SlotKind.PARTITION, partition_values(partitions))
    metrics.publish(SlotKind.GROUP, ((group_id, -1, [(GroupField.MEMBERS, members)])
                                     for group_id, members in groups.group_sizes()))
    metrics.publish(SlotKind.GROUP_OFFSET, (
        (f"{group_id}\0{tp.topic}", tp.partition, [(GroupField.COMMITTED_OFFSET, offset)])
        for group_id, tp, offset in groups.committed_offsets()))


def partition_values(partitions: Mapping[TopicPartition, Partition]) -> Iterator[SlotValues]:
    """Each partition's gauges, as `WorkerMetrics.publish` takes them."""
    for tp, partition in partitions.items():
        replicas = partition.replicas
        values: list[tuple[int, int]] = [
            (PartitionField.LOG_START_OFFSET, partition.log.log_start_offset),
            (PartitionField.LOG_END_OFFSET, partition.log.log_end_offset),
            (PartitionField.HIGH_WATERMARK, partition.high_watermark),
            (PartitionField.LEADER_EPOCH, partition.leader_epoch),
            (PartitionField.IS_LEADER, int(partition.is_leader)),
            (PartitionField.REPLICAS, len(replicas.replicas)),
            (PartitionField.ISR, len(replicas.isr)),
            (PartitionField.MIN_INSYNC_REPLICAS, replicas.min_insync_replicas),
            (PartitionField.SEGMENTS, partition.log.segment_count),
            (PartitionField.PRODUCERS, len(partition.producers)),
        ]
        if isinstance(partition.log, PartitionLog):
            storage = partition.log
            unflushed_bytes, capacity_bytes = storage.ring_fill_bytes
            values += [
                (PartitionField.SIZE_BYTES, storage.size_bytes),
                (PartitionField.RING_UNFLUSHED_BYTES, unflushed_bytes),
                (PartitionField.RING_CAPACITY_BYTES, capacity_bytes),
                (PartitionField.FLUSHES, storage.io.flushes),
                (PartitionField.FLUSH_NS, storage.io.flush_ns),
                (PartitionField.FSYNCS, storage.io.fsyncs),
                (PartitionField.FSYNC_NS, storage.io.fsync_ns),
            ]
        yield tp.topic, tp.partition, values
