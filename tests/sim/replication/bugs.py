"""Planted bugs (docs/simulation.md, Planted bugs): each is a `Wiring` that changes one rule.

Nothing here touches production code: a bug is a substitute for one decision point of the
simulator's wiring (a function, or a subclass of a production class used only by the
simulator), so the rest of the run is zlog's own code. `CAUGHT_BY` names the checks expected
to fire for each; the tests assert one of them fires within a bounded number of seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from tests.sim.replication.storage import SimDisk, SimLog
from tests.sim.replication.wiring import REAL, Wiring, fenced_early
from zlog.broker.control.controller.decisions import (
    IsrRequest,
    RoundInput,
    RoundOutcome,
    decide,
    liveness,
)
from zlog.broker.control.controller.sessions import Session
from zlog.broker.control.metadata.commands import ClusterChange, PartitionChange
from zlog.broker.control.metadata.state import ClusterState
from zlog.broker.data.epoch_cache import UNDEFINED, LeaderEpochCache
from zlog.broker.data.isr import HighWatermark, IsrErrorAction, ReplicaSet
from zlog.broker.data.partition import Partition, ProduceOutcome
from zlog.broker.data.producer_state import ProducerStateTable
from zlog.errors import ErrorCode
from zlog.record.header import Buffer
from zlog.transport.messages.data import NO_EPOCH
from zlog.types import NO_LEADER


# B1: a follower truncates to its high watermark when it restarts or changes epoch (the rule
# KIP-101 replaced).
def _truncate_to_last_hw(partition: Partition, last_high_watermark: int) -> None:
    point = min(last_high_watermark, partition.log.log_end_offset)
    partition.truncate_to(point, ProducerStateTable())


def _truncate_to_hw(partition: Partition) -> None:
    _truncate_to_last_hw(partition, partition.high_watermark)


B1 = replace(REAL, name="B1", follower_opened=_truncate_to_last_hw,
             follower_new_epoch=_truncate_to_hw)


# B2: no truncation by epoch: a follower names no epoch, so its leader never finds divergence
# and it keeps whatever tail it had ("the HW covers it").
def _no_epoch(partition: Partition) -> int:
    del partition
    return NO_EPOCH


B2 = replace(REAL, name="B2", last_fetched_epoch=_no_epoch)


# B3: the leader answers with the start of the next epoch only, never with a lower epoch
# (KIP-101 without KIP-279).
class _Kip101Cache(LeaderEpochCache):
    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        entries = self.entries
        if epoch == UNDEFINED or not entries:
            return UNDEFINED, UNDEFINED
        if epoch == entries[-1].epoch:
            return epoch, log_end_offset
        higher = next((e for e in entries if e.epoch > epoch), None)
        if higher is None:
            return UNDEFINED, UNDEFINED
        return epoch, higher.start_offset


B3 = replace(REAL, name="B3", epoch_cache_class=_Kip101Cache)


# B4: a new leader does not record (its epoch, its log end) at election (KAFKA-7415).
def _forget_epoch_start(partition: Partition) -> None:
    partition.epochs.truncate_from_end(partition.log.log_end_offset)


B4 = replace(REAL, name="B4", became_leader=_forget_epoch_start)


# B5: the controller elects outside the ISR: when a partition's leader moves, the first usable
# replica in replica order takes it, in the ISR or not.
def _elect_anyone(state: ClusterState, round_input: RoundInput) -> RoundOutcome:
    outcome = decide(state, round_input)
    usable = liveness(state, outcome.change.brokers).usable
    changes = []
    for change in outcome.change.partitions:
        info = state.partition(change.topic, change.partition)
        chosen = change
        if info is not None and change.leader != info.leader:
            anyone = next((r for r in info.replicas if r in usable), NO_LEADER)
            if anyone not in (NO_LEADER, change.leader):
                isr = (anyone, *(r for r in change.isr if r != anyone))
                chosen = PartitionChange(change.topic, change.partition,
                                         change.partition_epoch, anyone,
                                         info.leader_epoch + 1, isr)
        changes.append(chosen)
    return RoundOutcome(ClusterChange(outcome.change.brokers, tuple(changes)), outcome.answers)


B5 = replace(REAL, name="B5", decide=_elect_anyone)


# B6: the leader applies its own ISR shrink before the controller commits it.
def _shrink_now(partition: Partition, new_isr: frozenset[int]) -> None:
    tracker = partition.isr_tracker
    if new_isr < tracker.replicas.isr:
        tracker.replicas = replace(tracker.replicas, isr=new_isr)


B6 = replace(REAL, name="B6", after_propose=_shrink_now)


# B7: acks=all is answered at the leader's own append (acks=1 semantics).
def _ack_at_append(partition: Partition, required_offset: int) -> ErrorCode | None:
    if partition.is_leader and partition.log.log_end_offset >= required_offset:
        return ErrorCode.NONE
    return partition.acks_status(required_offset)


B7 = replace(REAL, name="B7", acks_status=_ack_at_append)

# B8: an idempotent duplicate is acknowledged at once, without waiting for the HW.
B8 = replace(REAL, name="B8", ack_duplicates_at_once=True)


# B9: no exposure gate: a new leader shows clients its HW at once, below a HW its predecessor
# showed (KIP-207).
class _ShowsItsHighWatermarkAtOnce(Partition):
    @property
    def client_high_watermark(self) -> int:
        return self.high_watermark


B9 = replace(REAL, name="B9", partition_class=_ShowsItsHighWatermarkAtOnce)


# B10: the HW moves whatever the size of the committed ISR (no KIP-966 strict min ISR).
@dataclass(frozen=True, slots=True)
class _AnyIsrSize(ReplicaSet):
    @property
    def high_watermark_may_advance(self) -> bool:
        return True


B10 = replace(REAL, name="B10", replica_set_class=_AnyIsrSize)


# B20: a pending ISR change is forgotten when its outcome is unknown: a restarted leader
# worker does not take back the change it had sent, and an answer that may hide a commit
# (NOT_CONTROLLER, a timeout) drops it as a refusal would.
def _every_refusal_reverts(code: ErrorCode) -> IsrErrorAction:
    del code
    return IsrErrorAction.REVERT


B20 = replace(REAL, name="B20", resume_isr_changes=False, isr_error_action=_every_refusal_reverts)


# B23: the controller fences a broker whose connection to it dropped, silent for a heartbeat
# interval since, as it does one whose port refuses connections: the broker may still lead
# on its lease, beside the successor elected at once.
def _fence_on_dropped_connection(down_since: Mapping[int, int], refused: frozenset[int],
                                 last_heard: Mapping[int, int], now: int,
                                 heartbeat_ticks: int) -> frozenset[int]:
    dropped = frozenset(b for b, since in down_since.items()
                        if now - since >= heartbeat_ticks and last_heard.get(b, -1) <= since)
    return fenced_early(down_since, refused, last_heard, now, heartbeat_ticks) | dropped


B23 = replace(REAL, name="B23", fenced_early=_fence_on_dropped_connection)


# B21: retention ignores the high watermark: every segment due goes but the active one, so a
# leader's log start, and with it its HW, moves past batches its followers do not hold.
def _retention_past_the_hw(log: SimLog) -> int:
    return log.log_end_offset


B21 = replace(REAL, name="B21", retention_upto=_retention_past_the_hw)


# B22: the HW waits for the ISR only: a caught-up follower outside it is not counted, so a
# leader that takes a batch within every round trip of its fetches keeps its HW ahead of it.
def _hw_waits_for_isr_only(tracker: HighWatermark, now: int, log_end: int, lag_max: int,
                           log_start: int) -> frozenset[int] | None:
    proposal = tracker.next_proposal(now, log_end, lag_max, log_start)
    tracker.awaited = frozenset()
    return proposal


B22 = replace(REAL, name="B22", next_proposal=_hw_waits_for_isr_only)


# B11: the leader does not send the broker epochs its followers fetched with (KIP-903).
def _no_member_epochs(tracker: HighWatermark, new_isr: frozenset[int]) -> dict[int, int]:
    del tracker, new_isr
    return {}


B11 = replace(REAL, name="B11", member_epochs=_no_member_epochs)


# B12: a follower joins once it reaches the HW, even below the leader's epoch start.
def _join_at_hw(tracker: HighWatermark, now: int, log_end: int, lag_max: int,
                log_start: int) -> frozenset[int] | None:
    if tracker.pending is not None:
        return None
    lagging = tracker.out_of_sync(now, log_end, lag_max)
    if lagging:
        return tracker.replicas.isr - lagging
    joining = {replica for replica, state in tracker.followers.items()
               if replica not in tracker.replicas.isr and state.log_end_offset >= 0
               and state.log_end_offset >= tracker.value
               and state.log_start_offset >= log_start}
    return tracker.replicas.isr | {min(joining)} if joining else None


B12 = replace(REAL, name="B12", next_proposal=_join_at_hw)

# B13: a follower applies an answer to a fetch sent in an older leader epoch.
B13 = replace(REAL, name="B13", apply_stale_answers=True)

# B14: a leader keeps taking produce once it lost the leadership: past its lease, and after it
# applied its demotion (its produce path still sees the epoch it led, and stamps it).
class _LeadsOnAfterDemotion(Partition):
    led: int | None = None  # the epoch it led before its demotion

    def become(self, *, leader_epoch: int, is_leader: bool,
               replicas: ReplicaSet | None = None, now_ms: int = 0) -> int:
        if self.is_leader and not is_leader:
            self.led = self.leader_epoch
        elif is_leader:
            self.led = None
        return super().become(leader_epoch=leader_epoch, is_leader=is_leader,
                              replicas=replicas, now_ms=now_ms)

    def produce(self, batches: Sequence[Buffer], acks: int, now_ms: int | None = None, *,
                built_here: bool = False) -> ProduceOutcome:
        if self.is_leader or self.led is None:
            return super().produce(batches, acks, now_ms, built_here=built_here)
        epoch = self.leader_epoch
        self.is_leader, self.leader_epoch = True, self.led
        try:
            return super().produce(batches, acks, now_ms, built_here=built_here)
        finally:
            self.is_leader, self.leader_epoch = False, epoch


def _lease_always_holds(now: int, lease_until: int) -> bool:
    del now, lease_until
    return True


B14 = replace(REAL, name="B14", partition_class=_LeadsOnAfterDemotion,
              lease_holds=_lease_always_holds)

# B15: the producer state is not rebuilt after a truncation.
B15 = replace(REAL, name="B15", rebuild_after_truncation=False)


# B16: the epoch cache is not cut when the log is.
class _KeepCacheOnTruncation(Partition):
    def truncate_to(self, offset: int, producers: ProducerStateTable) -> None:
        kept = self.epochs.entries
        super().truncate_to(offset, producers)
        self.epochs = LeaderEpochCache(kept)


B16 = replace(REAL, name="B16", partition_class=_KeepCacheOnTruncation)


# B17: the controller ignores the partition epoch: a stale AlterPartition wins.
def _current_epochs(state: ClusterState, requests: tuple[IsrRequest, ...]
                    ) -> tuple[IsrRequest, ...]:
    fixed = []
    for request in requests:
        info = state.partition(request.topic, request.partition)
        fixed.append(request if info is None else replace(
            request, partition_epoch=info.partition_epoch, leader_epoch=info.leader_epoch))
    return tuple(fixed)


B17 = replace(REAL, name="B17", isr_requests=_current_epochs)

# B19: a follower's next fetch reports the batches of the last answer as held while they are
# still in its memory; they reach its log a tick later (or never, if it crashes meanwhile).
B19 = replace(REAL, name="B19", store_before_fetching=False)



# B18: an unclean re-registration is not detected: brokers register no data directory, so one
# back on a wiped disk keeps its place in the ISRs where no other member is usable, and is
# elected there with an empty log (KIP-858's directory check missing).
def _no_directory(disk: SimDisk) -> str:
    del disk
    return ""


B18 = replace(REAL, name="B18", directory_id=_no_directory)


# B27: a controller that takes over counts the fresh session it gives every registered broker
# as a heartbeat: a fenced broker whose process still answers (one back on a wiped disk, not
# registered again yet) is unfenced under its registration from before, and elected where it
# was the last member of the ISR, its log empty.
def _heard_at_takeover(state: ClusterState, now: int) -> dict[int, Session]:
    return {b: Session(r.broker_epoch, now, True) for b, r in state.brokers.items()}


B27 = replace(REAL, name="B27", taken_over=_heard_at_takeover)


# B28: a fence keeps what was heard before it: a broker fenced because its process died is
# unfenced by the heartbeats that process sent before dying, or, restarted within its session,
# under its registration from before (on a wiped disk: elected with an empty log).
def _fence_forgets_nothing(sessions: Mapping[int, Session], fenced: frozenset[int],
                           gone: frozenset[int]) -> None:
    del sessions, fenced, gone


B28 = replace(REAL, name="B28", fencing=_fence_forgets_nothing)


# B29: a DeleteRecords is answered once the leader deleted the records, without waiting for
# its in-sync followers' log starts: a follower elected before it fetched again serves them.
def _deleted_on_the_leader(partition: Partition, offset: int) -> bool:
    del partition, offset
    return True


B29 = replace(REAL, name="B29", records_deleted=_deleted_on_the_leader)


# B30: a follower joins the ISR whatever its log start: one that has not taken its leader's
# since a DeleteRecords (answered without it, outside the ISR) may lead next with the records.
def _join_below_the_log_start(tracker: HighWatermark, now: int, log_end: int, lag_max: int,
                              log_start: int) -> frozenset[int] | None:
    del log_start
    return tracker.next_proposal(now, log_end, lag_max, 0)


B30 = replace(REAL, name="B30", next_proposal=_join_below_the_log_start)


BUGS: dict[str, Wiring] = {w.name: w for w in (B1, B2, B3, B4, B5, B6, B7, B8, B9, B10, B11,
                                                B12, B13, B14, B15, B16, B17, B18, B19, B20,
                                                B21, B22, B23, B27, B28, B29, B30)}

CAUGHT_BY: dict[str, frozenset[str]] = {
    "B1": frozenset({"S4", "S5", "S6", "S9", "S13"}),
    "B2": frozenset({"S3", "S9", "S13"}),
    "B3": frozenset({"S3", "S13"}),
    "B4": frozenset({"S3", "S10"}),
    "B5": frozenset({"S5", "S4"}),
    "B6": frozenset({"S6", "S4", "S5"}),
    "B7": frozenset({"S6", "S4"}),
    "B8": frozenset({"S6"}),
    "B9": frozenset({"S8"}),
    # The HW moving with the ISR below the minimum (S15); what it showed then may be on one
    # replica only, lost with it (S5).
    "B10": frozenset({"S15", "S5"}),
    "B11": frozenset({"S12", "S4"}),
    "B12": frozenset({"S5", "S12"}),
    # A stale answer can carry a high watermark over batches the new leader's epoch then cuts
    # (S9: a truncation below the HW), besides mixing two leaders' batches (S2, S3, S13).
    "B13": frozenset({"S2", "S3", "S9", "S13"}),
    # A second writer (S2): a demoted leader appends in an epoch older than the one it applied,
    # or a fenced one (paused past its session, say) takes the writes queued meanwhile.
    "B14": frozenset({"S2"}),
    # Stale producer state on a new leader: a retried idempotent batch is taken for a duplicate
    # (S14) and answered ok at an offset where the log does not hold it (S16), or refused as
    # out of sequence until no acks=all write gets through once healed (L1).
    "B15": frozenset({"S14", "S16", "L1"}),
    "B16": frozenset({"S10", "S3"}),
    "B17": frozenset({"S12", "S4", "S5", "S6", "S11"}),
    # The wiped broker, elected, lacks what the others committed (S5); the others then cut
    # committed batches to its empty log (S9), or it acknowledges past them (S4).
    "B18": frozenset({"S5", "S4", "S9"}),
    # The leader counts batches the follower does not hold yet: an ack (S6), or a member that
    # lost them in a crash (S4).
    "B19": frozenset({"S6", "S4"}),
    # The controller commits the forgotten expansion: the member joins the ISR without a batch
    # acknowledged meanwhile (S4), or is in it when one is acknowledged (S6).
    "B20": frozenset({"S6", "S4"}),
    # A leader's HW follows its log start past batches no follower holds: acknowledged (S6),
    # or lost with the leader when a follower takes over (S5, S4), and moved with the ISR below
    # min.insync.replicas (S15); a follower's log start passes its own HW (S8).
    "B21": frozenset({"S6", "S4", "S5", "S8", "S15"}),
    # A follower outside the ISR never reaches the HW of a leader that keeps taking batches.
    "B22": frozenset({"L2"}),
    # The fenced leader, cut off from the controller but not from its clients, takes writes on
    # its lease beside its successor (S2).
    "B23": frozenset({"S2"}),
    # The wiped broker, elected, lacks what the others committed (S5, as B18).
    "B27": frozenset({"S5", "S4", "S9"}),
    "B28": frozenset({"S5", "S4", "S9"}),
    # A leader elected after the answer still holds the records deleted (S17).
    "B29": frozenset({"S17"}),
    "B30": frozenset({"S17"}),
}
