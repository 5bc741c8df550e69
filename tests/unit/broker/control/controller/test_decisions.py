"""The controller's decisions (zlog/broker/control/controller/decisions.py), applied by the
metadata log.

Spec: docs/replication.md §4 (fencing, elections from the ISR only, the last ISR member kept,
controlled shutdown, AlterPartition's checks in Kafka's order).
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.unit.broker.control.metadata_helpers import apply_command
from zlog.broker.control.controller.decisions import (
    IsrRequest,
    Liveness,
    RoundInput,
    checked_isr_request,
    decide,
    shutdown_ready,
)
from zlog.broker.control.metadata.commands import (
    CreateTopic,
    RegisterBroker,
)
from zlog.broker.control.metadata.state import ClusterState, PartitionInfo
from zlog.broker.control.metadata.state_machine import MetadataStateMachine
from zlog.errors import ErrorCode, ZlogError


def _cluster(brokers: int = 3, workers: int = 2) -> MetadataStateMachine:
    fsm = MetadataStateMachine()
    for node in range(1, brokers + 1):
        apply_command(fsm, RegisterBroker(node, f"h{node}", f"tcp://h{node}:7400", "c",
                                   incarnation_id=f"i{node}", workers=workers))
    apply_command(fsm, CreateTopic("t", 3, 3, {}, ((1, 2, 3), (2, 3, 1), (3, 1, 2))))
    return fsm


def _partition(state: ClusterState, index: int) -> PartitionInfo:
    found = state.partition("t", index)
    assert found is not None
    return found


def _round(fsm: MetadataStateMachine, round_input: RoundInput) -> tuple[ZlogError | None, ...]:
    outcome = decide(fsm.state, round_input)
    if not outcome.empty:
        apply_command(fsm, outcome.change)
    return outcome.answers


def test_new_replicas_are_spread_over_each_brokers_workers() -> None:
    state = _cluster().state
    assert [_partition(state, i).replica_workers for i in range(3)] == [
        (0, 0, 0), (1, 1, 1), (0, 0, 0)]  # the third goes to the lowest of two equals


def test_a_fenced_leader_is_replaced_from_the_isr_in_replica_order() -> None:
    fsm = _cluster()
    _round(fsm, RoundInput(expired=frozenset({1})))
    state = fsm.state
    assert state.brokers[1].fenced
    p0 = _partition(state, 0)
    assert (p0.leader, p0.isr, p0.leader_epoch, p0.partition_epoch) == (2, (2, 3), 1, 1)
    p1 = _partition(state, 1)  # led by 2: only loses 1 from its ISR, same leader epoch
    assert (p1.leader, p1.isr, p1.leader_epoch) == (2, (2, 3), 0)
    assert decide(state, RoundInput(expired=frozenset({1}))).empty  # settled: no new change


def test_the_last_isr_member_is_kept_and_the_partition_waits_for_it() -> None:
    fsm = _cluster()
    _round(fsm, RoundInput(expired=frozenset({1, 2})))
    _round(fsm, RoundInput(expired=frozenset({3})))
    p0 = _partition(fsm.state, 0)
    assert (p0.leader, p0.isr) == (-1, (3,))
    _round(fsm, RoundInput(heard_from=frozenset({1})))  # not in the ISR: no unclean election
    assert _partition(fsm.state, 0).leader == -1
    _round(fsm, RoundInput(heard_from=frozenset({3})))
    p0 = _partition(fsm.state, 0)
    assert (p0.leader, p0.isr, p0.leader_epoch) == (3, (3,), 3)


def test_an_unclean_topic_takes_a_live_replica_outside_the_isr_when_none_inside_is() -> None:
    """unclean.leader.election.enable: the ISR's last member is down, another replica is up:
    that replica leads alone in a new ISR and a new epoch. Without it the partition waits."""
    fsm = _cluster()
    _round(fsm, RoundInput(expired=frozenset({1, 2})))
    _round(fsm, RoundInput(expired=frozenset({3})))
    assert (_partition(fsm.state, 0).leader, _partition(fsm.state, 0).isr) == (-1, (3,))
    epoch = _partition(fsm.state, 0).leader_epoch
    _round(fsm, RoundInput(heard_from=frozenset({1}), unclean_topics=frozenset({"t"})))
    p0 = _partition(fsm.state, 0)
    assert (p0.leader, p0.isr, p0.leader_epoch) == (1, (1,), epoch + 1)
    assert decide(fsm.state, RoundInput(unclean_topics=frozenset({"t"}))).empty


def test_a_controlled_shutdown_moves_leadership_but_a_sole_replica_keeps_leading() -> None:
    fsm = MetadataStateMachine()
    for node in (1, 2):
        apply_command(fsm, RegisterBroker(node, "h", f"tcp://h{node}:7400", "c", workers=1))
    apply_command(fsm, CreateTopic("t", 2, 1, {}, ((1,), (2,))))
    apply_command(fsm, CreateTopic("r", 1, 2, {}, ((1, 2),)))
    _round(fsm, RoundInput(shutting_down=frozenset({1})))
    state = fsm.state
    assert state.brokers[1].shutting_down
    assert _partition(state, 0).leader == 1  # replication factor 1: nobody else can lead
    replicated = state.partition("r", 0)
    assert replicated is not None and (replicated.leader, replicated.isr) == (2, (2,))
    assert shutdown_ready(state, 1)


def test_isr_requests_are_checked_in_kafkas_order() -> None:
    fsm = _cluster()
    _round(fsm, RoundInput(expired=frozenset({3})))
    state = fsm.state
    p0 = _partition(state, 0)  # leader 1, ISR (1, 2) at partition epoch 1
    epoch = state.brokers[1].broker_epoch

    def ask(**changes: object) -> ZlogError | None:
        request = dataclasses.replace(
            IsrRequest(1, epoch, "t", 0, p0.leader_epoch, p0.partition_epoch, (1,)), **changes)
        return decide(state, RoundInput(isr_requests=(request,))).answers[0]

    def code(error: ZlogError | None) -> ErrorCode:
        return ErrorCode.NONE if error is None else error.code

    assert code(ask(broker_epoch=epoch + 7)) == ErrorCode.STALE_BROKER_EPOCH
    assert code(ask(partition=9)) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert code(ask(partition_epoch=p0.partition_epoch + 1)) == ErrorCode.NOT_CONTROLLER
    assert code(ask(node_id=2, broker_epoch=state.brokers[2].broker_epoch)) == \
        ErrorCode.INVALID_REQUEST
    assert code(ask(partition_epoch=0)) == ErrorCode.INVALID_UPDATE_VERSION
    assert code(ask(new_isr=(3,))) == ErrorCode.INVALID_REQUEST  # without the leader and 2
    assert code(ask(new_isr=(1, 1))) == ErrorCode.INVALID_REQUEST
    assert code(ask(new_isr=(1, 2, 3))) == ErrorCode.INELIGIBLE_REPLICA  # 3 is fenced
    assert code(ask()) == ErrorCode.NONE
    answers = _round(fsm, RoundInput(isr_requests=(IsrRequest(
        1, epoch, "t", 0, p0.leader_epoch, p0.partition_epoch, (1,)),)))
    assert answers == (None,)
    p0 = _partition(fsm.state, 0)
    assert (p0.isr, p0.partition_epoch, p0.leader_epoch) == ((1,), 2, 0)


def test_a_leader_that_cannot_write_resigns_to_an_in_sync_replica() -> None:
    """The ISR without the leader is a resignation (a full disk): the first usable member
    left leads in a new epoch, the old leader leaves the ISR; refused when nobody usable is
    left, and when anything else is dropped with it."""
    fsm = _cluster()
    state = fsm.state
    p0 = _partition(state, 0)  # leader 1, ISR (1, 2, 3)
    epoch = state.brokers[1].broker_epoch

    def resign(new_isr: tuple[int, ...]) -> IsrRequest:
        p0 = _partition(fsm.state, 0)
        return IsrRequest(p0.leader, fsm.state.brokers[p0.leader].broker_epoch, "t", 0,
                          p0.leader_epoch, p0.partition_epoch, new_isr)

    refused = decide(state, RoundInput(isr_requests=(resign((3,)),))).answers[0]
    assert refused is not None and refused.code == ErrorCode.INVALID_REQUEST  # 2 dropped too
    assert _round(fsm, RoundInput(isr_requests=(resign((3, 2)),))) == (None,)
    moved = _partition(fsm.state, 0)
    assert (moved.leader, moved.isr, moved.leader_epoch) == (2, (2, 3), p0.leader_epoch + 1)
    assert epoch == fsm.state.brokers[1].broker_epoch and not fsm.state.brokers[1].fenced

    _round(fsm, RoundInput(expired=frozenset({3})))  # leader 2 alone in sync with 3 fenced
    assert _partition(fsm.state, 0).isr == (2,)
    alone = _round(fsm, RoundInput(isr_requests=(resign(()),)))[0]
    assert alone is not None and alone.code == ErrorCode.INVALID_REQUEST
    assert _partition(fsm.state, 0).leader == 2


def test_a_resigning_leader_stays_when_no_in_sync_replica_is_usable() -> None:
    """Checked against who is usable once the round's own broker changes apply: followers
    fenced in the same round cannot take over, so the leader stays."""
    state = _cluster().state
    p0 = _partition(state, 0)
    request = IsrRequest(1, state.brokers[1].broker_epoch, "t", 0, p0.leader_epoch,
                         p0.partition_epoch, (2, 3))
    only_the_leader = Liveness(frozenset({1}), frozenset({1}))
    with pytest.raises(ZlogError) as refused:
        checked_isr_request(state, request, only_the_leader)
    assert refused.value.code == ErrorCode.INELIGIBLE_REPLICA
    assert checked_isr_request(state, request, Liveness(frozenset({1, 3}),
                                                        frozenset({1, 3}))).leader == 3


def test_a_change_computed_from_an_old_record_is_refused_whole() -> None:
    fsm = _cluster()
    stale = decide(fsm.state, RoundInput(expired=frozenset({1}))).change
    _round(fsm, RoundInput(expired=frozenset({2})))
    before = fsm.state
    with pytest.raises(ZlogError) as refused:
        apply_command(fsm, stale)
    assert refused.value.code == ErrorCode.INVALID_UPDATE_VERSION
    assert fsm.state.topics == before.topics and not fsm.state.brokers[1].fenced


def test_preferred_leaders_come_back_once_in_sync() -> None:
    fsm = _cluster()
    _round(fsm, RoundInput(expired=frozenset({1})))
    _round(fsm, RoundInput(heard_from=frozenset({1})))
    assert _partition(fsm.state, 0).leader == 2  # back, but not in the ISR yet
    p0 = _partition(fsm.state, 0)
    _round(fsm, RoundInput(isr_requests=(IsrRequest(
        2, fsm.state.brokers[2].broker_epoch, "t", 0, p0.leader_epoch, p0.partition_epoch,
        (1, 2, 3)),)))
    _round(fsm, RoundInput(preferred_elections=True))
    p0 = _partition(fsm.state, 0)
    assert (p0.leader, p0.isr) == (1, (1, 2, 3))


def test_worker_endpoints_follow_the_current_registration_only() -> None:
    fsm = _cluster()
    epoch = fsm.state.brokers[2].broker_epoch
    _round(fsm, RoundInput(endpoints={2: (epoch, ("tcp://h2:5000", "tcp://h2:5001")),
                                      3: (epoch + 99, ("tcp://stale:1", "tcp://stale:2"))}))
    assert fsm.state.brokers[2].worker_endpoint(1) == "tcp://h2:5001"
    assert fsm.state.brokers[3].worker_endpoints == ("", "")


def test_a_restarted_broker_leaves_the_isrs_others_keep_and_its_leaderships_move() -> None:
    fsm = _cluster()
    apply_command(fsm, RegisterBroker(1, "h1", "tcp://h1:7400", "c", incarnation_id="i1-again",
                               workers=2))
    state = fsm.state
    assert state.brokers[1].broker_epoch == 3  # a new incarnation: the next epoch
    p0 = _partition(state, 0)  # led by 1: 2 takes over, 1 must catch up to rejoin
    assert (p0.leader, p0.isr, p0.leader_epoch) == (2, (2, 3), 1)
    assert _partition(state, 2).isr == (3, 2)  # ISRs keep the replica order
    # The same incarnation asking again (a retried registration) changes nothing.
    apply_command(fsm, RegisterBroker(1, "h1", "tcp://h1:7400", "c", incarnation_id="i1-again",
                               workers=2))
    assert fsm.state.topics == state.topics


def test_a_restarted_broker_that_alone_holds_a_partition_leads_it_again_in_a_new_epoch(
) -> None:
    fsm = MetadataStateMachine()
    apply_command(fsm, RegisterBroker(1, "h1", "tcp://h1:7400", "c", incarnation_id="a"))
    apply_command(fsm, CreateTopic("t", 1, 1, {}, ((1,),)))
    apply_command(fsm, RegisterBroker(1, "h1", "tcp://h1:7400", "c", incarnation_id="b"))
    p0 = _partition(fsm.state, 0)
    assert (p0.leader, p0.isr, p0.leader_epoch) == (-1, (1,), 1)
    _round(fsm, RoundInput())
    p0 = _partition(fsm.state, 0)
    assert (p0.leader, p0.isr, p0.leader_epoch) == (1, (1,), 2)
