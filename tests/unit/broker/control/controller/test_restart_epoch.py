"""A broker that registers as a new process before its session expires.

Regression 1: a leader alone in its ISR kept leading in the same leader epoch. After a power
loss the new process no longer held the tail it had written in that epoch and wrote other
batches at those offsets, stamped with the same epoch; a follower that had copied the old
tail fetched with that epoch, found the leader's log agreeing up to its own end, and never
truncated: two replicas held different batches at the same offset for good. It now leads
again only through a new election, so the follower's epoch ends where the restarted
leader's log does.

Regression 2: a round decided before the registration committed after it. Its ISR join had
been checked against the broker epoch of the process that died, and the partition record
had not moved, so the new process, which the leader never saw fetch and which may have lost
its unflushed tail, joined the ISR. Every partition the broker replicates now gets a new
partition epoch at its registration, and the stale round is refused.
"""

from __future__ import annotations

import pytest

from tests.unit.broker.control.metadata_helpers import apply_command
from zlog.broker.control.controller.decisions import (
    IsrRequest,
    RoundInput,
    decide,
    restarted,
)
from zlog.broker.control.metadata.commands import (
    ClusterChange,
    CreateTopic,
    PartitionChange,
    RegisterBroker,
)
from zlog.broker.control.metadata.state import PartitionInfo
from zlog.broker.control.metadata.state_machine import MetadataStateMachine
from zlog.broker.data.epoch_cache import LeaderEpochCache
from zlog.errors import ErrorCode, ZlogError
from zlog.types import NO_LEADER


def _register(fsm: MetadataStateMachine, node: int, incarnation: str) -> None:
    apply_command(fsm, RegisterBroker(node, f"h{node}", f"tcp://h{node}:7400", "c",
                               incarnation_id=incarnation))


def _p0(fsm: MetadataStateMachine) -> PartitionInfo:
    found = fsm.state.partition("t", 0)
    assert found is not None
    return found


def _leader_alone_in_the_isr() -> MetadataStateMachine:
    """Broker 1 leads t-0 (replicas 1, 2, 3) with an ISR of itself only."""
    fsm = MetadataStateMachine()
    for node in (1, 2, 3):
        _register(fsm, node, f"i{node}")
    apply_command(fsm, CreateTopic("t", 1, 3, {}, ((1, 2, 3),)))
    p0 = _p0(fsm)
    apply_command(fsm, ClusterChange((), (PartitionChange("t", 0, p0.partition_epoch, 1,
                                                   p0.leader_epoch, (1,)),)))
    return fsm


def test_a_restarted_leader_alone_in_the_isr_loses_its_epoch() -> None:
    fsm = _leader_alone_in_the_isr()
    epoch = _p0(fsm).leader_epoch
    _register(fsm, 1, "i1-after-power-loss")
    p0 = _p0(fsm)
    assert (p0.leader, p0.isr, p0.leader_epoch) == (NO_LEADER, (1,), epoch + 1)
    outcome = decide(fsm.state, RoundInput())
    apply_command(fsm, outcome.change)
    p0 = _p0(fsm)
    assert (p0.leader, p0.isr, p0.leader_epoch) == (1, (1,), epoch + 2)


def test_the_same_incarnation_registering_again_keeps_its_leadership() -> None:
    fsm = _leader_alone_in_the_isr()
    before = _p0(fsm)
    _register(fsm, 1, "i1")
    assert _p0(fsm) == before


def test_a_restart_gives_each_partition_of_the_broker_a_new_partition_epoch() -> None:
    fsm = _leader_alone_in_the_isr()
    before = _p0(fsm)
    (change,) = restarted(fsm.state, 2)  # not in the ISR, leads nothing
    assert (change.leader, change.leader_epoch, change.isr) == (1, before.leader_epoch, (1,))
    _register(fsm, 2, "i2-again")
    after = _p0(fsm)
    assert after.partition_epoch == before.partition_epoch + 1
    assert (after.leader, after.leader_epoch, after.isr) == (1, before.leader_epoch, (1,))


def test_an_isr_join_decided_before_the_members_restart_is_refused() -> None:
    fsm = _leader_alone_in_the_isr()
    p0 = _p0(fsm)
    seen = fsm.state.brokers[2].broker_epoch  # the epoch broker 2 fetched with
    outcome = decide(fsm.state, RoundInput(isr_requests=(IsrRequest(
        1, fsm.state.brokers[1].broker_epoch, "t", 0, p0.leader_epoch, p0.partition_epoch,
        (1, 2), {2: seen}),)))
    assert outcome.answers == (None,)
    _register(fsm, 2, "i2-after-power-loss")  # committed while the round was in flight
    with pytest.raises(ZlogError) as refused:
        apply_command(fsm, outcome.change)
    assert refused.value.code == ErrorCode.INVALID_UPDATE_VERSION
    assert _p0(fsm).isr == (1,)


def test_a_follower_with_the_lost_tail_truncates_once_the_epoch_changed() -> None:
    """What the new epoch buys: the leader's cache ends the old epoch where its log now ends,
    so the follower's fetch with that epoch is told to cut there."""
    restarted_leader = LeaderEpochCache()
    restarted_leader.assign(0, 0)
    restarted_leader.assign(2, 25)  # re-elected at its log end after losing [25, 26)
    assert restarted_leader.end_offset_for(0, 30) == (0, 25)  # the follower holds 26: cut
