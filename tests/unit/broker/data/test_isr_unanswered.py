"""A leader keeps an ISR change whose fate it does not know, and sends it again.

Spec: docs/replication.md §3 (one ISR change in flight; the high watermark counts the members
a pending expansion adds). The controller may apply a change after the leader stopped waiting
for its answer (a slow metadata commit, a controller that moved with the change in its log),
at the partition epoch the leader proposed it at. A leader that forgot the change meanwhile
lets its high watermark pass the joining member, which then enters the ISR without batches
acknowledged in between. Found by the replication simulator (scenario unanswered-isr-change).
"""

from __future__ import annotations

from tests.memory_log import MemoryLog
from tests.storage_helpers import make_batch
from zlog.broker import worker_protocol as protocol
from zlog.broker.data.isr import ReplicaSet
from zlog.broker.data.isr_proposals import ANSWER_TIMEOUT_MS, REFUSED_BACKOFF_MS, IsrProposals
from zlog.broker.data.partition import Partition
from zlog.errors import ErrorCode
from zlog.types import TopicPartition

TP = TopicPartition("t", 0)
LAG_MS = 1_000


def _leader() -> tuple[Partition, IsrProposals]:
    """Broker 1 leads with ISR {1, 2}; broker 3 holds the same 3 records and may join."""
    replicas = ReplicaSet(1, frozenset({1, 2, 3}), frozenset({1, 2}), 1, partition_epoch=7)
    partition = Partition("t", 0, MemoryLog(), leader_epoch=4, replicas=replicas)
    partition.produce([make_batch(0, 3)], acks=1)
    for follower in (2, 3):
        partition.note_replica_fetch(follower, 3, 0, broker_epoch=10 + follower, log_start_offset=0)
    return partition, IsrProposals({TP: partition}, lag_time_max_ms=LAG_MS)


def _expansion(proposals: IsrProposals) -> protocol.AlterIsr:
    (change,) = proposals.due(100)
    assert (change.new_isr, change.partition_epoch) == ((1, 2, 3), 7)
    return change


def test_an_unanswered_expansion_is_sent_again_and_still_holds_the_high_watermark() -> None:
    partition, proposals = _leader()
    expansion = _expansion(proposals)
    partition.produce([make_batch(1, 1)], acks=1)  # offset 3: broker 3 stops fetching
    partition.note_replica_fetch(2, 4, 200, broker_epoch=12, log_start_offset=0)
    assert partition.high_watermark == 3  # waits for broker 3, whose join is pending
    # Broker 2 falls behind too: when the answer is overdue, a shrink would be due as well.
    partition.produce([make_batch(2, 1)], acks=1)
    later = 100 + ANSWER_TIMEOUT_MS
    (again,) = proposals.due(later)
    partition.note_replica_fetch(2, 5, later, broker_epoch=12, log_start_offset=0)
    assert partition.high_watermark == 3  # the controller may still add broker 3
    assert 3 in partition.isr_tracker.maximal_isr
    assert again.request_id != expansion.request_id
    assert (again.new_isr, again.partition_epoch, dict(again.member_epochs)) == (
        expansion.new_isr, expansion.partition_epoch, dict(expansion.member_epochs))


def test_answers_that_leave_the_outcome_open_keep_the_change() -> None:
    for code in (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER):
        partition, proposals = _leader()
        expansion = _expansion(proposals)
        proposals.due(150)
        proposals.answered(protocol.AlterIsrAnswer(expansion.request_id, int(code), "?"))
        assert partition.isr_tracker.pending is not None, code
        assert proposals.due(150 + REFUSED_BACKOFF_MS - 1) == []
        (again,) = proposals.due(150 + REFUSED_BACKOFF_MS)  # not a whole answer timeout
        assert again.new_isr == expansion.new_isr, code


def test_answers_computed_against_a_newer_record_keep_the_change_until_it_arrives() -> None:
    """The record moved on (perhaps by this very change): the leader neither forgets the
    change nor sends it again; the newer record, which must come as an assign, settles it
    (Kafka's handleAlterPartitionError)."""
    for code in (ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.FENCED_LEADER_EPOCH):
        partition, proposals = _leader()
        expansion = _expansion(proposals)
        proposals.due(150)
        proposals.answered(protocol.AlterIsrAnswer(expansion.request_id, int(code), "?"))
        assert partition.isr_tracker.pending is not None, code
        assert proposals.due(150 + 10 * ANSWER_TIMEOUT_MS) == [], code
        assert partition.isr_tracker.pending is not None, code


def test_a_refusal_of_the_change_itself_drops_it() -> None:
    partition, proposals = _leader()
    expansion = _expansion(proposals)
    proposals.answered(protocol.AlterIsrAnswer(
        expansion.request_id, int(ErrorCode.INELIGIBLE_REPLICA), "broker 3 may not join now"))
    assert partition.isr_tracker.pending is None
    assert 3 not in partition.isr_tracker.maximal_isr


def test_a_committed_record_settles_an_unanswered_change() -> None:
    partition, proposals = _leader()
    _expansion(proposals)
    partition.become(leader_epoch=4, is_leader=True, replicas=ReplicaSet(
        1, frozenset({1, 2, 3}), frozenset({1, 2, 3}), 1, partition_epoch=8))
    assert partition.isr_tracker.pending is None
    assert proposals.due(100 + ANSWER_TIMEOUT_MS) == []  # nothing left to send again
