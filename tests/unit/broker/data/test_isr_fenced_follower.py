"""A follower whose broker the controller fenced holds no leader's high watermark back
(docs/replication.md §2.3; Kafka's Partition.maybeIncrementLeaderHW, whose wait for
caught-up followers outside the ISR is only for ISR-eligible ones, KIP-841).

The HW waits for followers outside the ISR that were caught up at the last ISR check, so
that one chasing a busy leader can rejoin. A follower that was killed was caught up a moment
ago too: once the controller has fenced its broker and taken it out of the ISR, waiting for it
until `replica_lag_time_max_ms` ran out would stall every acks=all write that long. The
leader's assign names the replicas whose brokers are fenced or shutting down (`ineligible`):
the HW does not wait for them and they are not proposed to join.
"""

from __future__ import annotations

from tests.memory_log import MemoryLog
from tests.storage_helpers import make_batch
from zlog.broker.data.isr import ReplicaSet
from zlog.broker.data.partition import Partition
from zlog.errors import ErrorCode

LAG_MS = 10_000


def _replicas(isr: set[int], partition_epoch: int,
              ineligible: frozenset[int] = frozenset()) -> ReplicaSet:
    return ReplicaSet(1, frozenset({1, 2, 3}), frozenset(isr), 1, partition_epoch,
                      ineligible=ineligible)


def _leader_with_followers_at_the_end() -> Partition:
    leader = Partition("t", 0, MemoryLog(), leader_epoch=1, replicas=_replicas({1, 2, 3}, 0))
    leader.start_term(now_ms=0)
    assert leader.produce([make_batch(0, 1)], acks=1).error_code == ErrorCode.NONE
    for follower in (2, 3):
        leader.note_replica_fetch(follower, 1, now_ms=10, broker_epoch=5, log_start_offset=0)
    assert leader.high_watermark == 1
    leader.isr_tracker.next_proposal(20, leader.log.log_end_offset, LAG_MS)  # an ISR check
    return leader


def test_a_fenced_follower_out_of_the_isr_holds_the_high_watermark_back_no_longer() -> None:
    leader = _leader_with_followers_at_the_end()
    # Broker 3 is killed; the controller fences it and takes it out of the ISR.
    leader.set_replicas(_replicas({1, 2}, 1, ineligible=frozenset({3})))
    leader.isr_tracker.next_proposal(30, leader.log.log_end_offset, LAG_MS)
    assert leader.produce([make_batch(1, 1)], acks=-1).error_code == ErrorCode.NONE
    leader.note_replica_fetch(2, 2, now_ms=40, broker_epoch=5, log_start_offset=0)
    assert leader.high_watermark == 2, "the HW waited for the fenced broker 3"
    assert leader.isr_tracker.next_proposal(50, leader.log.log_end_offset, LAG_MS) is None


def test_an_eligible_follower_out_of_the_isr_is_still_waited_for() -> None:
    """The same follower, out of the ISR but not fenced (a shrink for lag): the HW waits for
    it while it is caught up, so it can rejoin a busy leader."""
    leader = _leader_with_followers_at_the_end()
    leader.set_replicas(_replicas({1, 2}, 1))
    leader.isr_tracker.next_proposal(30, leader.log.log_end_offset, LAG_MS)
    assert leader.produce([make_batch(1, 1)], acks=-1).error_code == ErrorCode.NONE
    leader.note_replica_fetch(2, 2, now_ms=40, broker_epoch=5, log_start_offset=0)
    assert leader.high_watermark == 1
    leader.note_replica_fetch(3, 2, now_ms=45, broker_epoch=5, log_start_offset=0)
    assert leader.high_watermark == 2
