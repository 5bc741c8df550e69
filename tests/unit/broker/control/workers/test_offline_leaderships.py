"""Handing off the leaderships of partitions no worker here can serve
(zlog/broker/control/workers/offline_leaderships.py), as the controller then decides them."""

from __future__ import annotations

from tests.unit.broker.control.metadata_helpers import apply_command
from zlog.broker.control.controller.decisions import IsrRequest, RoundInput, decide
from zlog.broker.control.metadata.commands import CreateTopic, RegisterBroker
from zlog.broker.control.metadata.state_machine import MetadataStateMachine
from zlog.broker.control.workers.offline_leaderships import resignations
from zlog.types import TopicPartition


def _cluster() -> MetadataStateMachine:
    fsm = MetadataStateMachine()
    for node in (1, 2, 3):
        apply_command(fsm, RegisterBroker(node, f"h{node}", f"tcp://h{node}:7400", "c",
                                          incarnation_id=f"i{node}", workers=1))
    apply_command(fsm, CreateTopic("t", 3, 3, {}, ((1, 2, 3), (2, 3, 1), (3, 1, 2))))
    apply_command(fsm, CreateTopic("alone", 1, 1, {}, ((1,),)))
    return fsm


def test_only_the_offline_partitions_this_broker_leads_with_others_in_sync_are_resigned() -> None:
    fsm = _cluster()
    offline = [TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("alone", 0),
               TopicPartition("gone", 0)]
    (change,) = resignations(fsm.state, 1, offline)
    assert (change.topic, change.partition, change.new_isr) == ("t", 0, (2, 3))
    # The controller takes it as a leader's resignation: an in-sync follower leads, in a new
    # leader epoch, and this broker leaves the ISR (it rejoins once it fetches again).
    outcome = decide(fsm.state, RoundInput(isr_requests=(IsrRequest(
        1, fsm.state.brokers[1].broker_epoch, change.topic, change.partition,
        change.leader_epoch, change.partition_epoch, change.new_isr),)))
    assert outcome.answers == (None,)
    apply_command(fsm, outcome.change)
    moved = fsm.state.partition("t", 0)
    assert moved is not None and (moved.leader, moved.isr, moved.leader_epoch) == (2, (2, 3), 1)
    assert resignations(fsm.state, 1, offline) == [], "led elsewhere now: nothing more to do"
