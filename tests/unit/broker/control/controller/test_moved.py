"""A controller whose metadata log stops leading while its proposals commit answers the brokers
waiting on them NOT_CONTROLLER, naming the controller its metadata log knows of.

Spec: docs/raft.md §7 (Raft's NotLeaderError reaches the metadata log's proposers as
NOT_CONTROLLER with its leader hint); the `controller_id` of an answer is who answered, or the
controller the answering node knows of (zlog/transport/messages/cluster.py).
"""

from __future__ import annotations

from tests.unit.broker.control.controller.test_service import _service
from zlog.broker.control.controller.service import CONTROLLER_ROUND_MS, ControllerService
from zlog.broker.control.metadata.commands import Command, Done
from zlog.broker.control.metadata.log import as_controller_error
from zlog.broker.control.metadata.state_machine import MetadataStateMachine
from zlog.errors import ErrorCode
from zlog.raft.errors import NotLeaderError
from zlog.transport.messages import Response
from zlog.transport.messages.cluster import (
    AlterPartitionRequestV0,
    AlterPartitionResponseV0,
    BrokerRegistrationRequestV0,
    BrokerRegistrationResponseV0,
)

NEW_CONTROLLER = 3  # the service under test is node 1


def _registering() -> tuple[ControllerService, MetadataStateMachine, list[tuple[Command, Done]],
                            list[Response]]:
    """The controller with a new broker's registration proposed, not committed yet."""
    held: list[tuple[Command, Done]] = []
    service, fsm = _service(held)
    answers: list[Response] = []
    service.register(BrokerRegistrationRequestV0(4, "i4", "c", "h4", "tcp://h4:7400", 1),
                     answers.append)
    return service, fsm, held, answers


def test_answers_of_a_proposal_the_metadata_log_refused_name_the_new_controller() -> None:
    service, fsm, held, answers = _registering()
    partition = fsm.state.partition("t", 0)
    assert partition is not None
    service.alter_partition(AlterPartitionRequestV0(
        3, fsm.state.brokers[3].broker_epoch, "t", 0, partition.leader_epoch,
        partition.partition_epoch, (3, 1)), answers.append)
    service.tick(CONTROLLER_ROUND_MS)
    assert len(held) == 2 and not answers  # the registration and the round, both proposed
    refused = as_controller_error(NotLeaderError(NEW_CONTROLLER))
    for _command, done in held:
        done(None, refused)
    registration, altered = answers
    assert isinstance(registration, BrokerRegistrationResponseV0)
    assert isinstance(altered, AlterPartitionResponseV0)
    for answer in (registration, altered):
        assert answer.error_code == ErrorCode.NOT_CONTROLLER
        assert answer.controller_id == NEW_CONTROLLER


def test_a_refusal_naming_no_leader_names_no_controller() -> None:
    _controller, _fsm, held, answers = _registering()
    (_command, done), = held
    done(None, as_controller_error(NotLeaderError(None)))
    (registration,) = answers
    assert isinstance(registration, BrokerRegistrationResponseV0)
    assert registration.error_code == ErrorCode.NOT_CONTROLLER
    assert registration.controller_id == -1
