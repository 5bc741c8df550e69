"""The ISR changes a worker's leaders propose, on their way to the controller and back.

Every ISR_CHECK_INTERVAL_MS each partition this worker leads asks its tracker (isr.py) whether
to shrink (a follower not caught up for `replica_lag_time_max_ms`) or expand (a follower that
reached the high watermark and the epoch start). A change is stored (`IsrChangeStore`: a file
in the partition's directory, isr_change_file.py) before it goes to the supervisor as AlterIsr,
which takes it to the controller; the committed record comes back as an assign, which replaces
the pending change. At most one change per partition is ever in flight (Kafka's AlterPartition
rule).

An expansion counts its new member in the high watermark from the moment it is proposed, and
the controller may commit it whatever answer reaches the leader, so the answer decides
(`isr.isr_error_action`, Kafka's handleAlterPartitionError): INELIGIBLE_REPLICA or
OPERATION_NOT_ATTEMPTED (nothing applied) drops the change and a check after
REFUSED_BACKOFF_MS proposes afresh; a refusal computed against a newer record keeps it pending
until that record arrives; any other refusal, or no answer within ANSWER_TIMEOUT_MS (the
supervisor or the controller moved), sends the same change again after REFUSED_BACKOFF_MS. A
new process of the same leader (the worker killed and restarted by its supervisor, at the same
leader epoch) takes the stored change back when it opens the partition, before its high
watermark is computed (`Partition.start_term`, called by partition_host.py), and sends
it again here; so a member the controller may already have added is never left out of its
high watermark. A refusal that
repeats the last one is logged at debug level only.

A leader whose last produce could not be stored (a full disk), or that holds a corrupt batch,
proposes the ISR without itself instead, while another replica is in sync: its resignation,
which the controller answers by electing one of them (docs/replication.md), so a full disk
or a rotted segment does not hold the partition. A change that adds no member is sent even if
it could not be stored (forgetting it is harmless: a shrink counts only once committed).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from zlog.broker import worker_protocol as protocol
from zlog.broker.data.isr import IsrChange, IsrErrorAction, isr_error_action
from zlog.broker.data.partition import Partition
from zlog.errors import ErrorCode
from zlog.types import TopicPartition

log = logging.getLogger(__name__)

ISR_CHECK_INTERVAL_MS: Final = 250  # how often leaders look at their followers
ANSWER_TIMEOUT_MS: Final = 5_000  # a change unanswered this long is sent again
REFUSED_BACKOFF_MS: Final = 1_000  # the pause after a refusal, before the next send


class IsrChangeStore(Protocol):
    """Where a partition's change in flight outlives the worker's process."""

    def save(self, tp: TopicPartition, change: IsrChange) -> None: ...

    def load(self, tp: TopicPartition) -> IsrChange | None: ...

    def remove(self, tp: TopicPartition) -> None: ...


class IsrChangeMemory:
    """A store that lives as long as the process (tests; a worker uses files)."""

    def __init__(self) -> None:
        self._changes: dict[TopicPartition, IsrChange] = {}

    def save(self, tp: TopicPartition, change: IsrChange) -> None:
        self._changes[tp] = change

    def load(self, tp: TopicPartition) -> IsrChange | None:
        return self._changes.get(tp)

    def remove(self, tp: TopicPartition) -> None:
        self._changes.pop(tp, None)


@dataclass(slots=True)
class _Pending:
    """A partition's change that the tracker holds pending, and where its request stands."""

    change: IsrChange
    request_id: int | None = None  # the request in flight
    sent_ms: int = 0
    send_at_ms: int | None = 0  # when to send it (again); None: wait for a newer record


class IsrProposals:
    def __init__(self, partitions: Mapping[TopicPartition, Partition], *,
                 lag_time_max_ms: int, store: IsrChangeStore | None = None) -> None:
        assert lag_time_max_ms > 0
        self.partitions = partitions
        self.lag_time_max_ms = lag_time_max_ms
        self.store: IsrChangeStore = store if store is not None else IsrChangeMemory()
        self._pending: dict[TopicPartition, _Pending] = {}
        self._in_flight: dict[int, TopicPartition] = {}  # request id -> its partition
        self._next_request_id = 1
        self._quiet_until_ms: dict[TopicPartition, int] = {}  # after a refusal
        self._last_refusal: dict[TopicPartition, tuple[tuple[int, ...], str]] = {}
        self._now_ms = 0

    def due(self, now_ms: int) -> list[protocol.AlterIsr]:
        """The changes to send now: new ones (each marked pending in its tracker first), and
        pending ones to send again."""
        self._now_ms = now_ms
        self._expire(now_ms)
        messages: list[protocol.AlterIsr] = []
        for tp, partition in self.partitions.items():
            if not partition.is_leader:
                self._drop(tp)
                continue
            pending = self._still_pending(tp, partition) or self._resumed(tp, partition)
            if pending is not None:
                if pending.send_at_ms is not None and now_ms >= pending.send_at_ms:
                    messages.append(self._send(tp, pending, now_ms))
                continue
            if partition.isr_tracker.pending is None and now_ms >= self._quiet_until_ms.get(tp, 0):
                proposed = self._propose(tp, partition, now_ms)
                if proposed is not None:
                    messages.append(self._send(tp, proposed, now_ms))
        return messages

    def _propose(self, tp: TopicPartition, partition: Partition, now_ms: int
                 ) -> _Pending | None:
        tracker = partition.isr_tracker
        resigning = tracker.resignation() if partition.must_resign else None
        new_isr = resigning or tracker.next_proposal(now_ms, partition.log.log_end_offset,
                                                     self.lag_time_max_ms,
                                                     partition.log.log_start_offset)
        if not new_isr or new_isr == tracker.replicas.isr:
            return None
        proposal = tracker.propose(new_isr, now_ms)
        change = IsrChange(partition.leader_epoch, proposal.partition_epoch,
                           tuple(sorted(new_isr)), _member_epochs(partition, new_isr))
        try:
            self.store.save(tp, change)
        except OSError as error:
            if new_isr - tracker.replicas.isr:
                log.warning("%s-%d: ISR change to %s not stored (%s): proposed later", *tp,
                            list(change.new_isr), error)
                tracker.proposal_refused(proposal.partition_epoch)
                return None
        level = logging.DEBUG if tp in self._last_refusal else logging.INFO
        why = partition.storage_error or f"a corrupt batch at {partition.corrupt_from}"
        log.log(level, "%s-%d proposes ISR %s (was %s)%s", *tp, list(change.new_isr),
                sorted(tracker.replicas.isr), f", resigning: {why}" if resigning else "")
        pending = self._pending[tp] = _Pending(change)
        return pending

    def _send(self, tp: TopicPartition, pending: _Pending, now_ms: int) -> protocol.AlterIsr:
        request_id = self._next_request_id
        self._next_request_id += 1
        if pending.request_id is not None:
            self._in_flight.pop(pending.request_id, None)
        pending.request_id, pending.sent_ms, pending.send_at_ms = request_id, now_ms, None
        self._in_flight[request_id] = tp
        change = pending.change
        return protocol.AlterIsr(request_id, tp.topic, tp.partition, change.leader_epoch,
                                 change.partition_epoch, change.new_isr,
                                 dict(change.member_epochs))

    def answered(self, answer: protocol.AlterIsrAnswer) -> None:
        tp = self._in_flight.pop(answer.request_id, None)
        pending = None if tp is None else self._pending.get(tp)
        if tp is None or pending is None or pending.request_id != answer.request_id:
            return  # an answer to a request sent again since, or to a change replaced
        pending.request_id = None
        if answer.error_code == 0:
            self._last_refusal.pop(tp, None)
            return  # the committed record arrives as an assign and replaces the change
        try:
            code = ErrorCode(answer.error_code)
        except ValueError:
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        action = isr_error_action(code)
        change = pending.change
        refusal = (change.new_isr, answer.error_message)
        level = logging.DEBUG if self._last_refusal.get(tp) == refusal else logging.INFO
        log.log(level, "%s-%d: ISR change to %s refused (%s): %s", *tp, list(change.new_isr),
                action.value, answer.error_message)
        self._last_refusal[tp] = refusal
        if action == IsrErrorAction.REVERT:
            partition = self.partitions.get(tp)
            if partition is not None:
                partition.isr_tracker.proposal_refused(change.partition_epoch)
            self._drop(tp)
            self._quiet_until_ms[tp] = self._now_ms + REFUSED_BACKOFF_MS
        elif action == IsrErrorAction.RETRY:
            pending.send_at_ms = self._now_ms + REFUSED_BACKOFF_MS

    def _resumed(self, tp: TopicPartition, partition: Partition) -> _Pending | None:
        """A change this process took back when it opened the partition
        (`Partition.start_term`): sent again now, as stored (or, should the stored one be
        gone, as the tracker holds it, with the broker epochs its followers fetched with)."""
        proposal = partition.isr_tracker.pending
        if proposal is None:
            return None
        change = self.store.load(tp)
        if (change is None or change.partition_epoch != proposal.partition_epoch
                or change.leader_epoch != partition.leader_epoch
                or frozenset(change.new_isr) != proposal.new_isr):
            change = IsrChange(partition.leader_epoch, proposal.partition_epoch,
                               tuple(sorted(proposal.new_isr)),
                               _member_epochs(partition, proposal.new_isr))
        log.info("%s-%d sends its ISR change to %s again", *tp, list(change.new_isr))
        pending = self._pending[tp] = _Pending(change)
        return pending

    def _still_pending(self, tp: TopicPartition, partition: Partition) -> _Pending | None:
        """The partition's change, unless a newer record (or leader epoch) replaced it."""
        pending = self._pending.get(tp)
        if pending is None:
            return None
        proposal = partition.isr_tracker.pending
        if (proposal is None or proposal.partition_epoch != pending.change.partition_epoch
                or partition.leader_epoch != pending.change.leader_epoch):
            self._drop(tp)
            return None
        return pending

    def _drop(self, tp: TopicPartition) -> None:
        pending = self._pending.pop(tp, None)
        if pending is None:
            return
        if pending.request_id is not None:
            self._in_flight.pop(pending.request_id, None)
        if tp in self.partitions:
            try:
                self.store.remove(tp)
            except OSError as error:  # a stale change is never resumed: its record is older
                log.debug("%s-%d: stored ISR change not removed: %s", *tp, error)

    def _expire(self, now_ms: int) -> None:
        for tp in [tp for tp in self._quiet_until_ms if tp not in self.partitions]:
            del self._quiet_until_ms[tp]
            self._last_refusal.pop(tp, None)
        for tp in [tp for tp in self._pending if tp not in self.partitions]:
            self._drop(tp)
        for pending in self._pending.values():
            if pending.request_id is not None and now_ms - pending.sent_ms >= ANSWER_TIMEOUT_MS:
                self._in_flight.pop(pending.request_id, None)
                pending.request_id, pending.send_at_ms = None, now_ms


def _member_epochs(partition: Partition, new_isr: frozenset[int]) -> tuple[tuple[int, int], ...]:
    """The broker epoch each member fetched with, for the controller's KIP-903 check."""
    return tuple(sorted((replica, state.broker_epoch)
                        for replica, state in partition.isr_tracker.followers.items()
                        if replica in new_isr and state.broker_epoch >= 0))
