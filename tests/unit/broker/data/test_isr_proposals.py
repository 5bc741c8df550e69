"""What a leader does with an ISR change it sent, by the controller's answer (Kafka's
Partition.handleAlterPartitionError; docs/replication.md §3).

Only an answer that says nothing was applied (INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED)
gives the change up. A refusal that means a newer record exists (FENCED_LEADER_EPOCH,
INVALID_UPDATE_VERSION, ...) keeps it pending until that record arrives, and an answer whose
outcome is unknown (NOT_CONTROLLER, a timeout, no answer at all) sends the same change again:
the controller may have committed it, and a member it adds must count in the high watermark
from the moment it may be in the committed ISR. The time is an input; the log is in memory.
"""

from __future__ import annotations

import pytest

from tests.memory_log import MemoryLog
from tests.storage_helpers import make_batch
from zlog.broker import worker_protocol as protocol
from zlog.broker.data.isr import IsrChange, IsrErrorAction, ReplicaSet, isr_error_action
from zlog.broker.data.isr_proposals import (
    ANSWER_TIMEOUT_MS,
    ISR_CHECK_INTERVAL_MS,
    REFUSED_BACKOFF_MS,
    IsrChangeMemory,
    IsrProposals,
)
from zlog.broker.data.partition import Partition
from zlog.errors import ErrorCode
from zlog.types import TopicPartition

TP = TopicPartition("t", 0)
LAG_MS = 10_000
EPOCH = 4
PE = 7


def _leader() -> Partition:
    """Leader 1 at 6 records (two batches), ISR {1, 2}; replica 3 caught up and outside."""
    log = MemoryLog()
    replicas = ReplicaSet(1, frozenset({1, 2, 3}), frozenset({1, 2}), 2, PE)
    partition = Partition("t", 0, log, leader_epoch=EPOCH, replicas=replicas)
    partition.start_term(now_ms=0)
    for tag in range(2):
        partition.produce([make_batch(tag)], acks=1)
    partition.note_replica_fetch(2, 6, now_ms=10, broker_epoch=20, log_start_offset=0)
    partition.note_replica_fetch(3, 6, now_ms=10, broker_epoch=30, log_start_offset=0)
    return partition


def _expansion(proposals: IsrProposals, now_ms: int) -> protocol.AlterIsr:
    (sent,) = proposals.due(now_ms)
    assert (sent.new_isr, sent.partition_epoch, dict(sent.member_epochs)) == (
        (1, 2, 3), PE, {2: 20, 3: 30})
    return sent


def _answer(sent: protocol.AlterIsr, code: ErrorCode) -> protocol.AlterIsrAnswer:
    return protocol.AlterIsrAnswer(sent.request_id, int(code), code.name)


@pytest.mark.parametrize(("code", "action"), [
    (ErrorCode.INELIGIBLE_REPLICA, IsrErrorAction.REVERT),
    (ErrorCode.OPERATION_NOT_ATTEMPTED, IsrErrorAction.REVERT),
    (ErrorCode.FENCED_LEADER_EPOCH, IsrErrorAction.WAIT),
    (ErrorCode.INVALID_UPDATE_VERSION, IsrErrorAction.WAIT),
    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, IsrErrorAction.WAIT),
    (ErrorCode.UNKNOWN_TOPIC_ID, IsrErrorAction.WAIT),
    (ErrorCode.INVALID_REQUEST, IsrErrorAction.WAIT),
    (ErrorCode.NEW_LEADER_ELECTED, IsrErrorAction.WAIT),
    (ErrorCode.NOT_CONTROLLER, IsrErrorAction.RETRY),
    (ErrorCode.REQUEST_TIMED_OUT, IsrErrorAction.RETRY),
    (ErrorCode.STALE_BROKER_EPOCH, IsrErrorAction.RETRY),
    (ErrorCode.BROKER_NOT_AVAILABLE, IsrErrorAction.RETRY),
    (ErrorCode.UNKNOWN_SERVER_ERROR, IsrErrorAction.RETRY),
])
def test_the_rule_for_each_answer(code: ErrorCode, action: IsrErrorAction) -> None:
    assert isr_error_action(code) == action


def test_an_answer_of_unknown_outcome_keeps_the_member_counted_and_sends_it_again() -> None:
    partition = _leader()
    proposals = IsrProposals({TP: partition}, lag_time_max_ms=LAG_MS)
    sent = _expansion(proposals, 1_000)
    proposals.answered(_answer(sent, ErrorCode.NOT_CONTROLLER))
    assert partition.isr_tracker.maximal_isr == {1, 2, 3}
    partition.produce([make_batch(2)], acks=1)
    partition.note_replica_fetch(2, 9, now_ms=1_100, broker_epoch=20, log_start_offset=0)
    assert partition.high_watermark == 6, "replica 3 may be in the ISR: the HW waits for it"
    assert proposals.due(1_000 + ISR_CHECK_INTERVAL_MS) == [], "after a pause"
    again = _expansion(proposals, 1_000 + REFUSED_BACKOFF_MS)
    assert again.request_id != sent.request_id

    unanswered = _expansion(proposals, 1_000 + REFUSED_BACKOFF_MS + ANSWER_TIMEOUT_MS)
    assert unanswered.request_id != again.request_id, "no answer within the timeout: again"
    assert partition.isr_tracker.maximal_isr == {1, 2, 3}
    proposals.answered(_answer(again, ErrorCode.NOT_CONTROLLER))  # stale: ignored
    assert proposals.due(1_000 + REFUSED_BACKOFF_MS + ANSWER_TIMEOUT_MS + 1) == []


def test_a_refusal_that_says_nothing_was_applied_gives_the_change_up() -> None:
    partition = _leader()
    proposals = IsrProposals({TP: partition}, lag_time_max_ms=LAG_MS)
    proposals.answered(_answer(_expansion(proposals, 1_000), ErrorCode.INELIGIBLE_REPLICA))
    assert partition.isr_tracker.pending is None
    assert partition.isr_tracker.maximal_isr == {1, 2}
    assert proposals.due(1_000 + REFUSED_BACKOFF_MS - 1) == []
    _expansion(proposals, 1_000 + REFUSED_BACKOFF_MS)  # computed afresh


def test_a_refusal_from_a_newer_record_waits_for_that_record() -> None:
    partition = _leader()
    proposals = IsrProposals({TP: partition}, lag_time_max_ms=LAG_MS)
    proposals.answered(_answer(_expansion(proposals, 1_000), ErrorCode.INVALID_UPDATE_VERSION))
    assert partition.isr_tracker.maximal_isr == {1, 2, 3}
    assert proposals.due(1_000 + REFUSED_BACKOFF_MS + ANSWER_TIMEOUT_MS) == [], "not re-sent"
    same = ReplicaSet(1, frozenset({1, 2, 3}), frozenset({1, 2}), 2, PE)
    partition.set_replicas(same)  # an assign repeating the record (a config change)
    assert partition.isr_tracker.maximal_isr == {1, 2, 3}, "the same record replaces nothing"
    committed = ReplicaSet(1, frozenset({1, 2, 3}), frozenset({1, 2, 3}), 2, PE + 1)
    partition.set_replicas(committed)
    assert partition.isr_tracker.pending is None
    assert partition.isr_tracker.replicas.isr == {1, 2, 3}


def test_a_restarted_leader_resumes_the_change_it_had_sent() -> None:
    """The change is stored before it is sent; a new process of the same leader (same leader
    epoch, same record) takes it back and sends it again, its member counted meanwhile. Once
    a newer record is applied, it is gone."""
    store = IsrChangeMemory()
    first = _leader()
    sent = _expansion(IsrProposals({TP: first}, lag_time_max_ms=LAG_MS, store=store), 1_000)
    assert store.load(TP) == IsrChange(EPOCH, PE, (1, 2, 3), ((2, 20), (3, 30)))

    restarted = Partition("t", 0, first.log, leader_epoch=EPOCH,
                          replicas=ReplicaSet(1, frozenset({1, 2, 3}), frozenset({1, 2}), 2, PE),
                          recovered_high_watermark=first.high_watermark)
    assert restarted.start_term(now_ms=5_000, stored_isr_change=store.load(TP))
    assert restarted.isr_tracker.maximal_isr == {1, 2, 3}
    restarted.produce([make_batch(2)], acks=1)
    restarted.note_replica_fetch(2, 9, now_ms=5_001, broker_epoch=20, log_start_offset=0)
    assert restarted.high_watermark == 6, "replica 3 may be in the ISR: the HW waits for it"
    proposals = IsrProposals({TP: restarted}, lag_time_max_ms=LAG_MS, store=store)
    again = _expansion(proposals, 5_000)
    assert again.leader_epoch == sent.leader_epoch

    restarted.set_replicas(ReplicaSet(1, frozenset({1, 2, 3}), frozenset({1, 2, 3}), 2, PE + 1))
    assert proposals.due(5_000 + ISR_CHECK_INTERVAL_MS) == []
    assert store.load(TP) is None


def test_a_change_from_another_record_or_epoch_is_not_resumed() -> None:
    partition = _leader()
    for stale in (IsrChange(EPOCH - 1, PE, (1, 2, 3), ((3, 30),)),
                  IsrChange(EPOCH, PE - 1, (1, 2, 3), ((3, 30),))):
        assert not partition.start_term(now_ms=0, stored_isr_change=stale)
        assert partition.isr_tracker.pending is None
