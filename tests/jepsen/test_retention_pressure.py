"""The retention-pressure fault's own choices, on seeded inputs: which follower of which key's
partition lags and how, and what the topic gets back."""

from __future__ import annotations

import random

from tests.jepsen.histories import partition
from zlog.transport.messages.admin import PartitionMetadata
from zlog_jepsen.retention_pressure import (
    LAGS,
    TINY_RETENTION_BYTES,
    TINY_SEGMENT_BYTES,
    plan_pressure,
)
from zlog_jepsen.topic_alter import restoring


def _keys(*leaders: int) -> dict[int, PartitionMetadata]:
    """One partition per key on brokers 1-3, each led by its leader (-1: none)."""
    return {key: partition(key, (1, 2, 3), leader=leader, endpoint="" if leader < 0 else "x")
            for key, leader in enumerate(leaders)}


def test_retention_pressure_lags_a_follower_never_the_leader_and_covers_every_choice() -> None:
    partitions = _keys(3, 3, 1, 3)  # the controller (1) leads key 2 only
    plans = [plan_pressure(random.Random(seed), partitions, 1, (1, 2, 3))
             for seed in range(64)]
    assert {p.key for p in plans} == {0, 1, 3}, "a key the controller does not lead"
    assert all(p.leader == 3 and p.follower == 2 for p in plans), "nor a follower it is"
    assert {p.lag for p in plans} == set(LAGS)
    assert {p.segment_bytes for p in plans} == set(TINY_SEGMENT_BYTES)
    assert {p.retention_bytes for p in plans} == set(TINY_RETENTION_BYTES)
    # the same seed, the same fault
    assert plan_pressure(random.Random(7), partitions, 1, (1, 2, 3)) == plans[7]


def test_retention_pressure_takes_what_there_is_when_the_controller_leads_everything() -> None:
    plans = [plan_pressure(random.Random(seed), _keys(1, 1), 1, (1, 2, 3)) for seed in range(32)]
    assert {p.key for p in plans} == {0, 1} and all(p.leader == 1 for p in plans)
    assert {p.follower for p in plans} == {2, 3}
    # no controller known (-1): every key and follower may be drawn
    anywhere = [plan_pressure(random.Random(seed), _keys(2, 3), -1, (1, 2, 3))
                for seed in range(32)]
    assert {(p.key, p.leader) for p in anywhere} == {(0, 2), (1, 3)}


def test_retention_pressure_without_a_leader_still_picks_two_replicas() -> None:
    for seed in range(32):
        plan = plan_pressure(random.Random(seed), _keys(-1), 2, (1, 2, 3))
        assert plan.leader in (1, 2, 3) and plan.follower in (1, 2, 3), seed
        assert plan.leader != plan.follower, seed
    alone = {0: partition(0, (1,), replicas=(1,), leader=1)}
    plan = plan_pressure(random.Random(1), alone, 2, (1, 2, 3))
    assert plan.leader == 1 and plan.follower == 3


def test_the_topic_gets_back_the_settings_it_was_created_with() -> None:
    assert restoring(("segment.bytes", "retention.bytes"),
                     {"segment.bytes": "65536", "min.insync.replicas": "2"}) == {
        "segment.bytes": "65536", "retention.bytes": None}
