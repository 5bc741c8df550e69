"""Placement: replicas over brokers (Kafka's round robin) and partitions over local workers."""

from __future__ import annotations

import random

import pytest

from zlog.broker.control.placement import place_on_workers, place_replicas
from zlog.errors import ErrorCode, ZlogError


def test_one_broker_leads_every_partition_at_epoch_zero() -> None:
    placed = place_replicas(4, 1, [1], start_index=7)
    assert [(p.partition, p.replicas, p.leader, p.leader_epoch, p.isr) for p in placed] == [
        (index, (1,), 1, 0, (1,)) for index in range(4)
    ]


def test_replicas_round_robin_and_leaders_spread() -> None:
    placed = place_replicas(3, 2, [3, 1, 2], start_index=0)
    assert [p.replicas for p in placed] == [(1, 2), (2, 3), (3, 1)]
    assert [p.leader for p in placed] == [1, 2, 3]
    assert all(p.isr == p.replicas for p in placed)
    assert [p.leader for p in place_replicas(3, 2, [1, 2, 3], start_index=1)] == [2, 3, 1]


def test_placement_is_deterministic_and_never_doubles_a_broker() -> None:
    rng = random.Random(5)
    for _ in range(200):
        brokers = rng.sample(range(20), rng.randint(1, 6))
        factor = rng.randint(1, len(brokers))
        start = rng.randint(0, 50)
        first = place_replicas(rng.randint(1, 12), factor, brokers, start)
        assert first == place_replicas(len(first), factor, list(reversed(brokers)), start)
        for partition in first:
            assert len(set(partition.replicas)) == factor
            assert set(partition.replicas) <= set(brokers)


def test_racks_each_hold_one_replica_while_there_are_enough_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    for factor in (2, 3):
        for start in range(6):
            placed = place_replicas(12, factor, list(racks), start, racks=racks)
            for partition in placed:
                assert len({racks[b] for b in partition.replicas}) == factor, partition
            leaders = [p.leader for p in placed]
            assert sorted(leaders) == sorted(list(racks) * 2), "leaders spread evenly"


def test_more_replicas_than_racks_fill_every_rack_first() -> None:
    racks = {1: "a", 2: "a", 3: "a", 4: "b"}
    for partition in place_replicas(8, 3, list(racks), 0, racks=racks):
        assert {racks[b] for b in partition.replicas} == {"a", "b"}
        assert len(set(partition.replicas)) == 3


def test_racks_are_ignored_unless_every_broker_names_one() -> None:
    some = {1: "a", 2: "a", 3: ""}
    assert (place_replicas(6, 2, [1, 2, 3], 4, racks=some)
            == place_replicas(6, 2, [1, 2, 3], 4))


def test_rack_aware_placement_is_deterministic_and_never_doubles_a_broker() -> None:
    rng = random.Random(11)
    for _ in range(200):
        brokers = rng.sample(range(20), rng.randint(1, 7))
        racks = {b: rng.choice("xyz") for b in brokers}
        factor = rng.randint(1, len(brokers))
        start = rng.randint(0, 50)
        first = place_replicas(rng.randint(1, 12), factor, brokers, start, racks=racks)
        assert first == place_replicas(len(first), factor, list(reversed(brokers)), start,
                                       racks=dict(reversed(list(racks.items()))))
        for partition in first:
            assert len(set(partition.replicas)) == factor
            wanted_racks = min(factor, len(set(racks.values())))
            assert len({racks[b] for b in partition.replicas}) == wanted_racks


def test_too_few_brokers_is_invalid_replication_factor() -> None:
    with pytest.raises(ZlogError) as caught:
        place_replicas(1, 2, [1], start_index=0)
    assert caught.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_one_partition_per_worker_then_shared() -> None:
    partitions = [("t", index) for index in range(5)]
    placement = place_on_workers(partitions, 3, {})
    assert [placement[tp] for tp in partitions] == [0, 1, 2, 0, 1]


def test_placed_partitions_stay_and_new_ones_fill_the_least_loaded_worker() -> None:
    first = place_on_workers([("a", 0), ("a", 1), ("b", 0)], 3, {})
    assert first == {("a", 0): 0, ("a", 1): 1, ("b", 0): 2}
    # Topic a is deleted, c arrives: b stays on worker 2, c's partitions go to 0 and 1.
    second = place_on_workers([("b", 0), ("c", 0), ("c", 1)], 3, first)
    assert second == {("b", 0): 2, ("c", 0): 0, ("c", 1): 1}


def test_a_worker_that_no_longer_exists_loses_its_partitions() -> None:
    placement = place_on_workers([("a", 0), ("a", 1)], 1, {("a", 0): 0, ("a", 1): 3})
    assert placement == {("a", 0): 0, ("a", 1): 0}


def test_worker_placement_is_stable_across_a_restart() -> None:
    """The same creation order gives the same placement from scratch (a restarted broker)."""
    partitions = [(topic, index) for topic in "xyz" for index in range(3)]
    assert place_on_workers(partitions, 4, {}) == place_on_workers(partitions, 4, {})
