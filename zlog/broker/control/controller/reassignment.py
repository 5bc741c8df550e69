"""A partition's reassignment (KIP-455) as its record goes through it: pure functions.

* **Start**: the replica set becomes the target followed by the current replicas that are not
  in it (`started`), so the new replicas are created and fetch from the leader while the old
  ones keep serving; leader, leader epoch and ISR stay as they were.
* **Completion** (`completed`, decided by the controller in a round): once every target
  replica is in the ISR, the replica set becomes the target, the ISR keeps only target
  members, and a leader outside the target hands over to the first usable ISR member of the
  target (leader epoch + 1). Replicas that left stop serving the partition.
* **Cancellation** (`cancelled`): the replica set goes back to the one the reassignment
  started from; the ISR keeps only its members, and a leader that was one of the added
  replicas hands over to the first of them still in the ISR.

A new target for a partition already being reassigned starts from the current replica set,
so a replica added by the first reassignment and not wanted by the second is removed again.
"""

from __future__ import annotations

from dataclasses import dataclass

from zlog.broker.control.metadata.commands import PartitionChange
from zlog.broker.control.metadata.state import PartitionInfo
from zlog.errors import ErrorCode, ZlogError
from zlog.types import NO_LEADER


@dataclass(frozen=True, slots=True)
class ReplicaFields:
    """A partition record's replica fields, as a reassignment step leaves them."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def started(partition: PartitionInfo, target: tuple[int, ...]) -> ReplicaFields:
    """The replica fields while the partition moves to `target` (already validated)."""
    original = partition.original
    replicas = (*target, *(r for r in partition.replicas if r not in target))
    adding = tuple(r for r in replicas if r not in original)
    removing = tuple(r for r in replicas if r not in target)
    return ReplicaFields(replicas, adding, removing)


def cancelled(topic: str, partition: PartitionInfo) -> tuple[ReplicaFields, int, int,
                                                                tuple[int, ...]]:
    """(replica fields, leader, leader epoch, ISR) once the reassignment in progress is
    undone; ZlogError when none is in progress or no original replica is in sync."""
    where = f"{topic}-{partition.partition}"
    if not partition.reassigning:
        raise ZlogError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                        f"{where} has no reassignment in progress to cancel")
    original = partition.original
    isr = tuple(r for r in partition.isr if r in original)
    if not isr:
        raise ZlogError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"{where}: none of its original replicas {list(original)} is in sync, "
                        "so cancelling would leave it without a leader")
    leader = partition.leader if partition.leader in isr else isr[0]
    epoch = partition.leader_epoch + (1 if leader != partition.leader else 0)
    return ReplicaFields(original, (), ()), leader, epoch, isr


def completed(topic: str, partition: PartitionInfo,
              usable: frozenset[int]) -> PartitionChange | None:
    """The change that ends the reassignment in progress, once every target replica is in
    sync and one of them can lead; None until then (or when none is in progress)."""
    if not partition.reassigning:
        return None
    target = partition.target
    if not set(target) <= set(partition.isr):
        return None
    isr = tuple(r for r in target if r in partition.isr)
    leader = partition.leader if partition.leader in target else next(
        (r for r in isr if r in usable), NO_LEADER)
    if leader == NO_LEADER:
        return None
    epoch = partition.leader_epoch + (1 if leader != partition.leader else 0)
    return PartitionChange(topic, partition.partition, partition.partition_epoch, leader,
                           epoch, isr, replicas=target)
