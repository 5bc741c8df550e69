"""The JSON bodies of the inter-broker messages (cluster_messages.py): encode and parse.

Same rules as json_bodies.py, whose encoder and decoder dispatch here for these classes: one
JSON object per body, unknown fields ignored, a wrong field the caller's error code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from zlog.transport.cluster_messages import (
    AddRaftLearnerRequestV0,
    AddRaftLearnerResponseV0,
    AlterPartitionRequestV0,
    AlterPartitionResponseV0,
    BrokerHeartbeatRequestV0,
    BrokerHeartbeatResponseV0,
    BrokerRegistrationRequestV0,
    BrokerRegistrationResponseV0,
    EpochAnswer,
    EpochQuery,
    OffsetForLeaderEpochRequestV0,
    OffsetForLeaderEpochResponseV0,
)
from zlog.transport.json_fields import Fields
from zlog.transport.wire import INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN

ClusterJsonMessage = (
    OffsetForLeaderEpochRequestV0 | OffsetForLeaderEpochResponseV0
    | BrokerRegistrationRequestV0 | BrokerRegistrationResponseV0
    | BrokerHeartbeatRequestV0 | BrokerHeartbeatResponseV0
    | AlterPartitionRequestV0 | AlterPartitionResponseV0
    | AddRaftLearnerRequestV0 | AddRaftLearnerResponseV0
)


def cluster_body(msg: ClusterJsonMessage) -> dict[str, Any]:
    """The JSON-ready dict of one of these messages."""
    match msg:
        case OffsetForLeaderEpochRequestV0():
            return {"replica_id": msg.replica_id, "queries": [
                {"topic": q.topic, "partition": q.partition,
                 "current_leader_epoch": q.current_leader_epoch, "leader_epoch": q.leader_epoch}
                for q in msg.queries]}
        case OffsetForLeaderEpochResponseV0():
            return {"answers": [
                {"topic": a.topic, "partition": a.partition, "error_code": a.error_code,
                 "leader_epoch": a.leader_epoch, "end_offset": a.end_offset,
                 "error_message": a.error_message} for a in msg.answers]}
        case AlterPartitionRequestV0():
            return {"node_id": msg.node_id, "broker_epoch": msg.broker_epoch,
                    "topic": msg.topic, "partition": msg.partition,
                    "leader_epoch": msg.leader_epoch, "partition_epoch": msg.partition_epoch,
                    "new_isr": list(msg.new_isr),
                    "member_epochs": {str(k): v for k, v in msg.member_epochs.items()}}
        case AddRaftLearnerResponseV0():
            return {"error_code": msg.error_code, "error_message": msg.error_message,
                    "controller_id": msg.controller_id, "members": list(msg.members)}
        case BrokerHeartbeatRequestV0():
            return {"node_id": msg.node_id, "broker_epoch": msg.broker_epoch,
                    "worker_endpoints": list(msg.worker_endpoints),
                    "want_shutdown": msg.want_shutdown}
    # The rest are flat: every field is a JSON scalar.
    return {name: getattr(msg, name) for name in msg.__slots__}


def _int32(f: Fields, key: str, low: int = INT32_MIN) -> int:
    return f.integer(key, low=low, high=INT32_MAX)


def _code(f: Fields) -> int:
    return f.integer("error_code", low=INT16_MIN, high=INT16_MAX)


def _epoch_query(f: Fields) -> EpochQuery:
    return EpochQuery(f.text("topic"), _int32(f, "partition", 0),
                      _int32(f, "current_leader_epoch", -1), _int32(f, "leader_epoch", -1))


def _epoch_answer(f: Fields) -> EpochAnswer:
    return EpochAnswer(f.text("topic"), _int32(f, "partition", 0), _code(f),
                       _int32(f, "leader_epoch", -1), f.integer("end_offset", low=-1),
                       f.text("error_message", default=""))


def _member_epochs(f: Fields) -> dict[int, int]:
    epochs: dict[int, int] = {}
    for key, value in f.text_map_any("member_epochs").items():
        if not key.isdigit() or isinstance(value, bool) or not isinstance(value, int):
            raise f.fail("member_epochs maps broker ids to broker epochs")
        epochs[int(key)] = value
    return epochs


CLUSTER_PARSERS: Final[Mapping[type, Callable[[Fields], ClusterJsonMessage]]] = {
    OffsetForLeaderEpochRequestV0: lambda f: OffsetForLeaderEpochRequestV0(
        _int32(f, "replica_id", -1), f.nested_list("queries", _epoch_query)),
    OffsetForLeaderEpochResponseV0: lambda f: OffsetForLeaderEpochResponseV0(
        f.nested_list("answers", _epoch_answer)),
    BrokerRegistrationRequestV0: lambda f: BrokerRegistrationRequestV0(
        _int32(f, "node_id", 0), f.text("incarnation_id"), f.text("cluster_id"), f.text("host"),
        f.text("control_endpoint"), _int32(f, "workers", 1), f.text("rack", default=""),
        f.text("dir_id", default="")),
    BrokerRegistrationResponseV0: lambda f: BrokerRegistrationResponseV0(
        _code(f), f.text("error_message", default=""), f.text("cluster_id", default=""),
        f.integer("broker_epoch", low=-1), _int32(f, "controller_id", -1)),
    BrokerHeartbeatRequestV0: lambda f: BrokerHeartbeatRequestV0(
        _int32(f, "node_id", 0), f.integer("broker_epoch", low=0), f.texts("worker_endpoints"),
        f.boolean("want_shutdown", default=False)),
    BrokerHeartbeatResponseV0: lambda f: BrokerHeartbeatResponseV0(
        _code(f), f.text("error_message", default=""), f.boolean("fenced"),
        f.boolean("shutdown_ready"), _int32(f, "controller_id", -1)),
    AlterPartitionRequestV0: lambda f: AlterPartitionRequestV0(
        _int32(f, "node_id", 0), f.integer("broker_epoch", low=0), f.text("topic"),
        _int32(f, "partition", 0), _int32(f, "leader_epoch", 0),
        _int32(f, "partition_epoch", 0), f.integers("new_isr", low=0),
        _member_epochs(f)),
    AlterPartitionResponseV0: lambda f: AlterPartitionResponseV0(
        _code(f), f.text("error_message", default=""), _int32(f, "controller_id", -1)),
    AddRaftLearnerRequestV0: lambda f: AddRaftLearnerRequestV0(
        _int32(f, "node_id", 0), f.text("dir_id"), f.text("raft_endpoint")),
    AddRaftLearnerResponseV0: lambda f: AddRaftLearnerResponseV0(
        _code(f), f.text("error_message", default=""), _int32(f, "controller_id", -1),
        f.texts("members")),
}
