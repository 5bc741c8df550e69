"""Drain and add-broker planning (zlog/broker/control/controller/replica_moves.py): pure and
deterministic.

Spec: docs/replication.md, "Reassignment, drain and add-broker": a drain keeps every
replication factor and spreads the moved replicas evenly, or refuses with
INVALID_REPLICATION_FACTOR; a joining broker takes its fair share of replicas and preferred
leaderships from the most loaded brokers.
"""

from __future__ import annotations

from collections import Counter

import pytest

from zlog.broker.control.controller.replica_moves import Assignment, drain_moves, join_moves
from zlog.broker.control.placement import place_replicas
from zlog.errors import ErrorCode, ZlogError
from zlog.types import TopicPartition


def _topic(name: str, partitions: int, factor: int, brokers: list[int],
           start: int = 0) -> dict[TopicPartition, tuple[int, ...]]:
    return {TopicPartition(name, p.partition): p.replicas
            for p in place_replicas(partitions, factor, brokers, start)}


def _after(assignment: Assignment, moves: Assignment) -> dict[TopicPartition, tuple[int, ...]]:
    return {**assignment, **moves}


def test_a_drain_moves_every_replica_off_and_keeps_each_replication_factor() -> None:
    assignment = {**_topic("a", 6, 2, [1, 2, 3, 4]), **_topic("b", 4, 3, [1, 2, 3, 4], 1)}
    moves = drain_moves(assignment, 3, [1, 2, 4])
    after = _after(assignment, moves)
    assert set(moves) == {tp for tp, replicas in assignment.items() if 3 in replicas}
    for tp, replicas in after.items():
        assert 3 not in replicas
        assert len(set(replicas)) == len(assignment[tp]), tp
        assert set(assignment[tp]) - {3} <= set(replicas), "only the drained replica moves"
    load = Counter(r for replicas in after.values() for r in replicas)
    assert max(load.values()) - min(load.values()) <= 1, load


def test_a_drained_preferred_leader_is_replaced_by_the_least_leading_replica() -> None:
    assignment = {TopicPartition("t", 0): (3, 1), TopicPartition("t", 1): (1, 2),
                  TopicPartition("t", 2): (3, 2)}
    moves = drain_moves(assignment, 3, [1, 2])
    # t-0: 2 takes the replica and, leading nothing yet, the leadership; t-2: 1 takes the
    # replica, and of 2 and 1 (one leadership each now) the first in the list leads.
    assert moves == {TopicPartition("t", 0): (2, 1), TopicPartition("t", 2): (2, 1)}
    leaders = Counter(replicas[0] for replicas in _after(assignment, moves).values())
    assert max(leaders.values()) - min(leaders.values()) <= 1, leaders


def test_a_drain_is_deterministic() -> None:
    assignment = _topic("t", 12, 2, [1, 2, 3, 4, 5])
    assert drain_moves(assignment, 2, [1, 3, 4, 5]) == drain_moves(dict(assignment), 2,
                                                                  [5, 4, 3, 1])


def test_a_drain_that_would_lower_a_replication_factor_is_refused() -> None:
    assignment = {**_topic("two", 2, 2, [1, 2, 3]), **_topic("three", 1, 3, [1, 2, 3])}
    with pytest.raises(ZlogError) as refused:
        drain_moves(assignment, 3, [1, 2])
    assert refused.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "three-0" in refused.value.message


def test_draining_a_broker_that_holds_nothing_moves_nothing() -> None:
    assert drain_moves(_topic("t", 3, 2, [1, 2]), 3, [1, 2]) == {}


def test_a_joining_broker_takes_its_fair_share_of_replicas_and_leaderships() -> None:
    assignment = _topic("t", 12, 2, [1, 2, 3])  # 24 replicas, 12 leaderships
    moves = join_moves(assignment, 4, [1, 2, 3])
    after = _after(assignment, moves)
    load = Counter(r for replicas in after.values() for r in replicas)
    leaders = Counter(replicas[0] for replicas in after.values())
    assert load[4] == 6 and leaders[4] == 3, (load, leaders)
    assert max(load.values()) - min(load.values()) <= 1, load
    assert max(leaders.values()) - min(leaders.values()) <= 1, leaders
    for tp, replicas in moves.items():
        assert len(set(replicas)) == len(assignment[tp])
        assert len(set(assignment[tp]) - set(replicas)) == 1, "one replica moves per partition"


def test_a_joining_broker_with_its_share_already_moves_nothing() -> None:
    assignment = _topic("t", 4, 2, [1, 2, 3, 4])
    assert join_moves(assignment, 4, [1, 2, 3, 4]) == {}
    assert join_moves(assignment, 4, [1, 2, 3, 4]) == join_moves(assignment, 4, [4, 3, 2, 1])
