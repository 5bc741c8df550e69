"""A leader worker's answers to its followers: Fetch v1 and OffsetForLeaderEpoch, whole requests.

`replica_sync.serve_replica_fetch` decides one partition; this module runs it over a request's
partitions within the request's byte budget, and answers epoch queries. The data plane parks a
replica fetch that found nothing (as it parks a consumer's), and answers it again when a batch
is appended or its wait ends; serving the same fetch twice is harmless (the follower's position
is the same offset).
"""

from __future__ import annotations

from collections.abc import Mapping

from zlog.broker.data.partition import Partition
from zlog.broker.data.replica_sync import ReplicaRead, serve_replica_fetch
from zlog.errors import ErrorCode
from zlog.transport.messages.cluster import (
    EpochAnswer,
    EpochQuery,
    OffsetForLeaderEpochRequestV0,
    OffsetForLeaderEpochResponseV0,
)
from zlog.transport.messages.data import (
    NO_EPOCH,
    FetchRequestV1,
    ReplicaFetchResult,
)
from zlog.types import TopicPartition


def replica_fetch_reads(
    partitions: Mapping[TopicPartition, Partition], request: FetchRequestV1, now_ms: int
) -> list[ReplicaRead]:
    """One read per entry; at most `max_bytes` in all, but always the first batch found."""
    reads: list[ReplicaRead] = []
    budget = request.max_bytes
    for entry in request.entries:
        partition = partitions.get(TopicPartition(entry.topic, entry.partition))
        if partition is None:
            reads.append(ReplicaRead(ReplicaFetchResult(
                entry.topic, entry.partition, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), NO_EPOCH,
                -1, -1, -1, error_message=f"{entry.topic}-{entry.partition} is not held by "
                                          "this worker; refresh metadata")))
            continue
        limit = min(entry.partition_max_bytes, budget) if budget > 0 else 0
        read = serve_replica_fetch(partition, entry, replica_id=request.replica_id,
                                   broker_epoch=request.broker_epoch, now_ms=now_ms,
                                   limit_bytes=max(limit, 1))
        if limit <= 0 and read.result.chunks and any(r.size_bytes for r in reads):
            read = ReplicaRead(ReplicaFetchResult(  # no budget left: the next fetch takes it
                read.result.topic, read.result.partition, read.result.error_code,
                read.result.leader_epoch, read.result.high_watermark,
                read.result.log_start_offset, read.result.log_end_offset),
                read.committed_bytes)
        budget -= read.size_bytes
        reads.append(read)
    return reads


def replica_fetch_is_complete(reads: list[ReplicaRead], request: FetchRequestV1) -> bool:
    """Answer now: an error or a divergence to report, enough bytes, or no wait asked for."""
    if request.max_wait_ms <= 0:
        return True
    if any(r.result.error_code != ErrorCode.NONE or r.result.diverging_epoch != NO_EPOCH
           for r in reads):
        return True
    return sum(r.size_bytes for r in reads) >= max(request.min_bytes, 1)


def epoch_answers(
    partitions: Mapping[TopicPartition, Partition], request: OffsetForLeaderEpochRequestV0
) -> OffsetForLeaderEpochResponseV0:
    """Where each asked epoch ends in this leader's log (KIP-101, KIP-279)."""
    return OffsetForLeaderEpochResponseV0(tuple(
        _epoch_answer(partitions.get(TopicPartition(q.topic, q.partition)), q)
        for q in request.queries))


def _epoch_answer(partition: Partition | None, query: EpochQuery) -> EpochAnswer:
    where = f"{query.topic}-{query.partition}"
    code, message = ErrorCode.NONE, ""
    if partition is None or not partition.is_leader:
        code, message = ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this worker does not lead {where}"
    elif query.current_leader_epoch < partition.leader_epoch:
        code, message = ErrorCode.FENCED_LEADER_EPOCH, f"{where}: epoch " \
                                                       f"{query.current_leader_epoch} is old"
    elif query.current_leader_epoch > partition.leader_epoch:
        code, message = ErrorCode.UNKNOWN_LEADER_EPOCH, f"{where}: epoch " \
                                                        f"{query.current_leader_epoch} is new"
    if code != ErrorCode.NONE or partition is None:
        return EpochAnswer(query.topic, query.partition, int(code), NO_EPOCH, -1, message)
    epoch, end = partition.epochs.end_offset_for(query.leader_epoch,
                                                 partition.log.log_end_offset)
    return EpochAnswer(query.topic, query.partition, 0, epoch, end)
