"""The rules the simulated brokers and controller run, gathered in one substitutable place.

`REAL` wires in zlog's own code, untouched. A planted bug (bugs.py) is a `Wiring` with one or
two fields replaced, so no production module carries a flag for it and the rest of the run
stays the same code. Each field is one decision point of docs/replication.md; its default
below is what zlog does there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tests.sim.replication.storage import SimDisk, SimLog
from zlog.broker.control.controller.decisions import IsrRequest, RoundInput, RoundOutcome, decide
from zlog.broker.control.controller.sessions import Session, fencing, taken_over
from zlog.broker.control.metadata.state import ClusterState
from zlog.broker.data.epoch_cache import LeaderEpochCache
from zlog.broker.data.isr import HighWatermark, IsrErrorAction, ReplicaSet, isr_error_action
from zlog.broker.data.partition import Partition
from zlog.broker.data.producer_state import ProducerBatch, ProducerStateTable
from zlog.errors import ErrorCode


def rebuilt_producers(log: SimLog) -> ProducerStateTable:
    """The producer table of what the log holds (partition_host.rebuilt_producers)."""
    table = ProducerStateTable()
    table.rebuild([(ProducerBatch(pid, epoch, seq, info.next - info.base - 1), info.base)
                   for info in log.infos for pid, epoch, seq in (info.producer,)
                   if pid >= 0])
    return table


def last_fetched_epoch(partition: Partition) -> int:
    """A follower's fetch names the epoch of its log's tail (fetcher.py)."""
    return partition.epochs.latest_epoch


def acks_status(partition: Partition, required_offset: int) -> ErrorCode | None:
    return partition.acks_status(required_offset)


def next_proposal(tracker: HighWatermark, now: int, log_end: int, lag_max: int,
                  log_start: int) -> frozenset[int] | None:
    return tracker.next_proposal(now, log_end, lag_max, log_start)


def nothing(partition: Partition) -> None:
    del partition


def after_propose(partition: Partition, new_isr: frozenset[int]) -> None:
    del partition, new_isr


def follower_opened(partition: Partition, last_high_watermark: int) -> None:
    del partition, last_high_watermark


def member_epochs(tracker: HighWatermark, new_isr: frozenset[int]) -> dict[int, int]:
    """The broker epoch each member fetched with (isr_proposals.py)."""
    return {replica: state.broker_epoch for replica, state in tracker.followers.items()
            if replica in new_isr and state.broker_epoch >= 0}


def directory_id(disk: SimDisk) -> str:
    """A registration names the broker's data directory (cluster_node.data_dir_identity)."""
    return disk.dir_id


def checked_requests(state: ClusterState, requests: tuple[IsrRequest, ...]
                     ) -> tuple[IsrRequest, ...]:
    del state
    return requests


def fenced_early(down_since: Mapping[int, int], refused: frozenset[int],
                 last_heard: Mapping[int, int], now: int, heartbeat_ticks: int
                 ) -> frozenset[int]:
    """Brokers fenced before their session ends: those whose port refuses connections (their
    processes are gone), silent since their connection went down (ControllerService._gone).
    A connection that merely dropped proves nothing: the broker may lead on its lease."""
    del now, heartbeat_ticks
    return frozenset(b for b in refused if last_heard.get(b, -1) <= down_since[b])


def retention_upto(log: SimLog) -> int:
    """Retention deletes only segments wholly below the log's high watermark
    (PartitionLog.enforce_retention; the simulated broker keeps no producer snapshots, so
    none bounds it further, as in zlog when none could be written)."""
    return log.published_high_watermark


def records_deleted(partition: Partition, offset: int) -> bool:
    """A DeleteRecords is answered once every in-sync replica's log start reached its offset
    (delete_records.py: the partition's low watermark)."""
    return partition.low_watermark >= offset


def lease_holds(now: int, lease_until: int) -> bool:
    """A worker takes writes only while its broker's lease runs (DataPlane.lease_holds)."""
    return now < lease_until


@dataclass(frozen=True, slots=True)
class Wiring:
    name: str = "real"
    # controller
    decide: Callable[[ClusterState, RoundInput], RoundOutcome] = decide
    directory_id: Callable[[SimDisk], str] = directory_id
    isr_requests: Callable[[ClusterState, tuple[IsrRequest, ...]],
                           tuple[IsrRequest, ...]] = checked_requests
    fenced_early: Callable[[Mapping[int, int], frozenset[int], Mapping[int, int], int, int],
                           frozenset[int]] = fenced_early
    taken_over: Callable[[ClusterState, int], dict[int, Session]] = taken_over
    fencing: Callable[[Mapping[int, Session], frozenset[int], frozenset[int]], None] = fencing
    # leader
    lease_holds: Callable[[int, int], bool] = lease_holds
    retention_upto: Callable[[SimLog], int] = retention_upto
    partition_class: type[Partition] = Partition
    replica_set_class: type[ReplicaSet] = ReplicaSet
    epoch_cache_class: type[LeaderEpochCache] = LeaderEpochCache
    acks_status: Callable[[Partition, int], ErrorCode | None] = acks_status
    ack_duplicates_at_once: bool = False
    records_deleted: Callable[[Partition, int], bool] = records_deleted
    next_proposal: Callable[[HighWatermark, int, int, int, int], frozenset[int] | None] = (
        next_proposal)
    after_propose: Callable[[Partition, frozenset[int]], None] = after_propose
    member_epochs: Callable[[HighWatermark, frozenset[int]], dict[int, int]] = member_epochs
    became_leader: Callable[[Partition], None] = nothing
    isr_error_action: Callable[[ErrorCode], IsrErrorAction] = isr_error_action
    resume_isr_changes: bool = True  # a new worker process takes its stored change back
    # follower
    last_fetched_epoch: Callable[[Partition], int] = last_fetched_epoch
    follower_opened: Callable[[Partition, int], None] = follower_opened
    follower_new_epoch: Callable[[Partition], None] = nothing
    apply_stale_answers: bool = False
    rebuild_after_truncation: bool = True
    store_before_fetching: bool = True  # the next fetch's offset promises what the log holds


REAL = Wiring()
