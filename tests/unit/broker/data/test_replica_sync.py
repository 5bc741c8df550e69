"""ISR replication between in-memory replicas: the leader's answer to a follower's fetch and the
follower's use of it (zlog/broker/data/replica_sync.py, isr.py).

Spec: docs/replication.md §2 (fetch rules, truncation by leader epoch) and §3 (ISR changes);
the two KIP-101 scenarios and the KIP-279 case are scripted as the KIPs tell them.
"""

from __future__ import annotations

import pytest

from tests.memory_log import MemoryLog
from tests.storage_helpers import make_batch
from zlog.broker.data.isr import ReplicaSet
from zlog.broker.data.partition import Partition
from zlog.broker.data.producer_state import ProducerStateTable
from zlog.broker.data.replica_sync import (
    apply_replica_fetch,
    reset_out_of_range,
    serve_replica_fetch,
)
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.data import (
    ReplicaFetchEntry,
    ReplicaFetchResult,
)

BROKERS = (1, 2, 3)


class Replica:
    """One broker's copy of partition t-0."""

    def __init__(self, broker: int, *, min_insync: int = 1) -> None:
        self.broker = broker
        self.log = MemoryLog()
        self.min_insync = min_insync
        self.partition_epoch = 0  # each `become` applies a newer record
        self.partition = Partition("t", 0, self.log, leader_epoch=0, is_leader=False,
                                   replicas=self._set(BROKERS))

    def _set(self, isr: tuple[int, ...]) -> ReplicaSet:
        return ReplicaSet(self.broker, frozenset(BROKERS), frozenset(isr), self.min_insync,
                          self.partition_epoch)

    def become(self, leader: int, epoch: int, isr: tuple[int, ...] = BROKERS,
               now_ms: int = 0) -> None:
        self.partition_epoch += 1
        self.partition.become(leader_epoch=epoch, is_leader=leader == self.broker,
                              replicas=self._set(isr), now_ms=now_ms)

    def produce(self, count: int = 1, acks: int = 1) -> int:
        outcome = self.partition.produce([make_batch(self.log.log_end_offset, count)], acks)
        assert outcome.error_code == ErrorCode.NONE, outcome
        return outcome.required_offset

    @property
    def end(self) -> int:
        return self.log.log_end_offset

    def batches(self) -> list[bytes]:
        return self.log.batch_bytes()


def fetch(follower: Replica, leader: Replica, now_ms: int = 0, limit_bytes: int = 1 << 20
          ) -> ErrorCode:
    """One follower fetch against the leader and its application; the answer's code.
    `limit_bytes=1` takes one batch per fetch."""
    part = follower.partition
    entry = ReplicaFetchEntry("t", 0, follower.end, part.leader_epoch,
                              part.epochs.latest_epoch, follower.log.log_start_offset,
                              limit_bytes)
    read = serve_replica_fetch(leader.partition, entry, replica_id=follower.broker,
                               broker_epoch=7, now_ms=now_ms, limit_bytes=limit_bytes)
    if read.result.error_code == ErrorCode.NONE:
        apply_replica_fetch(part, read.result, entry.fetch_offset, ProducerStateTable)
    return ErrorCode(read.result.error_code)


def sync(leader: Replica, *followers: Replica, now_ms: int = 0) -> None:
    """Fetch until nothing changes (twice more than needed is harmless)."""
    for _ in range(4):
        for follower in followers:
            fetch(follower, leader, now_ms)


def three(min_insync: int = 1) -> tuple[Replica, Replica, Replica]:
    a, b, c = (Replica(broker, min_insync=min_insync) for broker in BROKERS)
    for replica in (a, b, c):
        replica.become(1, 0)
    return a, b, c


def test_followers_copy_the_leader_byte_for_byte_and_move_the_high_watermark() -> None:
    a, b, c = three()
    a.produce(3)
    a.produce(2)
    assert a.partition.high_watermark == 0  # nobody fetched yet
    fetch(b, a)
    assert a.partition.high_watermark == 0  # b fetched at 0: it holds nothing yet
    sync(a, b, c)
    assert b.batches() == c.batches() == a.batches()
    assert a.partition.high_watermark == 5
    assert b.partition.high_watermark == c.partition.high_watermark == 5


def test_acks_all_waits_for_every_isr_member() -> None:
    a, b, c = three(min_insync=2)
    required = a.produce(2, acks=-1)
    assert a.partition.acks_status(required) is None
    fetch(b, a)
    fetch(b, a)
    assert a.partition.acks_status(required) is None  # c has not fetched it yet
    fetch(c, a)
    fetch(c, a)
    assert a.partition.acks_status(required) == ErrorCode.NONE


def test_stale_and_unknown_epochs_are_refused_and_change_nothing() -> None:
    a, b, _c = three()
    a.produce()
    a.become(1, 1)
    assert fetch(b, a) == ErrorCode.FENCED_LEADER_EPOCH  # b still thinks epoch 0
    b.become(1, 2)
    assert fetch(b, a) == ErrorCode.UNKNOWN_LEADER_EPOCH  # b is ahead of this leader
    assert b.end == 0 and a.partition.high_watermark == 0


def test_kip_101_scenario_1_a_restarted_follower_keeps_an_acknowledged_batch() -> None:
    """A leads epoch 0, B follows; B fetched m1 and m2 and A acknowledged m2, but B's own HW
    is one behind. B restarts: it does not cut to its HW (the old rule lost m2); asking the
    leader's end for epoch 0 keeps both. A dies, B is elected holding m2."""
    a, b, c = three()
    a.produce()
    a.produce()
    fetch(b, a)
    fetch(b, a)
    fetch(c, a)
    fetch(c, a)
    assert a.partition.high_watermark == 2
    b.become(1, 0)  # a restart: same epoch, same leader, fetch state from the log
    fetch(b, a)
    assert b.end == 2
    b.become(2, 1, isr=(2, 3))
    assert b.batches()[:2] == a.batches()


def test_kip_101_scenario_2_a_divergent_tail_is_cut_at_the_leaders_epoch_end() -> None:
    """A has m1@0, m2@1 (epoch 0); B has only m1. B becomes leader (epoch 1) and appends m3@1.
    A follows again: its epoch 0 ends at 1 in B's log, so A cuts m2 and fetches m3."""
    a, b, _c = three()
    a.produce()
    fetch(b, a)
    fetch(b, a)
    a.produce()  # m2, never fetched by B
    b.become(2, 1, isr=(2,))
    a.become(2, 1, isr=(2,))
    b.produce()  # m3 at offset 1, epoch 1
    assert fetch(a, b) == ErrorCode.NONE  # answers "diverging at epoch 0, ending at 1"
    assert a.end == 1
    fetch(a, b)
    assert a.batches() == b.batches()


def test_the_kip_279_case_keeps_the_logs_the_same() -> None:
    """A,B,C at epoch 1: A has 0..4, B 0..2, C 0..4. B leads epoch 2 and appends 3..5 before C
    fetches; B dies; C leads epoch 3 (recording (3, 5) at election) and appends from 5. B
    returns as C's follower: C answers (1, 5), B's own end for epoch 1 is 3, so B cuts at 3
    and refetches from C. (KIP-101 alone would have cut at 5 and kept a divergent 3..4.)"""
    a, b, c = three()
    a.become(1, 1)
    b.become(1, 1)
    c.become(1, 1)
    for _ in range(5):
        a.produce()
    for _ in range(3):
        fetch(b, a, limit_bytes=1)
    assert b.end == 3
    sync(a, c)
    assert c.end == 5
    b.become(2, 2, isr=(2, 3))
    for _ in range(3):
        b.produce()  # offsets 3, 4, 5 in epoch 2: never reach C
    c.become(3, 3, isr=(3,))
    c.produce()  # offset 5 in epoch 3
    b.become(3, 3, isr=(3,))
    fetch(b, c)
    assert b.end == 3
    sync(c, b)
    assert b.batches() == c.batches()


def test_a_follower_behind_the_log_start_is_told_so() -> None:
    a, b, _c = three()
    a.produce(3)
    a.log.truncate_fully_and_start_at(10)  # as if retention took everything
    assert fetch(b, a) == ErrorCode.OFFSET_OUT_OF_RANGE


def test_a_stalled_follower_leaves_the_isr_and_rejoins_once_caught_up() -> None:
    a, b, c = three()
    for replica in (a, b, c):
        replica.become(1, 1, now_ms=0)
    a.produce(2)
    sync(a, b, c, now_ms=100)
    tracker = a.partition.isr_tracker
    assert tracker.next_proposal(200, a.end, 10_000) is None
    a.produce()
    fetch(b, a, now_ms=300)
    fetch(b, a, now_ms=300)  # b caught up; c stalls
    proposal = tracker.next_proposal(10_500, a.end, 10_000)
    assert proposal == frozenset({1, 2})
    tracker.propose(proposal, 10_500)
    assert tracker.next_proposal(10_600, a.end, 10_000) is None  # one change at a time
    a.become(1, 1, isr=(1, 2))  # the controller committed the shrink
    sync(a, c, now_ms=11_000)
    assert tracker.next_proposal(11_000, a.end, 10_000) == frozenset({1, 2, 3})


def test_a_follower_is_not_let_in_below_the_leaders_epoch_start() -> None:
    """B12: a new leader with an uncommitted tail must not admit a follower that lacks it."""
    a, b, c = three()
    a.produce(2)
    sync(a, b, c)
    a.produce(3)  # a's tail: 2..4, on a only
    for replica in (a, b, c):
        replica.become(1, 1, isr=(1,))  # a new epoch with b and c out of the ISR
    tracker = a.partition.isr_tracker
    assert tracker.epoch_start_offset == 5
    tracker.note_follower(2, 2, 0, a.end)  # b at the old HW (2), below the epoch start
    assert tracker.ready_to_join() == frozenset()
    fetch(b, a)
    fetch(b, a)
    assert tracker.ready_to_join() == frozenset({2})


def test_a_fetch_for_another_topic_id_is_refused_and_changes_nothing() -> None:
    """A follower's replica of a topic deleted and created again under the same name names the
    old topic id: the leader answers UNKNOWN_TOPIC_ID (retriable: the follower backs off until
    its own broker's metadata catches up), takes no position and sends no batch (KIP-516)."""
    a, b, _c = three()
    a.partition.topic_id, b.partition.topic_id = "a" * 32, "b" * 32
    a.produce(3)
    entry = ReplicaFetchEntry("t", 0, 0, 0, -1, 0, 1 << 20, topic_id=b.partition.topic_id)
    read = serve_replica_fetch(a.partition, entry, replica_id=2, broker_epoch=7, now_ms=0,
                               limit_bytes=1 << 20)
    assert read.result.error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert not read.result.chunks and a.partition.isr_tracker.followers[2].log_end_offset < 0
    same = ReplicaFetchEntry("t", 0, 0, 0, -1, 0, 1 << 20, topic_id=a.partition.topic_id)
    assert serve_replica_fetch(a.partition, same, replica_id=2, broker_epoch=7, now_ms=0,
                               limit_bytes=1 << 20).result.chunks


def test_an_epoch_the_leader_cannot_place_is_never_read_as_no_divergence() -> None:
    """The follower's last epoch is newer than any the leader's cache knows (its cache lost
    the entry of its own epoch): the leader cannot say where that epoch ends. That answer must
    not pass for "no divergence", which would keep the follower's tail beside the leader's
    batches and hand it the leader's HW over it: the follower backs off and asks again, its
    log and HW untouched (KIP-101's rule: never fall back)."""
    a, b, _c = three()
    a.produce(2)
    sync(a, b)
    b.become(2, 1)  # b leads epoch 1 and takes a batch nobody copies
    a.become(2, 1)
    b.produce(1)
    a.become(1, 2)  # a leads epoch 2; b follows
    b.become(1, 2)
    a.partition.epochs.truncate_from_end(2)  # a's cache lost its epoch-2 entry
    a.partition.epochs.truncate_from_end(1)
    assert a.partition.epochs.latest_epoch == 0 and b.partition.epochs.latest_epoch == 1
    tail, high_watermark = b.batches(), b.partition.high_watermark
    code = fetch(b, a)
    assert code != ErrorCode.NONE and ErrorCode(code).name == "UNKNOWN_LEADER_EPOCH"
    assert b.batches() == tail and b.partition.high_watermark == high_watermark


def test_a_divergence_answer_with_an_undefined_epoch_is_refused_by_the_follower() -> None:
    """Whatever a leader sends, a diverging answer that names no epoch is no cut point and no
    "no divergence" either: the follower drops it (and backs off)."""
    _a, b, _c = three()
    b.partition.become(leader_epoch=0, is_leader=False, replicas=b.partition.replicas,
                       now_ms=0)
    for epoch, end in ((-1, 5), (0, -1)):
        result = ReplicaFetchResult("t", 0, 0, 0, 0, 0, 5, diverging_epoch=epoch,
                                    diverging_end_offset=end)
        with pytest.raises(ZlogError) as refused:
            apply_replica_fetch(b.partition, result, 0, ProducerStateTable)
        assert refused.value.code == ErrorCode.UNKNOWN_LEADER_EPOCH


def _diverged_below_the_leaders_log_start() -> tuple[Replica, Replica]:
    """A led epoch 1 and holds 0..13, its 13 never fetched; B leads epoch 2 from 13 and writes
    13 and 14, then retention moves B's log start to 14: B's epoch cache starts there, at
    epoch 2, and no longer says that epoch 2 began at 13. A follows B."""
    a, b, c = three()
    for replica in (a, b, c):
        replica.become(1, 1)
    for _ in range(13):
        a.produce()
    sync(a, b, c)
    a.produce()  # offset 13, epoch 1: only A holds it
    b.become(2, 2, isr=(2, 3))
    c.become(2, 2, isr=(2, 3))
    b.produce()
    b.produce()  # offsets 13 and 14, epoch 2
    sync(b, c)
    b.log.batches = b.log.batches[14:]  # retention: whole batches from the front
    b.log.log_start_offset = 14
    b.partition.log_start_moved()
    a.become(2, 2, isr=(2, 3))
    return a, b


def test_a_follower_whose_last_epoch_the_leaders_log_no_longer_holds_is_out_of_range() -> None:
    """A's last epoch (1) is older than any B's log still holds: B cannot tell where it ended,
    and a 'no divergence' answer would let A fetch on past its divergent 13."""
    a, b = _diverged_below_the_leaders_log_start()
    assert fetch(a, b) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert a.end == 14 and b.end == 15  # nothing fetched


def test_a_follower_out_of_range_inside_the_leaders_log_starts_over_at_its_start() -> None:
    a, b = _diverged_below_the_leaders_log_start()
    part = a.partition
    entry = ReplicaFetchEntry("t", 0, a.end, part.leader_epoch, part.epochs.latest_epoch,
                              a.log.log_start_offset, 1 << 20)
    read = serve_replica_fetch(b.partition, entry, replica_id=1, broker_epoch=7, now_ms=0,
                               limit_bytes=1 << 20)
    assert reset_out_of_range(part, read.result, a.end, ProducerStateTable) == "started over"
    assert (a.log.log_start_offset, a.end) == (14, 14)
    sync(b, a)
    assert a.batches() == b.batches()



def test_a_followers_log_start_follows_the_leaders_and_the_next_leader_keeps_it() -> None:
    """Records deleted on the leader (DeleteRecords) go from its followers with their next
    fetch, the epoch cache trimmed with them: the replica that leads next neither serves nor
    lists them."""
    a, b, c = three()
    a.produce(4)
    a.produce(4)
    sync(a, b, c)
    assert a.partition.delete_records(6) == 6
    sync(a, b, c)
    for follower in (b, c):
        assert follower.log.log_start_offset == 6
        assert follower.partition.epochs.entries[0].start_offset == 6
    for replica in (a, b, c):
        replica.become(2, 1)
    sync(b, a, c)
    assert b.partition.list_offset(-2) == (6, -1)
    read = b.partition.read(5, 1 << 20, replica_id=-1, at_least_one=True)
    assert read.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert read.log_start_offset == 6


def test_a_followers_log_start_never_passes_its_own_high_watermark() -> None:
    """What lies above a follower's HW may not be committed: a leader's log start above it
    (it cannot be, from a leader that keeps its own below its HW) moves it only that far."""
    _a, b, _c = three()
    b.log.append_replicated(make_batch(0, 12))
    result = ReplicaFetchResult("t", 0, 0, 0, high_watermark=8, log_start_offset=12,
                                log_end_offset=12)
    apply_replica_fetch(b.partition, result, 12, ProducerStateTable)
    assert b.partition.high_watermark == 8
    assert b.log.log_start_offset == 8


def test_a_follower_joins_the_isr_only_once_its_log_start_reached_the_leaders() -> None:
    """B30: records deleted while a follower was out of the ISR (the answer did not wait for
    it) must be gone from it before it may lead: it joins once a fetch reported its log start
    at the leader's, which the answer to its previous fetch brought it to."""
    a, b, c = three()
    a.produce(4)
    sync(a, b, c)
    for replica in (a, b, c):
        replica.become(1, 1, isr=(1, 2))  # c left the ISR
    a.produce(2)
    sync(a, b, c)  # c holds [0, 6) too, outside the ISR
    assert a.partition.delete_records(5) == 5
    sync(a, b)
    assert a.partition.low_watermark == 5  # c is not waited for
    tracker = a.partition.isr_tracker
    part = c.partition
    entry = ReplicaFetchEntry("t", 0, c.end, part.leader_epoch, part.epochs.latest_epoch,
                              c.log.log_start_offset, 1 << 20)
    read = serve_replica_fetch(a.partition, entry, replica_id=3, broker_epoch=7, now_ms=0,
                               limit_bytes=1 << 20)  # c fetches; its answer is lost
    assert read.result.error_code == ErrorCode.NONE
    assert tracker.ready_to_join(a.log.log_start_offset) == frozenset()  # it reported 0
    fetch(c, a)  # the answer arrives: c's log start follows a's
    assert c.log.log_start_offset == 5
    assert tracker.ready_to_join(a.log.log_start_offset) == frozenset()  # not reported yet
    fetch(c, a)
    assert tracker.ready_to_join(a.log.log_start_offset) == frozenset({3})
