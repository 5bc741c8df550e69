"""The JSON bodies of the reassignment messages (reassignment_messages.py): encode and parse.

Same rules as json_bodies.py, whose encoder and decoder dispatch here for these classes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from zlog.transport.json_fields import Fields
from zlog.transport.reassignment_messages import (
    AlterPartitionReassignmentsRequestV0,
    AlterPartitionReassignmentsResponseV0,
    ListPartitionReassignmentsRequestV0,
    ListPartitionReassignmentsResponseV0,
    OngoingReassignment,
    ReassignmentMessage,
    ReassignmentSpec,
    UnregisterBrokerRequestV0,
    UnregisterBrokerResponseV0,
)
from zlog.transport.wire import INT16_MAX, INT16_MIN, INT32_MAX


def reassignment_body(msg: ReassignmentMessage) -> dict[str, Any]:
    """The JSON-ready dict of one of these messages."""
    match msg:
        case AlterPartitionReassignmentsRequestV0():
            return {"reassignments": [
                {"topic": r.topic, "partition": r.partition,
                 "replicas": None if r.replicas is None else list(r.replicas)}
                for r in msg.reassignments]}
        case ListPartitionReassignmentsResponseV0():
            return {"error_code": msg.error_code, "error_message": msg.error_message,
                    "reassignments": [
                        {"topic": r.topic, "partition": r.partition,
                         "replicas": list(r.replicas), "adding": list(r.adding),
                         "removing": list(r.removing)} for r in msg.reassignments]}
    # The rest are flat: every field is a JSON scalar.
    return {name: getattr(msg, name) for name in msg.__slots__}


def _code(f: Fields) -> int:
    return f.integer("error_code", low=INT16_MIN, high=INT16_MAX)


def _spec(f: Fields) -> ReassignmentSpec:
    return ReassignmentSpec(f.text("topic"), f.integer("partition", low=0, high=INT32_MAX),
                            f.optional_integers("replicas", low=0))


def _ongoing(f: Fields) -> OngoingReassignment:
    return OngoingReassignment(
        f.text("topic"), f.integer("partition", low=0, high=INT32_MAX),
        f.integers("replicas", low=0), f.integers("adding", low=0), f.integers("removing", low=0))


REASSIGNMENT_PARSERS: Final[Mapping[type, Callable[[Fields], ReassignmentMessage]]] = {
    AlterPartitionReassignmentsRequestV0: lambda f: AlterPartitionReassignmentsRequestV0(
        f.nested_list("reassignments", _spec)),
    AlterPartitionReassignmentsResponseV0: lambda f: AlterPartitionReassignmentsResponseV0(
        _code(f), f.text("error_message", default="")),
    ListPartitionReassignmentsRequestV0: lambda f: ListPartitionReassignmentsRequestV0(),
    ListPartitionReassignmentsResponseV0: lambda f: ListPartitionReassignmentsResponseV0(
        _code(f), f.text("error_message", default=""),
        f.nested_list("reassignments", _ongoing, default=[])),
    UnregisterBrokerRequestV0: lambda f: UnregisterBrokerRequestV0(
        f.integer("broker_id", low=0, high=INT32_MAX)),
    UnregisterBrokerResponseV0: lambda f: UnregisterBrokerResponseV0(
        _code(f), f.text("error_message", default=""), f.integer("moved", low=0, default=0)),
}
