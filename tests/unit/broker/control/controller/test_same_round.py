"""An ISR request decided in the round that fences one of its new members
(zlog/broker/control/controller/decisions.py; docs/replication.md §3: a new member must be
usable).

Found by the replication simulator (tests/sim/replication, seed 46 before the fix): the round
fenced a broker whose session had expired and, in the same ClusterChange, let a leader's
AlterPartition add that broker to an ISR, because the request was checked against the state
before the round's own fencing.
"""

from __future__ import annotations

from tests.unit.broker.control.metadata_helpers import apply_command
from zlog.broker.control.controller.decisions import IsrRequest, RoundInput, decide
from zlog.broker.control.metadata.commands import (
    CreateTopic,
    RegisterBroker,
)
from zlog.broker.control.metadata.state_machine import MetadataStateMachine
from zlog.errors import ErrorCode


def test_a_broker_fenced_in_this_round_may_not_join_an_isr_in_it() -> None:
    fsm = MetadataStateMachine()
    for node in (1, 2, 3):
        apply_command(fsm, RegisterBroker(node, f"h{node}", f"tcp://h{node}:7400", "c",
                                   incarnation_id=f"i{node}", workers=1))
    apply_command(fsm, CreateTopic("t", 1, 3, {}, ((1, 2, 3),)))
    outcome = decide(fsm.state, RoundInput(expired=frozenset({3})))
    apply_command(fsm, outcome.change)  # 3 fenced, ISR (1, 2)
    outcome = decide(fsm.state, RoundInput(heard_from=frozenset({3})))
    apply_command(fsm, outcome.change)  # 3 back, still out of the ISR
    state = fsm.state
    p0 = state.partition("t", 0)
    assert p0 is not None and p0.isr == (1, 2) and not state.brokers[3].fenced
    join = IsrRequest(1, state.brokers[1].broker_epoch, "t", 0, p0.leader_epoch,
                      p0.partition_epoch, (1, 2, 3), {3: state.brokers[3].broker_epoch})
    outcome = decide(state, RoundInput(expired=frozenset({3}), isr_requests=(join,)))
    assert [change.fenced for change in outcome.change.brokers] == [True]
    answer = outcome.answers[0]
    assert answer is not None and answer.code == ErrorCode.INELIGIBLE_REPLICA
    assert all(3 not in change.isr for change in outcome.change.partitions)
