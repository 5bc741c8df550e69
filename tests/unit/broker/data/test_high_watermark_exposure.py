"""The high watermark as clients see it never goes back (docs/replication.md §2.3).

A replica reopened by a new process starts from the HW it had (the ring header's or the
checkpoint's), capped by its log end; a restarted leader keeps the start of its own epoch; a
new leader does not show its HW to clients until it reached the start of its epoch (KIP-207);
and the HW does not move while the committed ISR is smaller than the effective
min.insync.replicas (KIP-966).
"""

from __future__ import annotations

import pytest

from tests.memory_log import MemoryLog
from tests.storage_helpers import make_batch
from zlog.broker.data.epoch_cache import EpochEntry, LeaderEpochCache
from zlog.broker.data.isr import ReplicaSet
from zlog.broker.data.partition import Partition
from zlog.errors import ErrorCode, ZlogError
from zlog.types import LATEST_TIMESTAMP, MAX_TIMESTAMP

T0_MS = 1_700_000_000_000


def _log(epochs: list[int]) -> MemoryLog:
    """A log of one 3-record batch per entry, each stamped with that leader epoch."""
    log = MemoryLog()
    for tag, epoch in enumerate(epochs):
        log.append(make_batch(tag, timestamp_ms=T0_MS + tag), leader_epoch=epoch)
    return log


def _three(isr: frozenset[int], min_insync: int = 2) -> ReplicaSet:
    return ReplicaSet(1, frozenset({1, 2, 3}), isr, min_insync)


def _list_latest(partition: Partition) -> int | ErrorCode:
    try:
        return partition.list_offset(LATEST_TIMESTAMP)[0]
    except ZlogError as error:
        return error.code


def test_a_leader_reopened_at_its_epoch_keeps_its_high_watermark_and_epoch_start() -> None:
    """A leader worker killed and started again by its supervisor (same leader epoch) answers
    ListOffsets(LATEST) as before: its HW is the one it had published, not its log start, and
    its epoch started where its epoch cache says, not at its log end now."""
    log = _log([1, 1, 2, 2, 2])  # epoch 2 starts at offset 6; the log ends at 15
    epochs = LeaderEpochCache([EpochEntry(1, 0), EpochEntry(2, 6)])
    partition = Partition("t", 0, log, leader_epoch=2, replicas=_three(frozenset({1, 2, 3})),
                          epochs=epochs, recovered_high_watermark=12)
    partition.start_term(now_ms=0)
    assert partition.high_watermark == 12
    assert partition.isr_tracker.epoch_start_offset == 6
    assert _list_latest(partition) == 12
    assert log.published_high_watermark == 12


def test_a_reopened_replica_caps_the_recovered_high_watermark_at_its_log_end() -> None:
    follower = Partition("t", 0, _log([1, 1]), leader_epoch=1, is_leader=False,
                         replicas=_three(frozenset({1, 2, 3})), recovered_high_watermark=40)
    assert follower.high_watermark == 6
    unknown = Partition("t", 0, _log([1, 1]), leader_epoch=1, is_leader=False,
                        replicas=_three(frozenset({1, 2, 3})))
    assert unknown.high_watermark == 0, "nothing recovered: the log start"


def test_a_new_leader_shows_no_high_watermark_until_it_reaches_its_epoch_start() -> None:
    """A follower elected with HW 3 and log end 9 may sit below a HW its predecessor showed
    (up to 9): ListOffsets(LATEST) is OFFSET_NOT_AVAILABLE (retriable) and a consumer's fetch
    gets the records below 3 with no high watermark (-1), until its followers' fetches take
    its HW to 9."""
    partition = Partition("t", 0, _log([1, 1, 1]), leader_epoch=1, is_leader=False,
                          replicas=_three(frozenset({1, 2, 3})))
    partition.follow_high_watermark(3)
    partition.become(leader_epoch=2, is_leader=True, replicas=_three(frozenset({1, 2, 3})),
                     now_ms=0)
    assert partition.high_watermark == 3 and partition.isr_tracker.epoch_start_offset == 9
    assert _list_latest(partition) == ErrorCode.OFFSET_NOT_AVAILABLE
    read = partition.read(0, 1 << 20, replica_id=-1, at_least_one=True)
    assert read.error_code == ErrorCode.NONE and read.high_watermark == -1
    assert len(read.chunks) == 1, "records below the HW are served"
    at_hw = partition.read(3, 1 << 20, replica_id=-1, at_least_one=True)
    assert at_hw.high_watermark == -1 and not at_hw.chunks
    with pytest.raises(ZlogError) as caught:
        partition.list_offset(T0_MS + 2)  # no record that recent below the HW yet
    assert caught.value.code == ErrorCode.OFFSET_NOT_AVAILABLE
    assert partition.list_offset(T0_MS)[0] == 0, "a time found below the HW is answered"
    with pytest.raises(ZlogError) as caught:
        partition.list_offset(MAX_TIMESTAMP)  # a larger one may lie between the HW and 9
    assert caught.value.code == ErrorCode.OFFSET_NOT_AVAILABLE

    partition.note_replica_fetch(2, 9, now_ms=1, broker_epoch=5, log_start_offset=0)
    assert partition.high_watermark == 3, "replica 3 has not fetched yet"
    partition.note_replica_fetch(3, 9, now_ms=1, broker_epoch=6, log_start_offset=0)
    assert partition.high_watermark == 9
    assert _list_latest(partition) == 9
    assert partition.list_offset(MAX_TIMESTAMP) == (6, T0_MS + 2)
    assert partition.read(3, 1 << 20, replica_id=-1, at_least_one=True).high_watermark == 9


def test_the_high_watermark_stays_while_the_isr_is_below_min_insync_replicas() -> None:
    """KIP-966's strict rule: with a committed ISR smaller than min.insync.replicas nothing
    more becomes visible, acks=1 writes included; it moves once the ISR is big enough."""
    partition = Partition("t", 0, MemoryLog(), leader_epoch=1,
                          replicas=_three(frozenset({1})))
    partition.start_term(now_ms=0)
    outcome = partition.produce([make_batch(0)], acks=1)
    assert outcome.error_code == ErrorCode.NONE and outcome.committed_bytes == 0
    assert partition.high_watermark == 0
    partition.note_replica_fetch(2, 3, now_ms=1, broker_epoch=5, log_start_offset=0)
    assert partition.high_watermark == 0, "replica 2 is not in the committed ISR yet"
    assert partition.set_replicas(_three(frozenset({1, 2}))) > 0
    assert partition.high_watermark == 3


def test_min_insync_replicas_above_the_replica_count_does_not_freeze_the_hw() -> None:
    """The effective minimum is min(min.insync.replicas, replicas): a single replica with
    min.insync.replicas=2 refuses acks=all but still shows acks=1 writes."""
    partition = Partition("t", 0, MemoryLog(), leader_epoch=1,
                          replicas=ReplicaSet.single(1, min_insync_replicas=2))
    assert partition.produce([make_batch(0)], acks=-1).error_code == (
        ErrorCode.NOT_ENOUGH_REPLICAS)
    assert partition.produce([make_batch(0)], acks=1).committed_bytes > 0
    assert partition.high_watermark == 3
