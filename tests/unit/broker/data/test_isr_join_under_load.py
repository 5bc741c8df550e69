"""A follower outside the ISR rejoins while its leader takes writes without a pause
(docs/replication.md §2.3, §3; Kafka's Partition.maybeIncrementLeaderHW).

A loop over the pure rules, time as an input: leader 1 alone in the ISR (replication factor 2,
min.insync.replicas 1) appends a batch every millisecond; follower 2 fetches, the leader
answers half a round trip later with everything up to its log end, and the follower fetches
again as soon as the answer is applied. The leader's ISR check runs every 250 ms. A follower
joins once its log end reaches the HW; alone in the ISR, the leader's HW is its log end, which
moved on since the follower's last fetch whenever an append fell inside the round trip: with
an append every millisecond and a round trip of 4, always. So the HW also counts followers
outside the ISR that are caught up (they reached, within replica.lag.time.max.ms, where the
leader's log ended at their previous fetch): it waits for them, they reach it, and they join.
With appends further apart than the round trip, or in bursts (a producer's batching), the
follower sometimes finds the log end unchanged and joins anyway: why the same follower on
real processes, under 1,400 batches a second, rejoined within two seconds.
"""

from __future__ import annotations

import pytest

from tests.sim.replication.storage import SimLog
from tests.storage_helpers import make_batch
from zlog.broker.data.isr import ReplicaSet
from zlog.broker.data.partition import Partition
from zlog.broker.data.producer_state import ProducerStateTable
from zlog.broker.data.replica_sync import apply_replica_fetch, serve_replica_fetch
from zlog.errors import ErrorCode
from zlog.transport.messages.data import ReplicaFetchEntry

LAG_MS = 10_000
ISR_CHECK_MS = 250
ISR_CHECK_PHASE_MS = 123  # the check's clock is not the producer's
DURATION_MS = 5_000
FOLLOWER_EPOCH = 7


def _replicas(broker: int, isr: frozenset[int]) -> ReplicaSet:
    return ReplicaSet(broker, frozenset({1, 2}), isr, 1, 3)


def _joined_at(append_every_ms: int, round_trip_ms: int) -> int | None:
    """When the leader proposes the follower's return (ms), or None within DURATION_MS."""
    leader = Partition("t", 0, SimLog(1, 0, None), leader_epoch=1,
                       replicas=_replicas(1, frozenset({1})))
    leader.start_term(now_ms=0)
    follower = Partition("t", 0, SimLog(2, 0, None), leader_epoch=1, is_leader=False,
                         replicas=_replicas(2, frozenset({1})))
    tracker = leader.isr_tracker
    answer_at, answer, asked = -1, None, 0
    serve_at = 0  # the fetch in flight reaches the leader then
    for now_ms in range(DURATION_MS):
        if now_ms % append_every_ms == 0:
            outcome = leader.produce([make_batch(now_ms, 1)], acks=1)
            assert outcome.error_code == ErrorCode.NONE
        if now_ms == serve_at:
            asked = follower.log.log_end_offset
            entry = ReplicaFetchEntry("t", 0, asked, 1, follower.epochs.latest_epoch,
                                      follower.log.log_start_offset, 1 << 20)
            answer = serve_replica_fetch(leader, entry, replica_id=2,
                                         broker_epoch=FOLLOWER_EPOCH, now_ms=now_ms,
                                         limit_bytes=1 << 20).result
            answer_at = now_ms + round_trip_ms // 2
        if now_ms == answer_at and answer is not None:
            apply_replica_fetch(follower, answer, asked, ProducerStateTable)
            serve_at = now_ms + round_trip_ms - round_trip_ms // 2
        if now_ms % ISR_CHECK_MS == ISR_CHECK_PHASE_MS:
            proposal = tracker.next_proposal(now_ms, leader.log.log_end_offset, LAG_MS)
            if proposal == {1, 2}:
                return now_ms
    return None


@pytest.mark.parametrize(("append_every_ms", "round_trip_ms"), [(1, 4), (1, 2), (2, 6)])
def test_a_follower_rejoins_a_leader_that_appends_within_every_round_trip(
        append_every_ms: int, round_trip_ms: int) -> None:
    joined = _joined_at(append_every_ms, round_trip_ms)
    assert joined is not None, (
        f"an append every {append_every_ms} ms, a round trip of {round_trip_ms} ms: the "
        f"follower never rejoined in {DURATION_MS} ms")
    assert joined <= 2 * ISR_CHECK_MS


def test_a_follower_rejoins_a_leader_that_pauses_between_appends() -> None:
    """Appends far rarer than the round trip: between two, the follower holds the whole log
    and the first check that falls there lets it in."""
    joined = _joined_at(append_every_ms=50, round_trip_ms=4)
    assert joined is not None and joined <= ISR_CHECK_MS


def test_a_caught_up_follower_that_stops_fetching_holds_the_hw_for_the_lag_time_at_most() -> None:
    """The HW waits for a caught-up follower outside the ISR only while it is caught up: once
    it has not caught up for replica.lag.time.max.ms, the next ISR check stops waiting for it,
    and the HW moves on without another append or fetch (acks=all waits end then)."""
    leader = Partition("t", 0, SimLog(1, 0, None), leader_epoch=1,
                       replicas=_replicas(1, frozenset({1})))
    leader.start_term(now_ms=0)
    leader.produce([make_batch(0, 1)], acks=1)
    leader.note_replica_fetch(2, 0, now_ms=10, broker_epoch=FOLLOWER_EPOCH, log_start_offset=0)
    leader.note_replica_fetch(2, 1, now_ms=20, broker_epoch=FOLLOWER_EPOCH,
                              log_start_offset=0)  # caught up
    tracker = leader.isr_tracker
    assert tracker.next_proposal(30, 1, LAG_MS) == {1, 2}
    tracker.proposal_refused(tracker.replicas.partition_epoch)  # say it was refused
    waiting = leader.produce([make_batch(1, 1)], acks=-1)  # follower 2 stopped fetching
    assert leader.acks_status(waiting.required_offset) is None, "the HW waits for it"
    tracker.next_proposal(21 + LAG_MS, 2, LAG_MS)
    assert leader.refresh_high_watermark() > 0
    assert leader.acks_status(waiting.required_offset) == ErrorCode.NONE
