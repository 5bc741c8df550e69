"""AlterPartitionReassignments, ListPartitionReassignments and UnregisterBroker at the
controller (other brokers forward them there): what the control plane does with them.

* AlterPartitionReassignments becomes one ReassignPartitions command; the metadata log checks
  it against the state it applies to, so the answer (once committed) says whether the moves
  started. The moves finish later, in controller rounds (`reassignment.py`).
* UnregisterBroker drains the broker: `replica_moves.drain_moves` plans where each of its
  replicas goes (refused whole when the other live brokers cannot keep a replication factor),
  and the plan is committed as one ReassignPartitions command that also marks the broker
  draining. The controller deregisters it once it holds no replica.
* ListPartitionReassignments answers from the metadata at hand.
"""

from __future__ import annotations

from collections.abc import Callable

from zlog.broker.control.controller.decisions import placeable
from zlog.broker.control.controller.replica_moves import drain_moves
from zlog.broker.control.metadata.commands import (
    Propose,
    Reassignment,
    ReassignPartitions,
    Result,
)
from zlog.broker.control.metadata.state import ClusterState
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.codec import RequestHeader
from zlog.transport.messages import (
    Response,
)
from zlog.transport.messages.reassignment import (
    AlterPartitionReassignmentsRequestV0,
    AlterPartitionReassignmentsResponseV0,
    ListPartitionReassignmentsResponseV0,
    OngoingReassignment,
    UnregisterBrokerRequestV0,
    UnregisterBrokerResponseV0,
)
from zlog.types import TopicPartition

Reply = Callable[[bytes, RequestHeader, Response], None]


class ReassignmentRequests:
    def __init__(self, state: Callable[[], ClusterState], propose: Propose,
                 reply: Reply) -> None:
        self._state = state  # the metadata as last applied
        self._propose = propose  # commit a command; Done runs later on the loop thread
        self._reply = reply  # send a response to a client

    def alter(self, identity: bytes, header: RequestHeader,
              request: AlterPartitionReassignmentsRequestV0) -> None:
        command = ReassignPartitions(tuple(
            Reassignment(spec.topic, spec.partition, spec.replicas)
            for spec in request.reassignments))

        def done(result: Result | None, error: ZlogError | None) -> None:
            del result
            code, text = (ErrorCode.NONE, "") if error is None else (error.code, error.message)
            self._reply(identity, header, AlterPartitionReassignmentsResponseV0(int(code), text))

        self._propose(command, done)

    def ongoing(self) -> ListPartitionReassignmentsResponseV0:
        return ListPartitionReassignmentsResponseV0(0, "", tuple(
            OngoingReassignment(topic.name, p.partition, p.replicas, p.adding, p.removing)
            for topic in self._state().topics.values() for p in topic.partitions
            if p.reassigning))

    def unregister(self, identity: bytes, header: RequestHeader,
                   request: UnregisterBrokerRequestV0) -> None:
        try:
            command = drain_command(self._state(), request.broker_id)
        except ZlogError as error:
            self._reply(identity, header,
                        UnregisterBrokerResponseV0(int(error.code), error.message))
            return

        def done(result: Result | None, error: ZlogError | None) -> None:
            del result
            if error is not None:
                response = UnregisterBrokerResponseV0(int(error.code), error.message)
            else:
                response = UnregisterBrokerResponseV0(0, "", len(command.reassignments))
            self._reply(identity, header, response)

        self._propose(command, done)


def drain_command(state: ClusterState, broker_id: int) -> ReassignPartitions:
    """The command that moves every replica off `broker_id` and marks it draining."""
    if broker_id not in state.brokers:
        raise ZlogError(ErrorCode.BROKER_ID_NOT_REGISTERED,
                        f"broker {broker_id} is not registered")
    assignment = {TopicPartition(topic.name, p.partition): p.target
                  for topic in state.topics.values() for p in topic.partitions}
    moves = drain_moves(assignment, broker_id, placeable(state))
    return ReassignPartitions(
        tuple(Reassignment(tp.topic, tp.partition, target) for tp, target in moves.items()),
        drain=broker_id)
