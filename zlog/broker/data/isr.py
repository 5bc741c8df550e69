"""The leader's in-sync-replica and high-watermark rules, pure: no log, no clock, no socket.

Kafka's rules (docs/replication.md §2 and §3), as the leader of one partition applies them:

* A follower that fetches at offset `o` holds every batch below `o`: its fetch offset is its
  log end offset (LEO), reported by asking for what comes next.
* The **high watermark** (HW) is the smallest LEO over the *maximal* ISR: the committed ISR
  plus a member whose joining the leader has proposed (more members can only hold the HW back,
  so counting them early is safe; a shrink counts only once committed), and over the followers
  outside the ISR that were caught up at the last ISR check (below). It never moves back
  while this replica leads. With one replica it is the leader's log end. Consumers read below
  it; acks=all is answered once it covers a batch.
* The HW stays where it is while the committed ISR is smaller than the *effective*
  min.insync.replicas, min(min.insync.replicas, replicas) (KIP-966): what becomes visible is
  then on enough replicas, acks=1 writes included, and a replica that leaves the ISR in that
  state still holds everything below the HW.
* A new leader may sit below a HW its predecessor showed clients (its own HW lags by a fetch),
  but never below its **epoch start** (its log end when it took the epoch): every earlier
  leader counted it in its maximal ISR. So clients are shown no HW until it reaches the epoch
  start (KIP-207's exposure gate), and the HW they see never goes back.
* acks=all needs the committed ISR to hold at least `min.insync.replicas` (as in Kafka 3, not
  capped at the replication factor: asking more of a topic than it has replicas is refused,
  not quietly lowered): fewer refuse the write before anything is appended
  (NOT_ENOUGH_REPLICAS), and an ISR below it when the HW covers the batch answers
  NOT_ENOUGH_REPLICAS_AFTER_APPEND.
* A follower is **caught up** while its LEO equals the leader's, or while it reached, within
  `replica_lag_time_max_ms`, the LEO the leader had when it last fetched (so a follower
  chasing a stream of small appends still counts). One that is not leaves the ISR: the leader
  proposes the shrink, and the controller commits it.
* A follower rejoins once its LEO reaches the HW *and* the leader's epoch start (a replica
  missing batches between the two could otherwise be elected and lose what the HW will cover).
  A leader that takes appends within every round trip of its follower's fetches would keep its
  HW ahead of that follower's LEO for good: so the HW also waits for followers outside the ISR
  that are caught up (Kafka's maybeIncrementLeaderHW), they reach it, and they join.
* One ISR change is in flight at a time; a committed record newer than the one it was
  computed from (a higher partition epoch) replaces whatever was pending. A change is given up
  only when the controller says it applied nothing (INELIGIBLE_REPLICA,
  OPERATION_NOT_ATTEMPTED); any other answer, or none, may hide a commit, so the change stays
  pending (its new member counted) and is sent again or waits for the newer record
  (`isr_error_action`, Kafka's handleAlterPartitionError).
* A leader that cannot write (a full disk) **resigns**: it proposes the ISR without itself,
  and the controller hands the partition to one of the others (docs/replication.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from zlog.errors import ErrorCode, ZlogError


@dataclass(frozen=True, slots=True)
class ReplicaSet:
    """Who holds the partition, who is in sync, and how many in-sync replicas acks=all needs."""

    local_replica_id: int
    replicas: frozenset[int]
    isr: frozenset[int]
    min_insync_replicas: int = 1  # the topic's config
    partition_epoch: int = 0  # the record these came from
    # Replicas whose brokers may not join the ISR now (fenced, shutting down: KIP-841's
    # isReplicaIsrEligible): outside the ISR, the HW does not wait for them.
    ineligible: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
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

    @property
    def high_watermark_may_advance(self) -> bool:
        """Whether the committed ISR holds the effective min.insync.replicas (capped at the
        replica count, Kafka's effectiveMinIsr), without which the HW stays (KIP-966)."""
        return len(self.isr) >= min(self.min_insync_replicas, len(self.replicas))


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower, from its fetches."""

    log_end_offset: int = -1  # its last fetch offset; -1 before its first fetch this term
    last_caught_up_ms: int = 0  # when it last held everything the leader had (see module doc)
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = 0  # the leader's LEO at that fetch
    broker_epoch: int = -1  # the registration it fetched with
    caught_up_in_term: bool = False  # a fetch this term set `last_caught_up_ms`
    log_start_offset: int = -1  # its own log start, as its last fetch said (-1: not known)


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """An ISR change sent to the controller and not yet answered."""

    new_isr: frozenset[int]
    partition_epoch: int  # the record it was computed from
    sent_ms: int


@dataclass(frozen=True, slots=True)
class IsrChange:
    """One AlterPartition as a leader sends it: what it asks for, computed from which record
    (leader and partition epochs), with the broker epoch each member fetched with (KIP-903).
    Kept until a newer record replaces it, across a restart of the leader's process: the same
    change is what is sent again."""

    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]  # sorted
    member_epochs: tuple[tuple[int, int], ...] = ()  # (broker id, broker epoch), sorted


class IsrErrorAction(Enum):
    """What a leader does with its pending ISR change after the controller refused it."""

    REVERT = "revert"  # nothing was applied: back to the committed ISR
    WAIT = "wait"  # a newer record exists: keep the change pending until it arrives
    RETRY = "retry"  # the outcome is unknown: send the same change again


_NOTHING_APPLIED: Final = frozenset({ErrorCode.INELIGIBLE_REPLICA,
                                     ErrorCode.OPERATION_NOT_ATTEMPTED})
_NEWER_RECORD: Final = frozenset({
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INVALID_REQUEST,
    ErrorCode.NEW_LEADER_ELECTED,
})


def isr_error_action(code: ErrorCode) -> IsrErrorAction:
    """Kafka's rule (Partition.handleAlterPartitionError): only INELIGIBLE_REPLICA and
    OPERATION_NOT_ATTEMPTED say that no controller, past or future, applied the change; a
    refusal computed against a newer record waits for that record; anything else (no
    controller, a timeout, a stale broker epoch about to be renewed) may have been committed,
    and the same change is sent again."""
    if code in _NOTHING_APPLIED:
        return IsrErrorAction.REVERT
    if code in _NEWER_RECORD:
        return IsrErrorAction.WAIT
    return IsrErrorAction.RETRY


@dataclass(slots=True)
class HighWatermark:
    """The followers' positions and the HW they give, for one leader replica (or the HW a
    follower learned from its leader)."""

    replicas: ReplicaSet
    value: int = 0
    epoch_start_offset: int = 0  # the leader's LEO when it took its epoch
    pending: IsrProposal | None = None
    followers: dict[int, FollowerState] = field(default_factory=dict)
    # Followers outside the ISR that were caught up at the last ISR check: the HW waits for
    # them too (Kafka's maybeIncrementLeaderHW), so that their LEO reaches it and they join.
    awaited: frozenset[int] = frozenset()

    @property
    def shown_to_clients(self) -> bool:
        """Whether a leader's HW may be shown to clients (KIP-207's exposure gate): not while
        it is below the epoch start, where it may lie below a HW an earlier leader showed."""
        return self.value >= self.epoch_start_offset

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The committed ISR plus a pending expansion's new member (a pending shrink counts
        only once committed)."""
        if self.pending is None:
            return self.replicas.isr
        return self.replicas.isr | self.pending.new_isr

    def start_term(self, now_ms: int, epoch_start_offset: int) -> None:
        """This replica became leader (or took a new epoch, or a new process took over its
        epoch): followers' positions are unknown until they fetch; ISR members count as
        caught up from now (Kafka's makeLeader)."""
        self.epoch_start_offset = epoch_start_offset
        self.pending = None
        self.awaited = frozenset()
        self.followers = {
            replica: FollowerState(last_caught_up_ms=now_ms if replica in self.replicas.isr
                                   else 0)
            for replica in self.replicas.replicas if replica != self.replicas.local_replica_id
        }

    def set_replicas(self, replicas: ReplicaSet) -> None:
        """A committed record: one newer than the record the pending change was computed from
        replaces the change (the same record again, as an assign repeats it when a config
        changes, replaces nothing: the controller may still commit the change)."""
        assert replicas.local_replica_id == self.replicas.local_replica_id
        self.replicas = replicas
        if self.pending is not None and replicas.partition_epoch > self.pending.partition_epoch:
            self.pending = None
        for replica in replicas.replicas - {replicas.local_replica_id}:
            self.followers.setdefault(replica, FollowerState())
        for gone in set(self.followers) - set(replicas.replicas):
            del self.followers[gone]
        self.awaited &= replicas.replicas

    def check_follower(self, replica_id: int, topic: str, partition: int) -> None:
        """NOT_LEADER_OR_FOLLOWER for a replica id that is not one of our followers."""
        known = replica_id in self.replicas.replicas
        if not known or replica_id == self.replicas.local_replica_id:
            raise ZlogError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"replica {replica_id} is not a follower of {topic}-{partition}",
            )

    def note_follower(
        self, replica_id: int, fetch_offset: int, log_start_offset: int, log_end_offset: int,
        *, now_ms: int = 0, broker_epoch: int = -1, follower_log_start_offset: int = -1,
    ) -> None:
        """A follower fetching at `fetch_offset` holds everything below it (Kafka's rule,
        Replica.updateFetchStateOrThrow), and its log starts at `follower_log_start_offset`;
        an offset outside the leader's log says nothing."""
        if not log_start_offset <= fetch_offset <= log_end_offset:
            return
        state = self.followers.setdefault(replica_id, FollowerState())
        if follower_log_start_offset >= 0:
            state.log_start_offset = follower_log_start_offset
        # Never back: the first fetch of a term finds last_fetch_ms still 0, and an ISR member
        # counts as caught up from the term's start (Kafka takes the max here too).
        if fetch_offset >= log_end_offset:
            state.last_caught_up_ms = max(state.last_caught_up_ms, now_ms)
            state.caught_up_in_term = True
        elif fetch_offset >= state.last_fetch_leader_leo:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
            state.caught_up_in_term |= state.log_end_offset >= 0  # it fetched before
        state.last_fetch_leader_leo = max(log_end_offset, state.last_fetch_leader_leo)
        state.last_fetch_ms = now_ms
        state.log_end_offset = fetch_offset
        if broker_epoch >= 0:
            state.broker_epoch = broker_epoch

    def candidate(self, log_start_offset: int, log_end_offset: int) -> int:
        """The HW the maximal ISR's log ends allow now; never below the current one, and the
        current one while the committed ISR is below the effective min.insync.replicas."""
        if not self.replicas.high_watermark_may_advance:
            return max(self.value, log_start_offset)
        local = self.replicas.local_replica_id
        ends = [log_end_offset]
        for replica in self.maximal_isr | (self.awaited - self.replicas.ineligible):
            if replica == local:
                continue
            state = self.followers.get(replica)
            ends.append(self.value if state is None or state.log_end_offset < 0
                        else state.log_end_offset)
        return max(min(ends), self.value, log_start_offset)

    def advance(self, log_start_offset: int, log_end_offset: int) -> tuple[int, int]:
        """Move the HW to its candidate; (before, after)."""
        before = self.value
        self.value = self.candidate(log_start_offset, log_end_offset)
        assert self.value >= before, (before, self.value)
        return before, self.value

    def follow(self, leader_high_watermark: int, log_end_offset: int) -> None:
        """A follower's HW: what the leader says, never above its own log end, and never back
        while this process runs (docs/replication.md §2.3)."""
        self.value = max(self.value, min(leader_high_watermark, log_end_offset))

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

    # -- ISR changes the leader proposes -------------------------------------------------------

    def out_of_sync(self, now_ms: int, log_end_offset: int, lag_time_max_ms: int
                    ) -> frozenset[int]:
        """Committed ISR members (not this replica) that are not caught up."""
        lagging: set[int] = set()
        for replica in self.replicas.isr - {self.replicas.local_replica_id}:
            state = self.followers.get(replica)
            if state is None:
                continue
            if state.log_end_offset == log_end_offset:
                continue
            if now_ms - state.last_caught_up_ms > lag_time_max_ms:
                lagging.add(replica)
        return frozenset(lagging)

    def caught_up_outside_isr(self, now_ms: int, log_end_offset: int, lag_time_max_ms: int
                              ) -> frozenset[int]:
        """Followers outside the committed ISR that are caught up (§3.1): at the leader's log
        end, or at the log end it had at their previous fetch within `lag_time_max_ms`."""
        found: set[int] = set()
        for replica, state in self.followers.items():
            if (replica in self.replicas.isr or replica in self.replicas.ineligible
                    or state.log_end_offset < 0):
                continue
            if state.log_end_offset >= log_end_offset or (
                    state.caught_up_in_term
                    and now_ms - state.last_caught_up_ms <= lag_time_max_ms):
                found.add(replica)
        return frozenset(found)

    def ready_to_join(self, log_start_offset: int = 0) -> frozenset[int]:
        """Followers outside the ISR that hold everything up to the HW and the epoch start,
        and hold nothing below the leader's log start (`log_start_offset`): what DeleteRecords
        deleted is waited for on the ISR's members only (`low_watermark`), so a replica that
        may lead must have deleted it too before it joins."""
        joining: set[int] = set()
        for replica, state in self.followers.items():
            if (replica in self.replicas.isr or replica in self.replicas.ineligible
                    or state.log_end_offset < 0):
                continue
            if (state.log_end_offset >= max(self.value, self.epoch_start_offset)
                    and state.log_start_offset >= log_start_offset):
                joining.add(replica)
        return frozenset(joining)

    def low_watermark(self, log_start_offset: int) -> int:
        """The lowest log start of the leader (`log_start_offset`) and the followers of its
        maximal ISR (Kafka's `lowWatermarkIfLeader`, over the replicas that may lead next:
        zlog elects only in-sync ones); -1 while one has not fetched in this term."""
        low = log_start_offset
        for replica in self.maximal_isr - {self.replicas.local_replica_id}:
            state = self.followers.get(replica)
            low = min(low, -1 if state is None else state.log_start_offset)
        return low

    def next_proposal(
        self, now_ms: int, log_end_offset: int, lag_time_max_ms: int, log_start_offset: int = 0,
    ) -> frozenset[int] | None:
        """The periodic ISR check: the followers outside the ISR that the HW waits for until
        the next one (`awaited`), and the ISR to propose now, or None: shrinks first (they
        unblock acks=all), one change at a time, never without the leader itself."""
        self.awaited = self.caught_up_outside_isr(now_ms, log_end_offset, lag_time_max_ms)
        if self.pending is not None:
            return None
        lagging = self.out_of_sync(now_ms, log_end_offset, lag_time_max_ms)
        if lagging:
            return self.replicas.isr - lagging
        joining = self.ready_to_join(log_start_offset)
        if joining:
            return self.replicas.isr | {min(joining)}
        return None

    def resignation(self) -> frozenset[int] | None:
        """The ISR without this leader, for a leader that cannot write to hand the partition
        to an in-sync follower; None while a change is pending or when no follower is in sync
        (nobody could take over without losing what this replica alone holds)."""
        if self.pending is not None:
            return None
        return self.replicas.isr - {self.replicas.local_replica_id} or None

    def propose(self, new_isr: frozenset[int], now_ms: int) -> IsrProposal:
        assert self.pending is None, self.pending
        assert new_isr <= self.replicas.replicas, new_isr
        assert (self.replicas.local_replica_id in new_isr
                or new_isr == self.replicas.isr - {self.replicas.local_replica_id}), new_isr
        self.pending = IsrProposal(new_isr, self.replicas.partition_epoch, now_ms)
        return self.pending

    def proposal_refused(self, partition_epoch: int) -> None:
        """The controller refused the change computed from `partition_epoch`: nothing of it
        applies (a later record, if any, comes through `set_replicas`)."""
        if self.pending is not None and self.pending.partition_epoch == partition_epoch:
            self.pending = None
