"""retention.disk.percent as bytes: a topic's budget per broker, divided over its partitions there.

Spec: docs/storage.md, "Disk budget". The metadata comes from real metadata commands applied to
the state machine, as a committed proposal would apply them.
"""

from __future__ import annotations

import pytest

from tests.unit.broker.control.controller.test_reassignment import _join_isr, _reassign, _round
from tests.unit.broker.control.metadata_helpers import apply_command
from zlog.broker.control.disk_budget import (
    NO_SHARE,
    broker_shares_bytes,
    disk_budget_percent,
    partition_shares_bytes,
    topic_budgets_bytes,
)
from zlog.broker.control.metadata.commands import (
    AddPartitions,
    AlterTopicConfigs,
    CreateTopic,
    RegisterBroker,
)
from zlog.broker.control.metadata.state_machine import MetadataStateMachine

DISK_BYTES = 1_000_000


def _cluster(brokers: int = 2) -> MetadataStateMachine:
    fsm = MetadataStateMachine()
    for node in range(1, brokers + 1):
        apply_command(fsm, RegisterBroker(node, f"h{node}", f"tcp://h{node}:7400", "c",
                                          incarnation_id=f"i{node}", workers=2))
    return fsm


def _shares(fsm: MetadataStateMachine, broker: int, defaults: dict[str, str] | None = None,
            ) -> dict[str, int]:
    return broker_shares_bytes(fsm.state.topics.values(), broker, defaults or {}, DISK_BYTES)


def test_a_budget_is_the_percent_of_the_disk_divided_over_the_partitions_held() -> None:
    shares = partition_shares_bytes({"t": 10.0}, {"t": 4}, DISK_BYTES)
    assert shares == {"t": 25_000}  # 10% of 1 MB = 100 kB, over 4 partitions


def test_topics_without_a_budget_get_no_share() -> None:
    shares = partition_shares_bytes({"t": -1.0, "u": 5.0}, {"t": 2, "u": 1, "v": 3}, DISK_BYTES)
    assert shares == {"u": 50_000}


def test_budgets_of_at_most_100_percent_together_are_kept_as_set() -> None:
    assert topic_budgets_bytes({"a": 60.0, "b": 40.0}, DISK_BYTES) == {"a": 600_000,
                                                                       "b": 400_000}


def test_budgets_above_100_percent_together_are_scaled_down_to_the_disk() -> None:
    budgets = topic_budgets_bytes({"a": 60.0, "b": 60.0, "c": 30.0}, DISK_BYTES)
    assert budgets == {"a": 400_000, "b": 400_000, "c": 200_000}  # 60:60:30 of the disk
    assert sum(budgets.values()) <= DISK_BYTES


def test_shares_round_down_so_they_never_add_up_past_the_budget() -> None:
    shares = partition_shares_bytes({"t": 100.0}, {"t": 3}, 1_000)
    assert shares == {"t": 333}
    budgets = topic_budgets_bytes({"a": 100.0 / 3, "b": 100.0 / 3, "c": 100.0 / 3}, 1_000)
    assert sum(budgets.values()) <= 1_000


@pytest.mark.parametrize(
    ("configs", "percent"),
    [
        ({"retention.disk.percent": "12.5"}, 12.5),
        ({}, -1.0),
        ({"retention.disk.percent": "12.5", "cleanup.policy": "compact"}, -1.0),
        ({"retention.disk.percent": "12.5", "cleanup.policy": "compact,delete"}, 12.5),
        ({"retention.disk.percent": "500"}, -1.0),  # refused by LogConfig: the worker says why
        ({"retention.disk.percent": "12.5", "min.insync.replicas": "2"}, 12.5),
    ],
)
def test_the_percent_applies_only_to_topics_that_delete(configs: dict[str, str],
                                                        percent: float) -> None:
    assert disk_budget_percent(configs) == percent


def test_adding_partitions_divides_the_budget_again() -> None:
    fsm = _cluster(brokers=1)
    apply_command(fsm, CreateTopic("t", 1, 1, {"retention.disk.percent": "10"}, ((1,),)))
    assert _shares(fsm, 1) == {"t": 100_000}
    apply_command(fsm, AddPartitions("t", 1, ((1,), (1,), (1,))))
    assert _shares(fsm, 1) == {"t": 25_000}  # four partitions, the same 100 kB


def test_each_broker_divides_by_the_partitions_it_holds_leader_or_follower() -> None:
    fsm = _cluster(brokers=3)
    # Broker 1 holds all three (leader of two), broker 2 one as a follower, broker 3 two.
    apply_command(fsm, CreateTopic("t", 3, 2, {"retention.disk.percent": "30"},
                                   ((1, 2), (1, 3), (3, 1))))
    assert _shares(fsm, 1) == {"t": 100_000}
    assert _shares(fsm, 2) == {"t": 300_000}
    assert _shares(fsm, 3) == {"t": 150_000}


def test_replicas_moved_here_or_away_divide_the_budget_again_once_their_files_are() -> None:
    fsm = _cluster(brokers=2)
    apply_command(fsm, CreateTopic("t", 2, 1, {"retention.disk.percent": "20"}, ((1,), (2,))))
    assert (_shares(fsm, 1), _shares(fsm, 2)) == ({"t": 200_000}, {"t": 200_000})
    _reassign(fsm, (2,), index=0)
    # While t-0 moves, both brokers hold it: its files are on both disks.
    assert (_shares(fsm, 1), _shares(fsm, 2)) == ({"t": 200_000}, {"t": 100_000})
    _join_isr(fsm, 2, index=0)
    _round(fsm)
    assert fsm.state.topics["t"].partitions[0].replicas == (2,)
    assert (_shares(fsm, 1), _shares(fsm, 2)) == ({}, {"t": 100_000})
    _reassign(fsm, (1,), index=1)
    _join_isr(fsm, 1, index=1)
    _round(fsm)
    assert fsm.state.topics["t"].partitions[1].replicas == (1,)
    assert (_shares(fsm, 1), _shares(fsm, 2)) == ({"t": 200_000}, {"t": 200_000})


def test_a_broker_holding_none_of_a_topic_gives_it_no_share() -> None:
    fsm = _cluster(brokers=2)
    apply_command(fsm, CreateTopic("t", 1, 1, {"retention.disk.percent": "20"}, ((1,),)))
    assert _shares(fsm, 2) == {}


def test_a_topic_added_past_100_percent_shrinks_the_budgets_of_the_others() -> None:
    fsm = _cluster(brokers=1)
    apply_command(fsm, CreateTopic("a", 2, 1, {"retention.disk.percent": "80"}, ((1,), (1,))))
    assert _shares(fsm, 1) == {"a": 400_000}
    apply_command(fsm, CreateTopic("b", 1, 1, {"retention.disk.percent": "80"}, ((1,),)))
    assert _shares(fsm, 1) == {"a": 250_000, "b": 500_000}  # each half of the disk
    apply_command(fsm, AlterTopicConfigs("b", {}, ("retention.disk.percent",)))
    assert _shares(fsm, 1) == {"a": 400_000}


def test_the_brokers_topic_defaults_give_every_topic_its_own_budget() -> None:
    fsm = _cluster(brokers=1)
    apply_command(fsm, CreateTopic("a", 1, 1, {}, ((1,),)))
    apply_command(fsm, CreateTopic("b", 2, 1, {"retention.disk.percent": "-1"}, ((1,), (1,))))
    defaults = {"retention.disk.percent": "10"}
    assert _shares(fsm, 1, defaults) == {"a": 100_000}
    assert NO_SHARE == -1  # what the supervisor sends for "b"
