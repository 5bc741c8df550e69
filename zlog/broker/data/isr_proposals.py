"""The ISR changes a worker's leaders propose, on their way to the controller and back.

Every ISR_CHECK_INTERVAL_MS each partition this worker leads asks its tracker (isr.py) whether
to shrink (a follower not caught up for `replica_lag_time_max_ms`) or expand (a follower that
reached the high watermark and the epoch start). A change goes to the supervisor as AlterIsr,
which takes it to the controller; the committed record comes back as an assign, which replaces
the pending change. A refusal of the change itself drops it, and a check after
REFUSED_BACKOFF_MS proposes afresh: at most one change per partition is ever in flight
(Kafka's AlterPartition rule). A refusal that repeats the last one is logged at debug level
only.

The leader forgets a change only once it knows the controller did not apply it: the
controller may apply one after the leader stopped waiting (a slow metadata commit, a controller
that moved with the change in its log), at the partition epoch it was proposed at, and a
leader that had forgotten it would meanwhile have let its high watermark pass the member it
adds. So no answer within ANSWER_TIMEOUT_MS (the supervisor restarted, the controller moved),
and an answer that leaves the outcome open (UNSETTLED_ANSWERS), keep the change pending, and it
is sent again, as it was (after REFUSED_BACKOFF_MS for such an answer), until a committed
record replaces it or the controller refuses it.

A leader whose last produce could not be stored (a full disk), or that holds a corrupt batch,
proposes the ISR without itself instead, while another replica is in sync: its resignation,
which the controller answers by electing one of them (docs/replication.md), so a full disk
or a rotted segment does not hold the partition.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final

from zlog.broker import worker_protocol as protocol
from zlog.broker.data.partition import Partition
from zlog.errors import ErrorCode
from zlog.types import TopicPartition

log = logging.getLogger(__name__)

ISR_CHECK_INTERVAL_MS: Final = 250  # how often leaders look at their followers
ANSWER_TIMEOUT_MS: Final = 5_000  # a change unanswered this long is sent again
REFUSED_BACKOFF_MS: Final = 1_000  # the pause after a refused change before the next proposal
# Answers after which the change may still be applied, or already was: the request timed out
# in the metadata log, the link to the controller closed (or the controller moved), the record
# moved on (perhaps by this very change). The committed record settles it.
UNSETTLED_ANSWERS: Final = frozenset({
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER, ErrorCode.INVALID_UPDATE_VERSION,
    ErrorCode.FENCED_LEADER_EPOCH})


@dataclass(frozen=True, slots=True)
class _Sent:
    tp: TopicPartition
    message: protocol.AlterIsr
    again_ms: int  # when it is sent again if nothing settled it by then


class IsrProposals:
    def __init__(self, partitions: Mapping[TopicPartition, Partition], *,
                 lag_time_max_ms: int) -> None:
        assert lag_time_max_ms > 0
        self.partitions = partitions
        self.lag_time_max_ms = lag_time_max_ms
        self._sent: dict[int, _Sent] = {}
        self._next_request_id = 1
        self._quiet_until_ms: dict[TopicPartition, int] = {}  # after a refusal
        self._last_refusal: dict[TopicPartition, tuple[tuple[int, ...], str]] = {}
        self._now_ms = 0

    def due(self, now_ms: int) -> list[protocol.AlterIsr]:
        """The changes to send now (each one also marked pending in its tracker)."""
        self._now_ms = now_ms
        messages = self._expire(now_ms)
        for tp, partition in self.partitions.items():
            if not partition.is_leader or now_ms < self._quiet_until_ms.get(tp, 0):
                continue
            tracker = partition.isr_tracker
            resigning = tracker.resignation() if partition.must_resign else None
            new_isr = resigning or tracker.next_proposal(now_ms, partition.log.log_end_offset,
                                                         self.lag_time_max_ms)
            if not new_isr or new_isr == tracker.replicas.isr:
                continue
            proposal = tracker.propose(new_isr, now_ms)
            ordered = tuple(sorted(new_isr))
            epochs = {replica: state.broker_epoch for replica, state in tracker.followers.items()
                      if replica in new_isr and state.broker_epoch >= 0}
            level = logging.DEBUG if tp in self._last_refusal else logging.INFO
            why = partition.storage_error or f"a corrupt batch at {partition.corrupt_from}"
            log.log(level, "%s-%d proposes ISR %s (was %s)%s", *tp, list(ordered),
                    sorted(tracker.replicas.isr), f", resigning: {why}" if resigning else "")
            message = protocol.AlterIsr(
                self._take_request_id(), tp.topic, tp.partition, partition.leader_epoch,
                proposal.partition_epoch, ordered, epochs)
            self._sent[message.request_id] = _Sent(tp, message, now_ms + ANSWER_TIMEOUT_MS)
            messages.append(message)
        return messages

    def _take_request_id(self) -> int:
        request_id = self._next_request_id
        self._next_request_id += 1
        return request_id

    def answered(self, answer: protocol.AlterIsrAnswer) -> None:
        sent = self._sent.get(answer.request_id)
        if sent is None:
            return
        if answer.error_code in UNSETTLED_ANSWERS:
            log.debug("%s-%d: ISR change to %s not settled: %s", *sent.tp,
                      list(sent.message.new_isr), answer.error_message)
            self._sent[answer.request_id] = replace(
                sent, again_ms=self._now_ms + REFUSED_BACKOFF_MS)  # still pending
            return
        del self._sent[answer.request_id]
        if answer.error_code == 0:
            self._last_refusal.pop(sent.tp, None)
            return  # the committed record arrives as an assign
        partition = self.partitions.get(sent.tp)
        if partition is not None:
            refusal = (sent.message.new_isr, answer.error_message)
            level = logging.DEBUG if self._last_refusal.get(sent.tp) == refusal else logging.INFO
            log.log(level, "%s-%d: ISR change to %s refused: %s", *sent.tp,
                    list(sent.message.new_isr), answer.error_message)
            self._last_refusal[sent.tp] = refusal
            self._quiet_until_ms[sent.tp] = self._now_ms + REFUSED_BACKOFF_MS
            partition.isr_tracker.proposal_refused(sent.message.partition_epoch)

    def _expire(self, now_ms: int) -> list[protocol.AlterIsr]:
        """The changes whose answer is overdue and that are still pending, to send again."""
        for tp in [tp for tp in self._quiet_until_ms if tp not in self.partitions]:
            del self._quiet_until_ms[tp]
            self._last_refusal.pop(tp, None)
        again: list[protocol.AlterIsr] = []
        for request_id, sent in list(self._sent.items()):
            if now_ms < sent.again_ms:
                continue
            del self._sent[request_id]
            partition = self.partitions.get(sent.tp)
            pending = None if partition is None else partition.isr_tracker.pending
            if (pending is None or pending.partition_epoch != sent.message.partition_epoch
                    or tuple(sorted(pending.new_isr)) != sent.message.new_isr):
                continue  # settled meanwhile: a committed record replaced it
            message = replace(sent.message, request_id=self._take_request_id())
            self._sent[message.request_id] = replace(
                sent, again_ms=now_ms + ANSWER_TIMEOUT_MS, message=message)
            log.info("%s-%d: ISR change to %s not settled, sent again", *sent.tp,
                     list(message.new_isr))
            again.append(message)
        return again
