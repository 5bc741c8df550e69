"""The JSON bodies of the consumer-group messages (group_messages.py): encode and parse.
OffsetCommit's are structs instead (offset_commit_bodies.py): it is the one on the data path.

Same rules as json_bodies.py, whose encoder and decoder dispatch here for these classes. Bytes
(subscriptions, assignments) travel as base64 text, a partition as {"topic", "partition"}, an
error as its Kafka number. `request_id` is never sent: a parsed request has `NO_REQUEST_ID`.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any, Final

from zlog.transport.group_messages import (
    NO_REQUEST_ID,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FetchedOffset,
    FindCoordinatorRequestV0,
    FindCoordinatorResponseV0,
    GroupDescription,
    GroupHeartbeatRequest,
    GroupHeartbeatResponse,
    GroupMessage,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from zlog.transport.json_fields import Fields
from zlog.transport.wire import INT8_MAX, INT8_MIN, INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN
from zlog.types import NO_GENERATION, TopicPartition

# ---------------------------------------------------------------------------------------------
# Encoding.
# ---------------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _tp(tp: TopicPartition) -> dict[str, Any]:
    return {"topic": tp.topic, "partition": tp.partition}


def _tps(tps: tuple[TopicPartition, ...] | None) -> list[dict[str, Any]] | None:
    return None if tps is None else [_tp(tp) for tp in tps]


def _description(g: GroupDescription) -> dict[str, Any]:
    return {"group_id": g.group_id, "error_code": int(g.error), "state": g.state,
            "protocol_type": g.protocol_type, "protocol_name": g.protocol_name,
            "group_type": g.group_type, "epoch": g.epoch,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "metadata": _b64(m.metadata), "assignment": _b64(m.assignment),
                         "member_epoch": m.member_epoch} for m in g.members]}


def group_body(msg: GroupMessage) -> dict[str, Any]:
    """The JSON-ready dict of one of these messages."""
    match msg:
        case JoinGroupRequest():
            return {"group_id": msg.group_id, "member_id": msg.member_id,
                    "protocol_type": msg.protocol_type,
                    "protocols": [{"name": name, "metadata": _b64(metadata)}
                                  for name, metadata in msg.protocols],
                    "session_timeout_ms": msg.session_timeout_ms,
                    "rebalance_timeout_ms": msg.rebalance_timeout_ms,
                    "group_instance_id": msg.group_instance_id, "client_id": msg.client_id,
                    "client_host": msg.client_host,
                    "require_known_member_id": msg.require_known_member_id}
        case JoinGroupResponse():
            return {"error_code": int(msg.error), "member_id": msg.member_id,
                    "generation": msg.generation, "protocol_type": msg.protocol_type,
                    "protocol_name": msg.protocol_name, "leader_id": msg.leader_id,
                    "skip_assignment": msg.skip_assignment,
                    "members": [{"member_id": m.member_id,
                                 "group_instance_id": m.group_instance_id,
                                 "metadata": _b64(m.metadata)} for m in msg.members]}
        case SyncGroupRequest():
            return {"group_id": msg.group_id, "generation": msg.generation,
                    "member_id": msg.member_id, "group_instance_id": msg.group_instance_id,
                    "assignments": [{"member_id": member, "assignment": _b64(assignment)}
                                    for member, assignment in msg.assignments],
                    "protocol_type": msg.protocol_type, "protocol_name": msg.protocol_name}
        case SyncGroupResponse():
            return {"error_code": int(msg.error), "assignment": _b64(msg.assignment),
                    "protocol_type": msg.protocol_type, "protocol_name": msg.protocol_name}
        case HeartbeatRequest():
            return {"group_id": msg.group_id, "generation": msg.generation,
                    "member_id": msg.member_id, "group_instance_id": msg.group_instance_id}
        case HeartbeatResponse():
            return {"error_code": int(msg.error)}
        case LeaveGroupRequest():
            return {"group_id": msg.group_id, "members": [
                {"member_id": member, "group_instance_id": instance}
                for member, instance in msg.members]}
        case LeaveGroupResponse():
            return {"error_code": int(msg.error), "members": [
                {"member_id": member, "group_instance_id": instance, "error_code": int(code)}
                for member, instance, code in msg.members]}
        case OffsetFetchRequest():
            return {"group_id": msg.group_id, "partitions": _tps(msg.partitions)}
        case OffsetFetchResponse():
            return {"error_code": int(msg.error), "offsets": [
                {**_tp(tp), "offset": f.offset, "leader_epoch": f.leader_epoch,
                 "metadata": f.metadata} for tp, f in msg.offsets]}
        case GroupHeartbeatRequest():
            return {"group_id": msg.group_id, "member_id": msg.member_id,
                    "member_epoch": msg.member_epoch,
                    "group_instance_id": msg.group_instance_id,
                    "rebalance_timeout_ms": msg.rebalance_timeout_ms,
                    "subscribed_topics": None if msg.subscribed_topics is None
                    else list(msg.subscribed_topics),
                    "owned": _tps(msg.owned), "client_id": msg.client_id,
                    "client_host": msg.client_host, "max_wait_ms": msg.max_wait_ms}
        case GroupHeartbeatResponse():
            return {"error_code": int(msg.error), "message": msg.message,
                    "member_id": msg.member_id, "member_epoch": msg.member_epoch,
                    "heartbeat_interval_ms": msg.heartbeat_interval_ms,
                    "session_timeout_ms": msg.session_timeout_ms,
                    "assignment": _tps(msg.assignment)}
        case DescribeGroupsRequest() | DeleteGroupsRequest():
            return {"group_ids": list(msg.group_ids)}
        case DescribeGroupsResponse():
            return {"groups": [_description(g) for g in msg.groups]}
        case ListGroupsRequest():
            return {"states": sorted(msg.states), "types": sorted(msg.types)}
        case ListGroupsResponse():
            return {"error_code": int(msg.error), "groups": [
                {"group_id": g.group_id, "protocol_type": g.protocol_type, "state": g.state,
                 "group_type": g.group_type} for g in msg.groups]}
        case DeleteGroupsResponse():
            return {"results": [{"group_id": group, "error_code": int(code)}
                                for group, code in msg.results]}
    # FindCoordinator's are flat: every field is a JSON scalar.
    assert isinstance(msg, FindCoordinatorRequestV0 | FindCoordinatorResponseV0), (
        f"{type(msg).__name__} has no JSON body")
    return {name: getattr(msg, name) for name in msg.__slots__}


# ---------------------------------------------------------------------------------------------
# Parsing.
# ---------------------------------------------------------------------------------------------


def _int32(f: Fields, key: str, *, low: int = INT32_MIN, **default: object) -> int:
    return f.integer(key, low=low, high=INT32_MAX, **default)


def _parse_tp(f: Fields) -> TopicPartition:
    return TopicPartition(f.text("topic"), _int32(f, "partition", low=0))


def _parse_join_member(f: Fields) -> JoinGroupMember:
    return JoinGroupMember(f.text("member_id"), f.optional_text("group_instance_id"),
                           f.data("metadata"))


def _parse_fetched(f: Fields) -> tuple[TopicPartition, FetchedOffset]:
    return _parse_tp(f), FetchedOffset(
        f.integer("offset"), _int32(f, "leader_epoch", default=-1),
        f.text("metadata", default=""))


def _parse_described_member(f: Fields) -> DescribedMember:
    return DescribedMember(
        f.text("member_id"), f.optional_text("group_instance_id"), f.text("client_id"),
        f.text("client_host"), f.data("metadata", default=b""),
        f.data("assignment", default=b""),
        _int32(f, "member_epoch", default=NO_GENERATION))


def _parse_description(f: Fields) -> GroupDescription:
    return GroupDescription(
        f.text("group_id"), f.error_code(), f.text("state"),
        f.text("protocol_type", default=""), f.text("protocol_name", default=""),
        f.text("group_type", default="classic"), _int32(f, "epoch", default=NO_GENERATION),
        f.nested_list("members", _parse_described_member, default=[]))


def _parse_listed(f: Fields) -> ListedGroup:
    return ListedGroup(f.text("group_id"), f.text("protocol_type"), f.text("state"),
                       f.text("group_type"))


def _parse_join(f: Fields) -> JoinGroupRequest:
    return JoinGroupRequest(
        NO_REQUEST_ID, f.text("group_id"), f.text("member_id", default=""),
        f.text("protocol_type"),
        f.nested_list("protocols", lambda p: (p.text("name"), p.data("metadata"))),
        _int32(f, "session_timeout_ms"), _int32(f, "rebalance_timeout_ms"),
        f.optional_text("group_instance_id"), f.text("client_id", default=""),
        f.text("client_host", default=""),
        f.boolean("require_known_member_id", default=True))


def _parse_sync(f: Fields) -> SyncGroupRequest:
    return SyncGroupRequest(
        NO_REQUEST_ID, f.text("group_id"), _int32(f, "generation"), f.text("member_id"),
        f.optional_text("group_instance_id"),
        f.nested_list("assignments", lambda a: (a.text("member_id"), a.data("assignment")),
                      default=[]),
        f.optional_text("protocol_type"), f.optional_text("protocol_name"))


def _parse_group_heartbeat(f: Fields) -> GroupHeartbeatRequest:
    return GroupHeartbeatRequest(
        NO_REQUEST_ID, f.text("group_id"), f.text("member_id", default=""),
        _int32(f, "member_epoch"), f.optional_text("group_instance_id"),
        f.optional_integer("rebalance_timeout_ms", low=INT32_MIN, high=INT32_MAX),
        f.optional_texts("subscribed_topics"), f.optional_nested_list("owned", _parse_tp),
        f.text("client_id", default=""), f.text("client_host", default=""),
        f.integer("max_wait_ms", low=0, high=INT32_MAX, default=0))


GROUP_PARSERS: Final[Mapping[type, Callable[[Fields], GroupMessage]]] = {
    JoinGroupRequest: _parse_join,
    JoinGroupResponse: lambda f: JoinGroupResponse(
        f.error_code(), f.text("member_id", default=""),
        _int32(f, "generation", default=NO_GENERATION), f.optional_text("protocol_type"),
        f.optional_text("protocol_name"), f.text("leader_id", default=""),
        f.boolean("skip_assignment", default=False),
        f.nested_list("members", _parse_join_member, default=[])),
    SyncGroupRequest: _parse_sync,
    SyncGroupResponse: lambda f: SyncGroupResponse(
        f.error_code(), f.data("assignment", default=b""), f.optional_text("protocol_type"),
        f.optional_text("protocol_name")),
    HeartbeatRequest: lambda f: HeartbeatRequest(
        NO_REQUEST_ID, f.text("group_id"), _int32(f, "generation"), f.text("member_id"),
        f.optional_text("group_instance_id")),
    HeartbeatResponse: lambda f: HeartbeatResponse(f.error_code()),
    LeaveGroupRequest: lambda f: LeaveGroupRequest(
        NO_REQUEST_ID, f.text("group_id"), f.nested_list("members", lambda m: (
            m.text("member_id"), m.optional_text("group_instance_id")))),
    LeaveGroupResponse: lambda f: LeaveGroupResponse(
        f.error_code(), f.nested_list("members", lambda m: (
            m.text("member_id"), m.optional_text("group_instance_id"), m.error_code()),
            default=[])),
    OffsetFetchRequest: lambda f: OffsetFetchRequest(
        NO_REQUEST_ID, f.text("group_id"), f.optional_nested_list("partitions", _parse_tp)),
    OffsetFetchResponse: lambda f: OffsetFetchResponse(
        f.error_code(), f.nested_list("offsets", _parse_fetched, default=[])),
    GroupHeartbeatRequest: _parse_group_heartbeat,
    GroupHeartbeatResponse: lambda f: GroupHeartbeatResponse(
        f.error_code(), f.text("message", default=""), f.text("member_id", default=""),
        _int32(f, "member_epoch", default=0), _int32(f, "heartbeat_interval_ms", default=0),
        _int32(f, "session_timeout_ms", default=0),
        f.optional_nested_list("assignment", _parse_tp)),
    DescribeGroupsRequest: lambda f: DescribeGroupsRequest(NO_REQUEST_ID, f.texts("group_ids")),
    DescribeGroupsResponse: lambda f: DescribeGroupsResponse(
        f.nested_list("groups", _parse_description)),
    ListGroupsRequest: lambda f: ListGroupsRequest(
        NO_REQUEST_ID, frozenset(f.texts("states") if f.has("states") else ()),
        frozenset(f.texts("types") if f.has("types") else ())),
    ListGroupsResponse: lambda f: ListGroupsResponse(
        f.error_code(), f.nested_list("groups", _parse_listed, default=[])),
    DeleteGroupsRequest: lambda f: DeleteGroupsRequest(NO_REQUEST_ID, f.texts("group_ids")),
    DeleteGroupsResponse: lambda f: DeleteGroupsResponse(f.nested_list(
        "results", lambda r: (r.text("group_id"), r.error_code()))),
    FindCoordinatorRequestV0: lambda f: FindCoordinatorRequestV0(
        f.text("key"), f.integer("key_type", low=INT8_MIN, high=INT8_MAX, default=0)),
    FindCoordinatorResponseV0: lambda f: FindCoordinatorResponseV0(
        f.integer("error_code", low=INT16_MIN, high=INT16_MAX), f.text("error_message", default=""),
        _int32(f, "node_id", default=-1), f.text("endpoint", default="")),
}
