"""The safety invariants of docs/simulation.md that apply to what zlog implements,
checked as events happen and after every event; a violation raises `InvariantViolation`
naming the check.

Event checks (at the instant the fact is observable):
- S1 at every commit: one leader per (partition, leader epoch); leader epochs only grow.
- S2 at every leader append: the appender is the committed leader of the batch's epoch, has
  applied no newer epoch, and is not fenced by the controller (its lease ran out first): once
  fenced, another broker may lead its partitions, and two would take writes at once.
- S4 at every ISR join and every ack: the member holds every acknowledged batch.
- S5 when a replica starts leading an epoch: its log holds every batch committed in an
  earlier epoch.
- S6 when acks=all success is sent: every member of the leader's maximal ISR and of the
  committed ISR holds the batch, at its offset, in its real log.
- S7 at every consumer read: the batches lie below the serving replica's HW.
- S8 at every consumer read and ListOffsets(LATEST): the HW shown to clients never goes back.
- S9 at every truncation: no batch known committed (acked, or read by a consumer) is cut.
- S11 at every commit: the record's own rules (ISR within replicas and not empty, leader in the
  ISR, partition epoch +1, leader epoch +1 exactly when the leader changes, no fenced leader,
  a new leader neither fenced nor shutting down).
- S12 at every commit that grows an ISR: the member was usable and at the broker epoch the
  leader saw, and, when the leader proposed it, held the HW and the leader's epoch start.
- S13 on every fetch answer a follower applies: its log equals the leader's up to its log end;
  every truncation point is at or past where its log and the leader's stop agreeing.
- S14 at every ack: a batch acknowledged twice has one offset.
- S15 at every produce: acks=all appends only while the committed ISR holds min.insync
  replicas; NOT_ENOUGH_REPLICAS appends nothing. After every event: a leader's HW moves only
  while its committed ISR holds the effective min.insync.replicas (capped at the replicas).
- S16 at every acks=1 ok: the leader's log holds the batch at the offset it answers.
- S17 when a replica starts leading an epoch after a DeleteRecords was answered ok, and at
  every consumer fetch answer of the current leader: its log start is at or past the offset
  the records were deleted below (a deletion a client heard of is never undone).
As a batch enters a log: S3 (logs that hold a (base offset, epoch) pair at the same time hold
the same batch there, after the same predecessor, so they share the prefix before it) and S14
(no (producer id, epoch, sequence) twice in a log). After every event, for what changed: S8
(log start <= HW <= log end; a process's HW never goes back; no HW above the highest any
leader computed) and S10 (the epoch cache equals the epoch runs of the log, plus at most one
empty trailing epoch of the replica's own leadership, which no cut of its log has followed).
S4 is also swept over every ISR member periodically and at the end. Once the cluster healed,
S5 holds for the final logs: every committed batch, consumed ones included, is in them.

Retention deletes batches from the front of a log (and a follower below its leader's log start
starts over there): S4, S5 and the final S5 do not ask a log for a batch below its log start,
which S8 keeps at or below its HW, so what went was committed. S6 asks every member for the
batch it acknowledges, except a member whose log start passed a batch already known committed
(an idempotent retry of a batch retention deleted since is acknowledged at its offset); a batch
acknowledged for the first time must be in the leader's log and in every member's.

Not checked, because zlog does not implement the rule (docs/replication.md §7): eligible
leader replicas, unclean election (off in every simulated topic), reassignment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from tests.sim.replication.broker import SimBroker, Status
from tests.sim.replication.controller import TOPIC
from tests.sim.replication.ghost import Ghost
from tests.sim.replication.messages import ReplicaFetchAnswer
from tests.sim.replication.storage import BatchInfo, SimDisk, SimLog
from zlog.broker.control.controller.decisions import liveness
from zlog.broker.control.metadata.commands import Command
from zlog.broker.control.metadata.state import ClusterState, PartitionInfo
from zlog.broker.data.partition import Partition, ProduceOutcome
from zlog.errors import ErrorCode, ZlogError
from zlog.types import ACKS_ALL, NO_LEADER

_UNKNOWN = (-1, -1)  # a predecessor no log holding the batch knows (see batch_added)


class InvariantViolation(AssertionError):
    def __init__(self, check: str, message: str) -> None:
        super().__init__(f"{check}: {message}")
        self.check = check


class World(Protocol):
    brokers: dict[int, SimBroker]
    disks: dict[int, SimDisk]

    def committed_state(self) -> ClusterState: ...


@dataclass(slots=True)
class _LogMark:
    changes: int = -1  # the log's change count when its epoch cache was last checked
    producers: dict[tuple[int, int, int], int] = field(default_factory=dict)
    led: int = -1  # the epoch this replica last began leading, until its log is next cut


class Checker:
    def __init__(self, world: World, ghost: Ghost, min_insync: int,
                 log: Callable[[str], None]) -> None:
        self.world = world
        self.ghost = ghost
        self.min_insync = min_insync
        self.log = log
        # (p, base offset, epoch) -> (bytes, predecessor, how many logs hold it)
        self.batches: dict[tuple[int, int, int], tuple[bytes, tuple[int, int] | None, int]] = {}
        self.marks: dict[tuple[int, int], _LogMark] = {}
        self.applied_epoch: dict[tuple[int, int], int] = {}  # (broker, p) -> newest applied
        # (worker process, p) -> (HW, log start, log end) when S8 last passed
        self.hw_checked: dict[tuple[str, int], tuple[int, int, int]] = {}
        self.counts: dict[str, int] = {}

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def _isr(self, p: int) -> tuple[int, ...]:
        info = self.world.committed_state().partition(TOPIC, p)
        return () if info is None else info.isr

    def _log_of(self, broker: int, p: int) -> SimLog | None:
        disk = self.world.disks.get(broker)
        return None if disk is None else disk.logs.get(p)

    # -- the controller's commits (S1, S11, S12, S4 at join) -------------------------------

    def on_commit(self, before: ClusterState, after: ClusterState, command: Command,
                  error: ZlogError | None) -> None:
        del command
        if error is not None:
            self.count("commands refused at apply")
            return
        topic_before, topic_after = before.topics.get(TOPIC), after.topics.get(TOPIC)
        if topic_after is None:
            return
        for new in topic_after.partitions:
            old = None if topic_before is None else topic_before.partitions[new.partition]
            self._check_record(old, new, after)

    def _check_record(self, old: PartitionInfo | None, new: PartitionInfo,
                      state: ClusterState) -> None:
        p = new.partition
        ghost = self.ghost
        if not new.isr or not set(new.isr) <= set(new.replicas):
            raise InvariantViolation("S11", f"p{p} ISR {new.isr} not a non-empty subset of "
                                            f"{new.replicas}")
        if new.leader != NO_LEADER and new.leader not in new.isr:
            raise InvariantViolation("S11", f"p{p} leader {new.leader} not in ISR {new.isr}")
        if old is not None and old == new:
            return
        if old is not None:
            if new.partition_epoch != old.partition_epoch + 1:
                raise InvariantViolation("S11", f"p{p} partition epoch {old.partition_epoch} "
                                                f"-> {new.partition_epoch}")
            moved = new.leader != old.leader
            if new.leader_epoch != old.leader_epoch + (1 if moved else 0):
                raise InvariantViolation("S11", f"p{p} leader {old.leader}->{new.leader} with "
                                                f"epoch {old.leader_epoch}->{new.leader_epoch}")
            if new.leader != NO_LEADER:
                live = liveness(state)
                if new.leader not in (live.usable if moved else live.alive):
                    raise InvariantViolation("S11", f"p{p} leader {new.leader} in epoch "
                                                    f"{new.leader_epoch} is fenced"
                                                    f"{' or leaving' if moved else ''}")
        if new.leader != NO_LEADER:
            owner = ghost.leader_of.setdefault((p, new.leader_epoch), new.leader)
            if owner != new.leader:
                raise InvariantViolation("S1", f"p{p} epoch {new.leader_epoch} has leaders "
                                               f"{owner} and {new.leader}")
        joined = set(new.isr) - set(() if old is None else old.isr)
        if old is not None and joined:
            self._check_joined(p, old, new, joined, state)
        for member in joined:
            registration = state.brokers.get(member)
            if registration is not None and registration.broker_epoch > ghost.lost_at_epoch.get(
                    member, -1):
                ghost.lost_since_join.discard((p, member))
                ghost.wiped_since_join.discard((p, member))
        if not ghost.spec_loss_bound:
            self._maybe_lossy(p, new.isr)
        self.log(f"commit p{p}: leader {new.leader} e{new.leader_epoch} isr {list(new.isr)} "
                 f"pe{new.partition_epoch}")

    def _check_joined(self, p: int, old: PartitionInfo, new: PartitionInfo, joined: set[int],
                      state: ClusterState) -> None:
        usable = liveness(state).usable
        seen = self.ghost.proposals.get((p, old.leader_epoch, old.partition_epoch), {})
        for member in sorted(joined):
            registration = state.brokers.get(member)
            if member not in usable or registration is None:
                raise InvariantViolation("S12", f"p{p}: broker {member} joined the ISR while "
                                                "not usable")
            view = seen.get(member)
            if view is not None:
                log_end, broker_epoch, hw, epoch_start = view
                if broker_epoch not in (-1, registration.broker_epoch):
                    raise InvariantViolation(
                        "S12", f"p{p}: broker {member} joined at broker epoch "
                               f"{registration.broker_epoch}, the leader saw {broker_epoch}")
                if log_end < max(hw, epoch_start):
                    raise InvariantViolation(
                        "S12", f"p{p}: broker {member} proposed at log end {log_end}, "
                               f"below HW {hw} or epoch start {epoch_start}")
            self._holds_acked("S4", p, member, "joined the ISR")

    def _holds_acked(self, check: str, p: int, member: int, why: str) -> None:
        if self.ghost.exempt(p) or self.ghost.lacks_data(p, member):
            return
        log = self._log_of(member, p)
        for offset, batch in self.ghost.acked[p].items():
            if log is None or (not log.holds(offset, batch) and offset >= log.log_start_offset):
                raise InvariantViolation(check, f"p{p}: broker {member} {why} without acked "
                                                f"batch {batch} at {offset}")

    # -- logs (S2, S9) ---------------------------------------------------------------------

    def leader_appended(self, log: SimLog, index: int) -> None:
        info = log.infos[index]
        p = log.partition
        owner = self.ghost.leader_of.get((p, info.epoch))
        if owner != log.broker:
            raise InvariantViolation("S2", f"p{p}: broker {log.broker} appended batch "
                                           f"{info.batch_id} at {info.base} in epoch "
                                           f"{info.epoch}, led by {owner}")
        broker = self.world.brokers.get(log.broker)
        registration = self.world.committed_state().brokers.get(log.broker)
        if (broker is not None and registration is not None and registration.fenced
                and registration.broker_epoch == broker.broker_epoch):
            info_now = self.world.committed_state().partition(TOPIC, p)
            now_led = "" if info_now is None else (f"; p{p} is led by {info_now.leader} in "
                                                   f"epoch {info_now.leader_epoch}")
            raise InvariantViolation("S2", f"p{p}: broker {log.broker} appended batch "
                                           f"{info.batch_id} at {info.base} in epoch "
                                           f"{info.epoch} while fenced (broker epoch "
                                           f"{broker.broker_epoch}){now_led}")
        applied = self.applied_epoch.get((log.broker, p), -1)
        if info.epoch < applied:
            raise InvariantViolation("S2", f"p{p}: broker {log.broker} appended batch "
                                           f"{info.batch_id} at {info.base} in epoch "
                                           f"{info.epoch}, after it applied epoch {applied}")
        self.ghost.appended_as_leader.setdefault((p, info.epoch), log.broker)

    def truncating(self, log: SimLog, new_end: int) -> None:
        p = log.partition
        self.marks.setdefault((log.broker, p), _LogMark()).led = -1
        if self.ghost.exempt(p):
            return
        committed = self.ghost.committed[p]
        for info in log.infos:
            if info.next > new_end and committed.get(info.base) == (info.batch_id, info.epoch):
                raise InvariantViolation("S9", f"p{p}: broker {log.broker} cuts its log at "
                                               f"{new_end}, losing committed batch "
                                               f"{info.batch_id} at {info.base}")

    # -- brokers (S5, S6, S7, S13, S14, S15) ------------------------------------------------

    def opened_or_became(self, broker: SimBroker, p: int, partition: Partition,
                         new_term: bool) -> None:
        key = (broker.node_id, p)
        self.applied_epoch[key] = max(self.applied_epoch.get(key, -1), partition.leader_epoch)
        if not (partition.is_leader and new_term):
            return
        self.marks.setdefault((broker.node_id, p), _LogMark()).led = partition.leader_epoch
        if self.ghost.exempt(p):
            return
        self._kept_deleted(broker, p, partition, partition.log.log_start_offset,
                           "as it starts leading")
        log = self._log_of(broker.node_id, p)
        assert log is not None
        committed_in = self.ghost.committed_in[p]
        for offset, batch in sorted(self.ghost.committed[p].items()):
            # Leader completeness: what was committed in earlier epochs. (A replica applying
            # a stale record leads an epoch that others already followed; what they committed
            # since is not its to hold, and it can acknowledge nothing: S6.)
            if (committed_in[offset] < partition.leader_epoch and not log.holds(offset, batch)
                    and offset >= log.log_start_offset):
                raise InvariantViolation("S5", f"p{p}: broker {broker.node_id} leads epoch "
                                               f"{partition.leader_epoch} without committed "
                                               f"batch {batch} at {offset}")

    def produced(self, broker: SimBroker, p: int, partition: Partition, *, acks: int,
                 outcome: ProduceOutcome, end_before: int, batch_id: int) -> None:
        if acks != ACKS_ALL:
            if outcome.error_code == ErrorCode.NONE:
                info = self._log_of(broker.node_id, p)
                found = None if info is None else info.batch_at(outcome.base_offset)
                known = self.ghost.committed[p].get(outcome.base_offset)
                deleted = (info is not None and outcome.base_offset < info.log_start_offset
                           and known is not None and known[0] == batch_id)
                if not deleted and (found is None or found.batch_id != batch_id):
                    raise InvariantViolation("S16", f"p{p}: broker {broker.node_id} answers ok "
                                                    f"for batch {batch_id} at "
                                                    f"{outcome.base_offset}, which its log "
                                                    "does not hold there")
            return
        if outcome.error_code == ErrorCode.NOT_ENOUGH_REPLICAS:
            if partition.log.log_end_offset != end_before:
                raise InvariantViolation("S15", f"p{p}: NOT_ENOUGH_REPLICAS after an append")
            self.count("acks=all refused: NOT_ENOUGH_REPLICAS")
        elif outcome.appended_bytes and len(partition.replicas.isr) < self.min_insync:
            raise InvariantViolation("S15", f"p{p}: broker {broker.node_id} appended acks=all "
                                            f"with ISR {sorted(partition.replicas.isr)}")

    def acking(self, broker: SimBroker, p: int, partition: Partition, base_offset: int,
               batch_id: int) -> None:
        ghost = self.ghost
        leader_log = self._log_of(broker.node_id, p)
        info = None if leader_log is None else leader_log.batch_at(base_offset)
        known = ghost.committed[p].get(base_offset)
        if info is not None and info.base == base_offset and info.batch_id == batch_id:
            batch = (batch_id, info.epoch)
        elif (leader_log is not None and base_offset < leader_log.log_start_offset
              and known is not None and known[0] == batch_id):
            batch = known  # a retry of a committed batch that retention deleted since
        else:
            raise InvariantViolation("S6", f"p{p}: broker {broker.node_id} acks batch "
                                           f"{batch_id} at {base_offset}, which its log does "
                                           "not hold there")
        members = set(partition.isr_tracker.maximal_isr) | set(self._isr(p))
        for member in sorted(members):
            if ghost.lacks_data(p, member):
                continue
            log = self._log_of(member, p)
            if log is not None and base_offset < log.log_start_offset and known == batch:
                continue
            if log is None or not log.holds(base_offset, batch):
                raise InvariantViolation(
                    "S6", f"p{p}: broker {broker.node_id} acks batch {batch_id} at "
                          f"{base_offset} (epoch {partition.leader_epoch}, HW "
                          f"{partition.high_watermark}) but broker {member} of ISR "
                          f"{sorted(members)} does not hold it")
        idempotent = info is None or info.producer[0] >= 0
        earlier = ghost.acked_offset.setdefault(batch_id, base_offset)
        if earlier != base_offset and idempotent:
            raise InvariantViolation("S14", f"p{p}: batch {batch_id} acked at {earlier} and "
                                            f"{base_offset}")
        other = ghost.committed[p].get(base_offset)
        if other is not None and other != batch and not ghost.exempt(p):
            raise InvariantViolation("S4", f"p{p}: batch {batch} acked at {base_offset}, "
                                           f"where committed batch {other} was")
        ghost.acked[p][base_offset] = batch
        ghost.commit(p, base_offset, batch, partition.leader_epoch)
        self.count("acks=all acknowledged")
        self.log(f"b{broker.node_id} p{p} acks batch {batch_id} at {base_offset} (e"
                 f"{partition.leader_epoch}, hw {partition.high_watermark}, max isr "
                 f"{sorted(partition.isr_tracker.maximal_isr)})")

    def consumer_read(self, broker: SimBroker, p: int, partition: Partition,
                      batches: tuple[tuple[int, int, int], ...], shown: int) -> None:
        ghost = self.ghost
        hw = partition.high_watermark
        log = self._log_of(broker.node_id, p)
        assert log is not None
        for base, next_offset, batch_id in batches:
            if next_offset > hw:
                raise InvariantViolation("S7", f"p{p}: broker {broker.node_id} returned batch "
                                               f"{batch_id} [{base}, {next_offset}) above HW {hw}")
            info = log.batch_at(base)
            if info is None or info.batch_id != batch_id:
                raise InvariantViolation("S7", f"p{p}: broker {broker.node_id} returned batch "
                                               f"{batch_id} at {base}, not in its log there")
            batch = (batch_id, info.epoch)
            other = ghost.committed[p].get(base)
            if other is not None and other != batch and not ghost.exempt(p):
                raise InvariantViolation("S7", f"p{p}: consumer read batch {batch} at "
                                               f"{base}, where committed batch {other} was")
            ghost.commit(p, base, batch, partition.leader_epoch)
        if shown >= 0:  # -1: the leader shows none yet
            self._exposed(broker, p, partition, shown, "a consumer's fetch")
        self.count("consumer reads")

    def deleting(self, broker: SimBroker, p: int, partition: Partition) -> None:
        """A leader is about to delete records below at most its HW: every batch below its
        HW is committed, and the ghost keeps them so (S6 and S16 then accept an idempotent
        retry of one answered at its offset, where no log holds it any more)."""
        if broker.node_id != self.ghost.leader_of.get((p, partition.leader_epoch)):
            return
        log = self._log_of(broker.node_id, p)
        assert log is not None
        for info in log.infos:
            if info.next > partition.high_watermark:
                break
            self.ghost.commit(p, info.base, (info.batch_id, info.epoch), partition.leader_epoch)

    def records_deleted(self, broker: SimBroker, p: int, partition: Partition,
                        offset: int) -> None:
        """A DeleteRecords answered ok: no leader of a later epoch, nor this one, may show
        a log start below `offset` (S17)."""
        deleted_below, _epoch = self.ghost.deleted.get(p, (0, -1))
        if offset > deleted_below:
            self.ghost.deleted[p] = (offset, partition.leader_epoch)
        self.count("deletions answered")
        self.log(f"b{broker.node_id} p{p} answers records below {offset} deleted (e"
                 f"{partition.leader_epoch}, low watermark {partition.low_watermark})")

    def log_start_shown(self, broker: SimBroker, p: int, partition: Partition,
                        log_start_offset: int) -> None:
        """S17 at a consumer's fetch answer, not held against a deposed leader that has not
        heard of its successor (S8's exception)."""
        info = self.world.committed_state().partition(TOPIC, p)
        if info is not None and partition.leader_epoch < info.leader_epoch:
            return
        if not self.ghost.exempt(p):
            self._kept_deleted(broker, p, partition, log_start_offset, "to a consumer")

    def _kept_deleted(self, broker: SimBroker, p: int, partition: Partition,
                      log_start_offset: int, where: str) -> None:
        deleted_below, epoch = self.ghost.deleted.get(p, (0, -1))
        if partition.leader_epoch >= epoch and log_start_offset < deleted_below:
            raise InvariantViolation("S17", f"p{p}: broker {broker.node_id} (epoch "
                                            f"{partition.leader_epoch}) shows log start "
                                            f"{log_start_offset} {where}, below {deleted_below}, "
                                            f"which records were deleted below in epoch {epoch}")

    def offsets_listed(self, broker: SimBroker, p: int, partition: Partition,
                       latest: int) -> None:
        self._exposed(broker, p, partition, latest, "ListOffsets(LATEST)")

    def _exposed(self, broker: SimBroker, p: int, partition: Partition, high_watermark: int,
                 where: str) -> None:
        """S8: the HW clients are shown never goes back (docs/replication.md §2.3). Not
        held against a deposed leader that has not heard of its successor (cut off from the
        controller): it still answers reads with the HW it had (its lease stops its writes,
        not its reads), as a Kafka leader does for a client that names no leader epoch
        (KIP-320; zlog's Fetch v0 and ListOffsets v0 carry none)."""
        ghost = self.ghost
        info = self.world.committed_state().partition(TOPIC, p)
        if info is not None and partition.leader_epoch < info.leader_epoch:
            return
        if high_watermark < ghost.exposed_hw[p] and not ghost.exempt(p):
            raise InvariantViolation("S8", f"p{p}: broker {broker.node_id} shows HW "
                                           f"{high_watermark} in {where}, below the "
                                           f"{ghost.exposed_hw[p]} shown before")
        ghost.exposed_hw[p] = max(ghost.exposed_hw[p], high_watermark)

    def fetch_answer(self, broker: SimBroker, p: int, partition: Partition,
                     answer: ReplicaFetchAnswer) -> None:
        result = answer.result
        log = broker.disk.logs[p]
        if (result.diverging_epoch >= 0 or answer.ghost_prev_batch is None
                or log.log_end_offset == log.log_start_offset):
            return  # an empty log (retention took its front) has no last batch to compare
        index = log.index_of(log.log_end_offset - 1)
        mine = None if index is None else bytes(log.batches[index])
        if mine != answer.ghost_prev_batch:
            raise InvariantViolation("S13", f"p{p}: broker {broker.node_id} fetches on at "
                                            f"{log.log_end_offset} but its last batch differs "
                                            f"from the leader's")

    def follower_truncated(self, broker: SimBroker, p: int, point: int,
                           common_prefix: int) -> None:
        if point < common_prefix:
            raise InvariantViolation("S13", f"p{p}: broker {broker.node_id} cut at {point}, "
                                            f"below the common prefix {common_prefix}")

    def proposing(self, broker: SimBroker, p: int, partition: Partition,
                  new_isr: frozenset[int], member_epochs: dict[int, int]) -> None:
        del member_epochs  # what was sent; the ghost keeps what the leader really saw
        tracker = partition.isr_tracker
        seen: dict[int, tuple[int, int, int, int]] = {}
        for member in sorted(new_isr - tracker.replicas.isr):
            state = tracker.followers.get(member)
            log_end = -1 if state is None else state.log_end_offset
            fetched_with = -1 if state is None else state.broker_epoch
            seen[member] = (log_end, fetched_with, tracker.value, tracker.epoch_start_offset)
        self.ghost.proposals[(p, partition.leader_epoch, tracker.replicas.partition_epoch)] = seen

    # -- after every event (S3, S8, S10, S14) ----------------------------------------------

    def after_event(self, only: SimBroker | None = None) -> None:
        """Runs after every event, so it looks only at what changed since the last one: a
        log's change count, or a process's HW and log bounds. A message changes only the
        broker it reaches: `only` names it."""
        ghost = self.ghost
        brokers = list(self.world.brokers.values()) if only is None else [only]
        running = [b for b in brokers if b.status is Status.UP]
        for broker in running:
            for p, partition in broker.partitions.items():
                if partition.is_leader:
                    ghost.max_leader_hw[p] = max(ghost.max_leader_hw[p],
                                                 partition.high_watermark)
        for broker in brokers:
            for p, log in broker.disk.logs.items():
                mark = self.marks.get((broker.node_id, p))
                if mark is None:
                    mark = self.marks[(broker.node_id, p)] = _LogMark()
                if mark.changes != log.changes:
                    opened = broker.partitions.get(p) if broker.status is Status.UP else None
                    if opened is not None:
                        self._check_epoch_cache(broker.node_id, p, opened)
                    mark.changes = log.changes
        for broker in running:
            for p, partition in broker.partitions.items():
                self._check_hw(broker, p, partition)

    def batch_added(self, log: SimLog, index: int) -> None:
        """S3 and S14 for a batch as it enters a log."""
        p = log.partition
        info = log.infos[index]
        before = log.infos[index - 1] if index > 0 else None
        # The first batch of a log that starts past 0 (a follower started over at its leader's
        # log start) has a predecessor this log never held: unknown, not compared.
        pred = None if before is None else (before.base, before.epoch)
        pred_known = before is not None or info.base == 0
        stored = bytes(log.batches[index])
        key = (p, info.base, info.epoch)
        known = self.batches.get(key)
        if known is None:
            self.batches[key] = (stored, pred if pred_known else _UNKNOWN, 1)
        else:
            if known[0] != stored:
                raise InvariantViolation("S3", f"p{p}: broker {log.broker} holds batch "
                                               f"{info.batch_id} at offset {info.base} epoch "
                                               f"{info.epoch}, where another log holds another")
            if pred_known and known[1] not in (pred, _UNKNOWN):
                raise InvariantViolation("S3", f"p{p}: broker {log.broker} holds batch "
                                               f"{info.batch_id} at {info.base} after {pred}, "
                                               f"another log after {known[1]}")
            first_pred = pred if pred_known and known[1] == _UNKNOWN else known[1]
            self.batches[key] = (known[0], first_pred, known[2] + 1)
        pid, producer_epoch, sequence = info.producer
        if pid >= 0:
            mark = self.marks.setdefault((log.broker, p), _LogMark())
            producer = (pid, producer_epoch, sequence)
            if mark.producers.setdefault(producer, info.base) != info.base:
                raise InvariantViolation("S14", f"p{p}: broker {log.broker} holds producer "
                                                f"{producer} at {mark.producers[producer]} "
                                                f"and {info.base}")

    def batches_removed(self, log: SimLog, removed: list[BatchInfo]) -> None:
        """A batch no log holds any more may be written again (a power loss lost it): only
        logs that hold a (base offset, epoch) at the same time must agree on it."""
        p = log.partition
        mark = self.marks.setdefault((log.broker, p), _LogMark())
        for info in removed:
            key = (p, info.base, info.epoch)
            stored, pred, holders = self.batches[key]
            if holders > 1:
                self.batches[key] = (stored, pred, holders - 1)
            else:
                del self.batches[key]
            mark.producers.pop(info.producer, None)

    def _check_epoch_cache(self, broker: int, p: int, partition: Partition) -> None:
        log = partition.log
        assert isinstance(log, SimLog)
        runs: list[tuple[int, int]] = []
        for info in log.infos:
            if not runs or info.epoch > runs[-1][0]:
                runs.append((info.epoch, max(info.base, log.log_start_offset)))
            elif info.epoch < runs[-1][0]:
                raise InvariantViolation("S10", f"p{p}: broker {broker}'s log goes from epoch "
                                                f"{runs[-1][0]} back to {info.epoch}")
        cache = [(e.epoch, e.start_offset) for e in partition.epochs.entries]
        if cache == runs:
            return
        # A leader records (its epoch, its log end) before appending (KAFKA-7415); the entry
        # stays, empty, if it is demoted before it appends, until its log is cut or grows.
        trailing_ok = (len(cache) == len(runs) + 1 and cache[:-1] == runs
                       and cache[-1][1] == log.log_end_offset
                       and cache[-1][0] <= partition.leader_epoch
                       and self.ghost.leader_of.get((p, cache[-1][0])) == broker
                       and self.marks[(broker, p)].led == cache[-1][0])
        # A log DeleteRecords emptied (its start at its end) keeps the entry of the epoch that
        # held its last deleted batch, moved to the log start (Kafka's truncateFromStart), for
        # its next fetch to name: no batch is left to tell that epoch.
        emptied_ok = (not log.infos and len(cache) == 1
                      and cache[0][1] == log.log_start_offset == log.log_end_offset
                      and cache[0][0] <= partition.leader_epoch)
        if not (trailing_ok or emptied_ok):
            raise InvariantViolation("S10", f"p{p}: broker {broker}'s epoch cache {cache} != "
                                            f"its log's epochs {runs} (log end "
                                            f"{log.log_end_offset})")

    def _check_hw(self, broker: SimBroker, p: int, partition: Partition) -> None:
        log = partition.log
        hw = partition.high_watermark
        key = (broker.process, p)
        # An unchanged HW over an unchanged log passed already: the bound it is compared
        # with (the highest leader HW) only grows.
        seen = (hw, log.log_start_offset, log.log_end_offset)
        before = self.hw_checked.get(key)
        if before == seen:
            return
        self.hw_checked[key] = seen
        if not log.log_start_offset <= hw <= log.log_end_offset:
            raise InvariantViolation("S8", f"p{p}: broker {broker.node_id} HW {hw} outside "
                                           f"[{log.log_start_offset}, {log.log_end_offset}]")
        if before is not None and hw < before[0] and not self.ghost.exempt(p):
            raise InvariantViolation("S8", f"p{p}: broker {broker.node_id}'s HW went back from "
                                           f"{before[0]} to {hw}")
        if hw > self.ghost.max_leader_hw[p]:
            raise InvariantViolation("S8", f"p{p}: broker {broker.node_id}'s HW {hw} is above "
                                           f"every leader's ({self.ghost.max_leader_hw[p]})")
        replicas = partition.replicas
        needed = min(self.min_insync, len(replicas.replicas))
        if (partition.is_leader and before is not None and hw > before[0]
                and len(replicas.isr) < needed):
            raise InvariantViolation("S15", f"p{p}: leader {broker.node_id}'s HW moved from "
                                            f"{before[0]} to {hw} with ISR "
                                            f"{sorted(replicas.isr)}, below {needed}")

    # -- power and sweeps --------------------------------------------------------------------

    def power_lost(self, broker: int, *, wiped: bool = False) -> None:
        """`broker` lost what it had not written back (or, `wiped`, its whole disk)."""
        ghost = self.ghost
        state = self.world.committed_state()
        registration = state.brokers.get(broker)
        if registration is not None:
            ghost.lost_at_epoch[broker] = registration.broker_epoch
        topic = state.topics.get(TOPIC)
        if topic is None:
            return
        for info in topic.partitions:
            if broker not in info.replicas:
                continue
            if wiped:
                ghost.wiped_since_join.add((info.partition, broker))
                continue
            ghost.lost_since_join.add((info.partition, broker))
            self._maybe_lossy(info.partition, info.isr)

    def _maybe_lossy(self, p: int, isr: tuple[int, ...]) -> None:
        ghost = self.ghost
        if p not in ghost.lossy and all((p, m) in ghost.lost_since_join for m in isr):
            self.log(f"p{p} lossy: every ISR member {list(isr)} lost power since it joined")
            ghost.lossy.add(p)

    def final(self) -> None:
        """S5 once the cluster healed: every batch known committed (acknowledged or read by a
        consumer) is in the leader's final log, where every replica's log now equals it."""
        topic = self.world.committed_state().topics.get(TOPIC)
        if topic is None:
            return
        for info in topic.partitions:
            p = info.partition
            if self.ghost.exempt(p):
                continue
            log = self._log_of(info.leader, p)
            for offset, batch in sorted(self.ghost.committed[p].items()):
                if log is None or (not log.holds(offset, batch)
                                   and offset >= log.log_start_offset):
                    raise InvariantViolation("S5", f"p{p}: the final log of leader "
                                                   f"{info.leader} lacks committed batch "
                                                   f"{batch} at {offset}")

    def sweep(self) -> None:
        """S4 over every committed ISR member (the event checks should make this redundant)."""
        topic = self.world.committed_state().topics.get(TOPIC)
        if topic is None:
            return
        for info in topic.partitions:
            for member in info.isr:
                self._holds_acked("S4", info.partition, member, "is in the ISR")
