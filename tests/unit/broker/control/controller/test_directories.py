"""A broker back on another data directory (a wiped or replaced disk) holds nothing of what its
replicas held: it must never be elected on the strength of its old place in an ISR (KIP-858).

The partition record keeps the directory of each replica, recorded when the replica is placed
and each time it joins the ISR; a registration names the broker's directory. Spec:
docs/replication.md §4.1 ("A broker back on another disk") and §4.2.
"""

from __future__ import annotations

import pytest

from tests.unit.broker.control.metadata_helpers import apply_command
from zlog.broker.control.controller.decisions import IsrRequest, RoundInput, decide
from zlog.broker.control.metadata.commands import (
    AddPartitions,
    CreateTopic,
    Reassignment,
    ReassignPartitions,
    RegisterBroker,
)
from zlog.broker.control.metadata.state import PartitionInfo, state_from_json, state_to_json
from zlog.broker.control.metadata.state_machine import MetadataStateMachine
from zlog.errors import ErrorCode, ZlogError


def _dir(node: int, generation: int = 0) -> str:
    return f"{node:x}{generation:x}".ljust(32, "d")


def _register(fsm: MetadataStateMachine, node: int, incarnation: str,
              directory: str) -> None:
    apply_command(fsm, RegisterBroker(node, f"h{node}", f"tcp://h{node}:7400", "c",
                                      incarnation_id=incarnation, dir_id=directory))


def _cluster(brokers: int = 3) -> MetadataStateMachine:
    fsm = MetadataStateMachine()
    for node in range(1, brokers + 1):
        _register(fsm, node, f"i{node}", _dir(node))
    apply_command(fsm, CreateTopic("t", 1, 3, {}, ((1, 2, 3),)))
    return fsm


def _p0(fsm: MetadataStateMachine) -> PartitionInfo:
    found = fsm.state.partition("t", 0)
    assert found is not None
    return found


def _round(fsm: MetadataStateMachine, round_input: RoundInput) -> None:
    outcome = decide(fsm.state, round_input)
    if not outcome.empty:
        apply_command(fsm, outcome.change)
    assert all(answer is None for answer in outcome.answers), outcome.answers


def _sole_isr_leader(fsm: MetadataStateMachine) -> None:
    """Brokers 2 and 3 fenced: broker 1 leads alone in the ISR."""
    _round(fsm, RoundInput(expired=frozenset({2, 3})))
    _round(fsm, RoundInput(heard_from=frozenset({2, 3})))
    assert (_p0(fsm).leader, _p0(fsm).isr) == (1, (1,))


def test_replicas_are_placed_with_their_brokers_directories() -> None:
    fsm = _cluster()
    assert _p0(fsm).directories == (_dir(1), _dir(2), _dir(3))
    apply_command(fsm, AddPartitions("t", 1, ((3, 1, 2),)))
    added = fsm.state.partition("t", 1)
    assert added is not None and added.directories == (_dir(3), _dir(1), _dir(2))
    restored = state_from_json(state_to_json(fsm.state))
    assert restored.topics["t"].partitions == fsm.state.topics["t"].partitions


def test_a_sole_isr_leader_back_on_an_empty_disk_is_not_elected() -> None:
    """The report: the leader alone in the ISR restarts with an empty data directory. It used
    to be elected again (a new process keeps its place as the last member), and the two other
    replicas truncated what they held to its empty log. Now the partition has no leader: the
    others' data is never erased by an election."""
    fsm = _cluster()
    _sole_isr_leader(fsm)
    _register(fsm, 1, "i1-wiped", _dir(1, 1))
    p0 = _p0(fsm)
    assert (p0.leader, p0.isr) == (-1, (1,))  # recorded, but on its old directory
    for _ in range(3):
        _round(fsm, RoundInput(heard_from=frozenset({1, 2, 3})))
        assert _p0(fsm).leader == -1


def test_an_unclean_election_prefers_a_replica_that_holds_its_data() -> None:
    fsm = _cluster()
    _sole_isr_leader(fsm)
    _register(fsm, 1, "i1-wiped", _dir(1, 1))
    _round(fsm, RoundInput(heard_from=frozenset({1, 2, 3}), unclean_topics=frozenset({"t"})))
    p0 = _p0(fsm)
    assert (p0.leader, p0.isr) == (2, (2,))  # not 1, first in replica order but wiped


def test_the_old_directory_back_makes_it_electable_again() -> None:
    fsm = _cluster()
    _sole_isr_leader(fsm)
    _register(fsm, 1, "i1-wiped", _dir(1, 1))
    _register(fsm, 1, "i1-disk-back", _dir(1))
    _round(fsm, RoundInput(heard_from=frozenset({1, 2, 3})))
    assert (_p0(fsm).leader, _p0(fsm).isr) == (1, (1,))


def test_a_broker_on_a_new_directory_leaves_every_isr_and_rejoins_by_catching_up() -> None:
    """Even where the others in the ISR are down: they hold the data, it holds none. Its
    joining again through an expansion records its new directory."""
    fsm = _cluster()
    _round(fsm, RoundInput(expired=frozenset({3})))
    assert (_p0(fsm).leader, _p0(fsm).isr) == (1, (1, 2))
    _round(fsm, RoundInput(expired=frozenset({1})))
    assert (_p0(fsm).leader, _p0(fsm).isr) == (2, (2,))
    _register(fsm, 1, "i1-wiped", _dir(1, 1))
    _round(fsm, RoundInput(heard_from=frozenset({1, 3})))
    p0 = _p0(fsm)
    assert (p0.leader, p0.isr) == (2, (2,))
    request = IsrRequest(2, fsm.state.brokers[2].broker_epoch, "t", 0, p0.leader_epoch,
                         p0.partition_epoch, (1, 2),
                         {1: fsm.state.brokers[1].broker_epoch})
    _round(fsm, RoundInput(isr_requests=(request,)))
    p0 = _p0(fsm)
    assert p0.isr == (1, 2) and p0.directories[0] == _dir(1, 1)
    _round(fsm, RoundInput(expired=frozenset({2})))
    assert _p0(fsm).leader == 1  # caught up on its new disk, in the ISR again: electable


def test_a_wiped_follower_leaves_an_isr_whose_other_members_are_down() -> None:
    fsm = _cluster()
    _round(fsm, RoundInput(expired=frozenset({2})))
    _register(fsm, 3, "i3-wiped", _dir(3, 1))
    p0 = _p0(fsm)
    assert (p0.leader, p0.isr) == (1, (1,))


def test_a_reassignment_records_the_directory_of_an_added_replica() -> None:
    fsm = _cluster(4)
    apply_command(fsm, ReassignPartitions((Reassignment("t", 0, (4, 2, 3)),)))
    p0 = _p0(fsm)
    assert dict(zip(p0.replicas, p0.directories, strict=True)) == {
        1: _dir(1), 2: _dir(2), 3: _dir(3), 4: _dir(4)}


def test_a_directory_held_by_another_registered_broker_is_refused() -> None:
    fsm = _cluster()
    with pytest.raises(ZlogError) as refused:
        _register(fsm, 4, "i4", _dir(2))
    assert refused.value.code == ErrorCode.INVALID_REGISTRATION
    assert 4 not in fsm.state.brokers


def test_records_from_before_directories_elect_as_before() -> None:
    """A record with no directories (written before they were kept) and registrations
    without one: nothing is taken for a wiped disk."""
    fsm = MetadataStateMachine()
    for node in (1, 2, 3):
        _register(fsm, node, f"i{node}", "")
    apply_command(fsm, CreateTopic("t", 1, 3, {}, ((1, 2, 3),)))
    _sole_isr_leader(fsm)
    _register(fsm, 1, "i1-again", "")
    _round(fsm, RoundInput(heard_from=frozenset({1, 2, 3})))
    assert (_p0(fsm).leader, _p0(fsm).isr) == (1, (1,))


def test_an_unclean_election_of_the_wiped_replica_itself_records_its_new_directory() -> None:
    """Every other replica down: unclean election takes the wiped one (its empty log becomes
    the partition's), records its new directory, and the next rounds leave it leading (the
    simulator found rounds that re-elected it forever when the directory was not recorded)."""
    fsm = _cluster()
    _sole_isr_leader(fsm)
    _round(fsm, RoundInput(expired=frozenset({2, 3})))
    _register(fsm, 1, "i1-wiped", _dir(1, 1))
    unclean = RoundInput(heard_from=frozenset({1}), unclean_topics=frozenset({"t"}))
    _round(fsm, unclean)
    p0 = _p0(fsm)
    assert (p0.leader, p0.isr, p0.directories[0]) == (1, (1,), _dir(1, 1))
    assert decide(fsm.state, unclean).empty
