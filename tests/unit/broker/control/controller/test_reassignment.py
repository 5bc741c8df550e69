"""Reassignment in the metadata log and the controller: ReassignPartitions applied, completed
in a round, cancelled, and a drained broker deregistered.

Spec: docs/replication.md, "Reassignment, drain and add-broker" (KIP-455's replica set =
target + leaving replicas while the new ones catch up; completion once the target is in sync).
"""

from __future__ import annotations

import pytest

from tests.unit.broker.control.metadata_helpers import apply_command
from zlog.broker.control.controller.decisions import RoundInput, decide, placeable
from zlog.broker.control.controller.reassignment_requests import drain_command
from zlog.broker.control.metadata.commands import (
    BrokerChange,
    ClusterChange,
    CreateTopic,
    PartitionChange,
    Reassignment,
    ReassignPartitions,
    RegisterBroker,
    decode_command,
    encode_command,
)
from zlog.broker.control.metadata.state import PartitionInfo, state_from_json, state_to_json
from zlog.broker.control.metadata.state_machine import MetadataStateMachine
from zlog.errors import ErrorCode, ZlogError


def _cluster(brokers: int = 4, factor: int = 2) -> MetadataStateMachine:
    fsm = MetadataStateMachine()
    for node in range(1, brokers + 1):
        apply_command(fsm, RegisterBroker(node, f"h{node}", f"tcp://h{node}:7400", "c",
                                          incarnation_id=f"i{node}", workers=2))
    replicas = ((1, 2, 3)[:factor], (2, 3, 1)[:factor])
    apply_command(fsm, CreateTopic("t", 2, factor, {}, replicas))
    return fsm


def _partition(fsm: MetadataStateMachine, index: int = 0) -> PartitionInfo:
    found = fsm.state.partition("t", index)
    assert found is not None
    return found


def _reassign(fsm: MetadataStateMachine, target: tuple[int, ...] | None,
              index: int = 0) -> None:
    apply_command(fsm, ReassignPartitions((Reassignment("t", index, target),)))


def _round(fsm: MetadataStateMachine) -> None:
    outcome = decide(fsm.state, RoundInput())
    if not outcome.empty:
        apply_command(fsm, outcome.change)


def _join_isr(fsm: MetadataStateMachine, broker: int, index: int = 0) -> None:
    """The leader's AlterPartition for a caught-up replica, as committed."""
    p = _partition(fsm, index)
    isr = tuple(r for r in p.replicas if r in {*p.isr, broker})
    apply_command(fsm, ClusterChange((), (PartitionChange(
        "t", index, p.partition_epoch, p.leader, p.leader_epoch, isr),)))


def test_a_reassignment_adds_the_target_and_keeps_leader_and_isr_until_it_is_in_sync() -> None:
    fsm = _cluster()
    before = _partition(fsm)
    _reassign(fsm, (3, 4))
    moving = _partition(fsm)
    assert moving.replicas == (3, 4, 1, 2)
    assert (moving.adding, moving.removing) == ((3, 4), (1, 2))
    assert (moving.leader, moving.leader_epoch, moving.isr) == (1, before.leader_epoch, (1, 2))
    assert moving.partition_epoch == before.partition_epoch + 1
    assert len(moving.replica_workers) == 4
    assert moving.replica_workers[2:] == before.replica_workers, "kept replicas keep workers"
    _round(fsm)
    assert _partition(fsm).reassigning, "not complete while the new replicas are out of sync"
    _join_isr(fsm, 3)
    _round(fsm)
    assert _partition(fsm).reassigning
    _join_isr(fsm, 4)
    _round(fsm)
    done = _partition(fsm)
    assert (done.replicas, done.isr, done.adding, done.removing) == ((3, 4), (3, 4), (), ())
    assert done.leader == 3 and done.leader_epoch == before.leader_epoch + 1
    assert done.replica_workers == moving.replica_workers[:2]


def test_a_leader_in_the_target_keeps_leading_when_the_move_completes() -> None:
    fsm = _cluster()
    _reassign(fsm, (3, 1))
    _join_isr(fsm, 3)
    epoch = _partition(fsm).leader_epoch
    _round(fsm)
    done = _partition(fsm)
    assert (done.replicas, done.isr, done.leader, done.leader_epoch) == ((3, 1), (3, 1), 1,
                                                                          epoch)


def test_cancelling_restores_the_original_replicas() -> None:
    fsm = _cluster()
    _reassign(fsm, (3, 4))
    _join_isr(fsm, 3)
    _reassign(fsm, None)
    back = _partition(fsm)
    assert (back.replicas, back.isr, back.leader, back.reassigning) == ((1, 2), (1, 2), 1,
                                                                         False)


def test_a_new_target_replaces_the_move_in_progress() -> None:
    fsm = _cluster()
    _reassign(fsm, (3, 4))
    _reassign(fsm, (1, 3))
    moving = _partition(fsm)
    assert moving.target == (1, 3) and moving.original == (1, 2)
    assert set(moving.removing) == {2, 4}


@pytest.mark.parametrize(("target", "code"), [
    ((), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ((3, 3), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ((3, 9), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ((1, 2, 3), ErrorCode.INVALID_REPLICATION_FACTOR),
    (None, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS),
])
def test_bad_targets_are_refused_and_change_nothing(
        target: tuple[int, ...] | None, code: ErrorCode) -> None:
    fsm = _cluster()
    before = fsm.state
    with pytest.raises(ZlogError) as refused:
        _reassign(fsm, target)
    assert refused.value.code == code
    assert fsm.state.topics == before.topics and fsm.state.brokers == before.brokers


def test_unknown_partitions_fenced_brokers_and_a_second_entry_refuse_the_whole_command() -> None:
    fsm = _cluster()
    apply_command(fsm, ClusterChange((BrokerChange(4, fsm.state.brokers[4].broker_epoch,
                                                   fenced=True),)))
    before = fsm.state.topics
    cases = [
        (ReassignPartitions((Reassignment("t", 0, (3, 1)), Reassignment("t", 9, (3, 1)))),
         ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (ReassignPartitions((Reassignment("t", 0, (4, 1)),)),
         ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (ReassignPartitions((Reassignment("t", 0, (3, 1)), Reassignment("t", 0, (2, 1)))),
         ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ]
    for command, code in cases:
        with pytest.raises(ZlogError) as refused:
            apply_command(fsm, command)
        assert refused.value.code == code, command
        assert fsm.state.topics == before


def test_a_drain_moves_everything_off_then_the_broker_is_deregistered() -> None:
    fsm = _cluster()
    command = drain_command(fsm.state, 2)
    assert decode_command(encode_command(command)) == command
    apply_command(fsm, command)
    assert fsm.state.brokers[2].draining
    assert 2 not in placeable(fsm.state), "no new replica goes to a draining broker"
    for index in range(2):
        p = _partition(fsm, index)
        for broker in p.adding:
            _join_isr(fsm, broker, index)
    _round(fsm)  # completes both moves
    assert all(2 not in p.replicas for p in fsm.state.topics["t"].partitions)
    assert 2 in fsm.state.brokers
    _round(fsm)  # holds nothing now: deregistered
    assert 2 not in fsm.state.brokers and fsm.state.retired == {2: "i2"}
    restored = state_from_json(state_to_json(fsm.state))
    assert restored == fsm.state


def test_a_removed_process_may_not_register_again_but_a_restarted_one_may() -> None:
    fsm = _cluster()
    apply_command(fsm, ReassignPartitions((), drain=4))
    _round(fsm)
    assert 4 not in fsm.state.brokers
    with pytest.raises(ZlogError) as refused:
        apply_command(fsm, RegisterBroker(4, "h4", "tcp://h4:7400", "c", incarnation_id="i4"))
    assert refused.value.code == ErrorCode.BROKER_ID_NOT_REGISTERED
    apply_command(fsm, RegisterBroker(4, "h4", "tcp://h4:7400", "c", incarnation_id="new"))
    assert not fsm.state.brokers[4].draining and fsm.state.retired == {}


def test_a_drain_that_would_lower_a_replication_factor_is_refused_before_proposing() -> None:
    fsm = _cluster(3, factor=3)
    with pytest.raises(ZlogError) as refused:
        drain_command(fsm.state, 1)
    assert refused.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    with pytest.raises(ZlogError) as unknown:
        drain_command(fsm.state, 7)
    assert unknown.value.code == ErrorCode.BROKER_ID_NOT_REGISTERED
