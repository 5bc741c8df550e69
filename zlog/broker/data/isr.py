"""The leader's in-sync-replica and high-watermark rules, pure: no log, no clock, no socket.

Kafka's rules (docs/architecture.md §5.1, "ISR replication"), as far as a single leader applies
them:

* A follower that fetches at offset `o` holds every batch below `o`: its fetch offset is its
  log end offset (LEO), reported by asking for what comes next.
* The **high watermark** (HW) is the smallest LEO over the in-sync replicas (the leader's own
  LEO included), and never moves back while this replica leads. With one replica it is the
  leader's log end. Consumers read only below it; acks=all is answered once it covers a batch.
* acks=all needs at least `min.insync.replicas` replicas in the ISR: fewer refuse the write
  before anything is appended, and an ISR that shrank below it after the append answers
  NOT_ENOUGH_REPLICAS_AFTER_APPEND once the HW covers the batch.

`Partition` (partition.py) owns one `HighWatermark` and feeds it its log's bounds; the cluster's
ISR changes (shrink, expand, the maximal ISR while a change is pending) grow here.
"""

from __future__ import annotations

from dataclasses import dataclass

from zlog.errors import ErrorCode, ZlogError


@dataclass(frozen=True, slots=True)
class ReplicaSet:
    """Who holds the partition, who is in sync, and how many in-sync replicas acks=all needs."""

    local_replica_id: int
    replicas: frozenset[int]
    isr: frozenset[int]
    min_insync_replicas: int = 1

    def __post_init__(self) -> None:
        assert self.local_replica_id in self.isr, "the leader is always in its own ISR"
        assert self.isr <= self.replicas, (self.isr, self.replicas)
        assert self.min_insync_replicas >= 1, self.min_insync_replicas

    @classmethod
    def single(cls, local_replica_id: int = 0, min_insync_replicas: int = 1) -> ReplicaSet:
        only = frozenset({local_replica_id})
        return cls(local_replica_id, only, only, min_insync_replicas)

    @property
    def enough_in_sync(self) -> bool:
        """Whether acks=all may be appended (and acknowledged) now."""
        return len(self.isr) >= self.min_insync_replicas


class HighWatermark:
    """The followers' reported log ends and the HW they give, for one leader replica."""

    def __init__(self, replicas: ReplicaSet, log_start_offset: int, log_end_offset: int) -> None:
        self.replicas = replicas
        self._follower_end_offsets: dict[int, int] = {}
        self.value = log_start_offset
        self.value = self.candidate(log_start_offset, log_end_offset)

    def check_follower(self, replica_id: int, topic: str, partition: int) -> None:
        """NOT_LEADER_OR_FOLLOWER for a replica id that is not one of our followers."""
        known = replica_id in self.replicas.replicas
        if not known or replica_id == self.replicas.local_replica_id:
            raise ZlogError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"replica {replica_id} is not a follower of {topic}-{partition}",
            )

    def note_follower(
        self, replica_id: int, fetch_offset: int, log_start_offset: int, log_end_offset: int
    ) -> None:
        """A follower fetching at `fetch_offset` holds everything below it (Kafka's rule); an
        offset outside the leader's log says nothing and is ignored."""
        if log_start_offset <= fetch_offset <= log_end_offset:
            self._follower_end_offsets[replica_id] = fetch_offset

    def candidate(self, log_start_offset: int, log_end_offset: int) -> int:
        """The HW the ISR's log ends allow now; never below the current one."""
        ends = [
            log_end_offset if replica == self.replicas.local_replica_id
            else self._follower_end_offsets.get(replica, self.value)
            for replica in self.replicas.isr
        ]
        lowest = min(*ends, log_end_offset)
        return max(lowest, self.value, log_start_offset)

    def advance(self, log_start_offset: int, log_end_offset: int) -> tuple[int, int]:
        """Move the HW to its candidate; (before, after)."""
        before = self.value
        self.value = self.candidate(log_start_offset, log_end_offset)
        assert self.value >= before, (before, self.value)
        return before, self.value

    def acks_status(self, required_offset: int, *, is_leader: bool) -> ErrorCode | None:
        """For an acks=all entry: its answer now, or None to keep waiting (Kafka's rule).

        Once the HW covers the entry it is acknowledged, unless the ISR has meanwhile shrunk
        below min.insync.replicas: the data is on the leader, but not as safe as asked.
        """
        if self.value >= required_offset:
            if not self.replicas.enough_in_sync:
                return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return ErrorCode.NONE
        if not is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None
