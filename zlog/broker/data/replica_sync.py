"""ISR replication, partition by partition: the leader's answer to a follower's fetch, and the
follower's use of it. Pure: the partition's log is a `LogLike`, time is passed in.

Leader side (`serve_replica_fetch`), Kafka's checks in Kafka's order (docs/replication.md §2.2):
the follower's view of the leader epoch (older: FENCED_LEADER_EPOCH, newer:
UNKNOWN_LEADER_EPOCH, this replica no longer leading: NOT_LEADER_OR_FOLLOWER), that it is a
replica at all, its offset against the log's bounds, then **divergence**: if the epoch of the
follower's last batch ends earlier in the leader's log than the follower's log end (or the
leader never had that epoch), the answer is that epoch and its end instead of batches, and the
follower's position is not taken. First of all, a fetch naming another topic id than the
partition's (the name was deleted and created again, KIP-516) is UNKNOWN_TOPIC_ID; and an
epoch newer than any the leader's cache holds, for which it has no end to give, is
UNKNOWN_LEADER_EPOCH: the follower asks again, never reading it as "no divergence". An epoch
older than any the leader's log still holds, once retention moved its start, cannot be placed
either (the cache no longer says where the next epoch began, so KIP-279's answer, "it ends where
my first epoch starts", would let a follower keep a divergent batch just below the leader's log
start): OFFSET_OUT_OF_RANGE, and the follower starts over at the leader's log start. Otherwise
the follower's fetch offset is its log end (it holds everything below), which may move the high
watermark, and it gets the batches from there up to the leader's log end.

Follower side (`apply_replica_fetch`): a diverging answer cuts the log at the smaller of the
leader's end for that epoch and the follower's own end for it (KIP-101 with KIP-279: never by
high watermark); batches are appended byte for byte, each exactly at the log end and of an epoch
no newer than the leader's; the high watermark follows the leader's, never above the log end, and
the log start the leader's (what DeleteRecords or retention deleted there), never above the high
watermark. A
diverging answer that names no epoch or no end is dropped (the follower backs off and asks
again): neither a cut point nor "no divergence". OFFSET_OUT_OF_RANGE (`reset_out_of_range`):
past the leader's log end the follower cuts to it, otherwise it starts over at the leader's
log start.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from zlog.broker.data.epoch_cache import UNDEFINED
from zlog.broker.data.partition import Partition
from zlog.broker.data.producer_state import ProducerStateTable
from zlog.errors import ErrorCode, ZlogError
from zlog.record.header import read_header
from zlog.transport.messages.data import (
    NO_EPOCH,
    ReplicaFetchEntry,
    ReplicaFetchResult,
)
from zlog.transport.wire import Buffer
from zlog.types import NO_TOPIC_ID

_READ_ALL_BYTES: Final = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ReplicaRead:
    """A leader's answer for one partition of a follower's fetch."""

    result: ReplicaFetchResult
    committed_bytes: int = 0  # bytes that became visible to consumers (the HW moved)

    @property
    def size_bytes(self) -> int:
        return sum(len(chunk) for chunk in self.result.chunks)


def _refused(partition: Partition, entry: ReplicaFetchEntry, code: ErrorCode,
             message: str) -> ReplicaRead:
    log = partition.log
    return ReplicaRead(ReplicaFetchResult(
        entry.topic, entry.partition, int(code), partition.leader_epoch,
        partition.high_watermark, log.log_start_offset, log.log_end_offset,
        error_message=message))


def serve_replica_fetch(
    partition: Partition, entry: ReplicaFetchEntry, *, replica_id: int, broker_epoch: int,
    now_ms: int, limit_bytes: int,
) -> ReplicaRead:
    """The leader's answer to one partition of a follower's fetch (see the module docstring)."""
    where = f"{entry.topic}-{entry.partition}"
    if NO_TOPIC_ID not in (entry.topic_id, partition.topic_id) and (
            entry.topic_id != partition.topic_id):
        return _refused(partition, entry, ErrorCode.UNKNOWN_TOPIC_ID,
                        f"{where}: the follower's replica is of topic id {entry.topic_id}, "
                        f"this one of {partition.topic_id} (the name was deleted and "
                        "created again)")
    if entry.current_leader_epoch < partition.leader_epoch:
        return _refused(partition, entry, ErrorCode.FENCED_LEADER_EPOCH,
                        f"{where}: epoch {entry.current_leader_epoch} is older than "
                        f"{partition.leader_epoch}")
    if entry.current_leader_epoch > partition.leader_epoch:
        return _refused(partition, entry, ErrorCode.UNKNOWN_LEADER_EPOCH,
                        f"{where}: epoch {entry.current_leader_epoch} is newer than this "
                        f"replica knows ({partition.leader_epoch})")
    if not partition.is_leader:
        return _refused(partition, entry, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        f"this worker does not lead {where}")
    replicas = partition.replicas
    if replica_id not in replicas.replicas or replica_id == replicas.local_replica_id:
        return _refused(partition, entry, ErrorCode.UNKNOWN_LEADER_EPOCH,
                        f"{where}: broker {replica_id} is not one of its followers")
    log = partition.log
    log_start, log_end = log.log_start_offset, log.log_end_offset
    if entry.fetch_offset < log_start:
        return _refused(partition, entry, ErrorCode.OFFSET_OUT_OF_RANGE,
                        f"{where}: offset {entry.fetch_offset} is below the log start "
                        f"{log_start}")
    if entry.last_fetched_epoch != NO_EPOCH:
        entries = partition.epochs.entries
        if log_start > 0 and entries and entry.last_fetched_epoch < entries[0].epoch:
            return _refused(partition, entry, ErrorCode.OFFSET_OUT_OF_RANGE,
                            f"{where}: epoch {entry.last_fetched_epoch} of the follower's last "
                            f"batch is older than any in this log, which starts at {log_start} "
                            f"in epoch {entries[0].epoch}: start over there")
        epoch, end = partition.epochs.end_offset_for(entry.last_fetched_epoch, log_end)
        if epoch == UNDEFINED:  # no cut point to offer, and no "no divergence" either
            return _refused(partition, entry, ErrorCode.UNKNOWN_LEADER_EPOCH,
                            f"{where}: epoch {entry.last_fetched_epoch} of the follower's "
                            f"last batch is newer than any this leader has "
                            f"({partition.epochs.latest_epoch})")
        if epoch < entry.last_fetched_epoch or end < entry.fetch_offset:
            return ReplicaRead(ReplicaFetchResult(
                entry.topic, entry.partition, int(ErrorCode.NONE), partition.leader_epoch,
                partition.high_watermark, log_start, log_end, diverging_epoch=epoch,
                diverging_end_offset=end))
    if entry.fetch_offset > log_end:
        return _refused(partition, entry, ErrorCode.OFFSET_OUT_OF_RANGE,
                        f"{where}: offset {entry.fetch_offset} is past the log end {log_end}")
    committed = partition.note_replica_fetch(replica_id, entry.fetch_offset, now_ms,
                                             broker_epoch,
                                             log_start_offset=entry.log_start_offset)
    chunks: Sequence[Buffer] = ()
    if entry.fetch_offset < log_end:
        chunks = log.read(entry.fetch_offset, max(limit_bytes, 1), None)
    return ReplicaRead(ReplicaFetchResult(
        entry.topic, entry.partition, int(ErrorCode.NONE), partition.leader_epoch,
        partition.high_watermark, log.log_start_offset, log.log_end_offset,
        chunks=tuple(chunks)), committed)


@dataclass(frozen=True, slots=True)
class FollowerProgress:
    """What one response did to a follower's partition."""

    appended_bytes: int = 0
    truncated_to: int | None = None  # set when the log was cut


def truncation_point(partition: Partition, epoch: int, end_offset: int) -> int:
    """Where a follower cuts its log when the leader says its tail diverges after `epoch`,
    which ends at `end_offset` in the leader's log (KIP-279): the smaller of that and the
    follower's own end for the epoch, never past its log end."""
    log_end = partition.log.log_end_offset
    own_epoch, own_end = partition.epochs.end_offset_for(epoch, log_end)
    if own_epoch == UNDEFINED:
        return min(end_offset, log_end)
    return min(end_offset, own_end, log_end)


def reset_out_of_range(
    partition: Partition, result: ReplicaFetchResult, fetch_offset: int,
    rebuild_producers: Callable[[], ProducerStateTable],
) -> str:
    """A follower's fetch answered OFFSET_OUT_OF_RANGE: past the leader's log end (after an
    unclean election only) it cuts its log to that end; otherwise its log lies below the
    leader's log start or cannot be checked against the leader's (its last epoch is older than
    any the leader's log still holds), and it starts over empty at the leader's log start,
    dropping nothing the leader still has. Returns what it did ("" if nothing)."""
    if 0 <= result.log_end_offset < fetch_offset:
        partition.truncate_to(result.log_end_offset, ProducerStateTable())
        partition.producers = rebuild_producers()
        return "cut to the leader's log end"
    if result.log_start_offset >= 0:
        partition.start_over_at(result.log_start_offset)
        return "started over"
    return ""


def apply_replica_fetch(
    partition: Partition, result: ReplicaFetchResult, fetch_offset: int,
    rebuild_producers: Callable[[], ProducerStateTable], *, defer_flush: bool = False,
) -> FollowerProgress:
    """A follower applies its leader's answer for one partition (see the module docstring).

    Raises ZlogError for a response it must drop (batches not at its log end, an epoch newer
    than the leader's, a bad CRC): nothing of that response is kept past the last good batch,
    and the next fetch asks again from the log end. `defer_flush` leaves the batches in the
    ring for the log's `tick` (the caller sends its next fetch first).
    """
    assert not partition.is_leader
    if result.diverging_epoch != NO_EPOCH or result.diverging_end_offset != UNDEFINED:
        if UNDEFINED in (result.diverging_epoch, result.diverging_end_offset):
            # Never read as "no divergence" nor cut by a guess (KIP-101): ask again.
            raise ZlogError(ErrorCode.UNKNOWN_LEADER_EPOCH,
                            f"a diverging answer without a point: epoch "
                            f"{result.diverging_epoch}, end {result.diverging_end_offset}")
        point = truncation_point(partition, result.diverging_epoch, result.diverging_end_offset)
        partition.truncate_to(point, ProducerStateTable())
        partition.producers = rebuild_producers()
        return FollowerProgress(truncated_to=point)
    appended = 0
    expected = fetch_offset
    for chunk in result.chunks:
        view = memoryview(chunk)
        position = 0
        while position < view.nbytes:
            header = read_header(view, position)
            batch = view[position:position + header.size_bytes]
            if header.base_offset != expected or expected != partition.log.log_end_offset:
                raise ZlogError(ErrorCode.CORRUPT_MESSAGE,
                                f"batch at {header.base_offset}, the log ends at {expected}")
            if header.partition_leader_epoch > result.leader_epoch:
                raise ZlogError(ErrorCode.CORRUPT_MESSAGE,
                                f"batch of epoch {header.partition_leader_epoch} from a leader "
                                f"at epoch {result.leader_epoch}")
            partition.append_from_leader(batch, header, defer_flush=defer_flush)
            appended += header.size_bytes
            expected = header.base_offset + header.last_offset_delta + 1
            position += header.size_bytes
    partition.follow_high_watermark(result.high_watermark)
    partition.follow_log_start(result.log_start_offset)
    return FollowerProgress(appended_bytes=appended)
