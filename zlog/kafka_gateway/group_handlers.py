"""Kafka's group APIs answered by zlog's coordinators, so that Kafka and native consumers
share a group, its partitions and its committed offsets.

zlog's group requests have Kafka's fields (docs/groups.md), and a Kafka consumer's
ConsumerProtocol bytes are what a native member sends too, so each request passes through
renamed. The gateway names itself every group's coordinator (topology.py) and finds the real
one per call; a coordinator out of reach is COORDINATOR_NOT_AVAILABLE, which sends the Kafka
client back to FindCoordinator. A JoinGroup below version 4 never gets MEMBER_ID_REQUIRED
(KIP-394 is for v4 and later): the coordinator admits it with the id it chose.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from zlog.errors import ErrorCode, ZlogError
from zlog.kafka_gateway.calls import Call, Gateway, milliseconds
from zlog.transport.messages.groups import (
    DeleteGroupsRequestV0,
    DeleteGroupsResponseV0,
    DescribeGroupsRequestV0,
    DescribeGroupsResponseV0,
    FetchedOffset,
    FindCoordinatorRequestV0,
    GroupRequest,
    GroupResponse,
    HeartbeatRequestV0,
    HeartbeatResponseV0,
    JoinGroupProtocol,
    JoinGroupRequestV0,
    JoinGroupResponseV0,
    LeaveGroupRequestV0,
    LeaveGroupResponseV0,
    LeavingMember,
    ListGroupsRequestV0,
    MemberAssignment,
    OffsetCommitRequestV0,
    OffsetCommitResponseV0,
    OffsetFetchRequestV0,
    OffsetFetchResponseV0,
    PartitionCommit,
    SyncGroupRequestV0,
    SyncGroupResponseV0,
)
from zlog.types import TopicPartition

GROUP_KEY_TYPE: Final = 0
MEMBER_ID_REQUIRED_FROM_VERSION: Final = 4
SYNC_WAIT_MS_MAX: Final = 300_000  # a follower's SyncGroup waits for the leader's assignment
CALL_MARGIN_MS: Final = 5_000
NO_OFFSET: Final = -1
NO_EPOCH: Final = -1
_UNREACHABLE: Final = frozenset({ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT,
                                 ErrorCode.BROKER_NOT_AVAILABLE})


def call_coordinator(gateway: Gateway, group_id: str, request: GroupRequest, expected: type[Any],
                     timeout_ms: int | None = None) -> Any:
    """The coordinator's answer to `request`, of type `expected`; out of reach, it is
    COORDINATOR_NOT_AVAILABLE, which sends a Kafka client back to FindCoordinator."""
    try:
        response: GroupResponse = gateway.native.group(group_id, request, timeout_ms)
    except ZlogError as error:
        if error.code in _UNREACHABLE:
            raise ZlogError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                            f"group {group_id!r}: its coordinator is out of reach "
                            f"({error.message})") from None
        raise
    if not isinstance(response, expected):
        raise ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR,
                        f"the coordinator answered with {type(response).__name__}")
    return response


def find_coordinator(gateway: Gateway, call: Call) -> dict[str, Any]:
    keys: Sequence[str] = call.field("coordinator_keys", default=None) or [call.field("key")]
    for key in keys:
        gateway.native.authorize(FindCoordinatorRequestV0(key))
    node = gateway.node
    if call.field("key_type", default=GROUP_KEY_TYPE) != GROUP_KEY_TYPE:
        code, message = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                         "zlog does not support transactions (a transactional.id)")
    else:
        code, message = ErrorCode.NONE, None
    found = {"node_id": node.node_id if code == ErrorCode.NONE else -1, "host": node.host,
             "port": node.port, "error_code": code, "error_message": message}
    return {"throttle_time_ms": 0, **found,
            "coordinators": [{"key": key, **found} for key in keys]}


def join_group(gateway: Gateway, call: Call) -> dict[str, Any]:
    body = call.body
    session_ms = milliseconds(body.session_timeout, 10_000)
    rebalance_ms = milliseconds(call.field("rebalance_timeout"), session_ms)
    request = JoinGroupRequestV0(
        group_id=body.group_id, member_id=body.member_id, protocol_type=body.protocol_type,
        protocols=tuple(JoinGroupProtocol(p.name, bytes(p.metadata)) for p in body.protocols),
        session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
        group_instance_id=call.field("group_instance_id"),
        client_id=call.request.client_id or "", client_host=call.client_host,
        require_known_member_id=call.version >= MEMBER_ID_REQUIRED_FROM_VERSION)
    response: JoinGroupResponseV0 = call_coordinator(
        gateway, body.group_id, request, JoinGroupResponseV0, rebalance_ms + CALL_MARGIN_MS)
    return {"throttle_time_ms": 0, "error_code": response.error_code,
            "generation_id": response.generation, "protocol_type": response.protocol_type,
            "protocol_name": response.protocol_name or ("" if call.version < 7 else None),
            "leader": response.leader_id, "member_id": response.member_id,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "metadata": m.metadata} for m in response.members]}


def sync_group(gateway: Gateway, call: Call) -> dict[str, Any]:
    body = call.body
    request = SyncGroupRequestV0(
        group_id=body.group_id, generation=body.generation_id, member_id=body.member_id,
        group_instance_id=call.field("group_instance_id"),
        assignments=tuple(MemberAssignment(a.member_id, bytes(a.assignment))
                          for a in body.assignments),
        protocol_type=call.field("protocol_type"), protocol_name=call.field("protocol_name"))
    response: SyncGroupResponseV0 = call_coordinator(
        gateway, body.group_id, request, SyncGroupResponseV0, SYNC_WAIT_MS_MAX)
    return {"throttle_time_ms": 0, "error_code": response.error_code,
            "protocol_type": response.protocol_type, "protocol_name": response.protocol_name,
            "assignment": response.assignment}


def heartbeat(gateway: Gateway, call: Call) -> dict[str, Any]:
    body = call.body
    response: HeartbeatResponseV0 = call_coordinator(gateway, body.group_id, HeartbeatRequestV0(
        body.group_id, body.generation_id, body.member_id, call.field("group_instance_id")),
        HeartbeatResponseV0)
    return {"throttle_time_ms": 0, "error_code": response.error_code}


def leave_group(gateway: Gateway, call: Call) -> dict[str, Any]:
    body = call.body
    listed = call.field("members")
    members = (tuple(LeavingMember(m.member_id, m.group_instance_id) for m in listed)
               if listed is not None else (LeavingMember(body.member_id, None),))
    response: LeaveGroupResponseV0 = call_coordinator(
        gateway, body.group_id, LeaveGroupRequestV0(body.group_id, members), LeaveGroupResponseV0)
    return {"throttle_time_ms": 0, "error_code": response.error_code, "members": [
        {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
         "error_code": m.error_code} for m in response.members]}


def offset_commit(gateway: Gateway, call: Call) -> dict[str, Any]:
    body = call.body
    retention_ms = milliseconds(call.field("retention_time"), NO_OFFSET)
    offsets = tuple(
        (TopicPartition(topic.name, partition.partition_index),
         PartitionCommit(partition.committed_offset,
                         getattr(partition, "committed_leader_epoch", NO_EPOCH),
                         partition.committed_metadata or ""))
        for topic in body.topics for partition in topic.partitions)
    request = OffsetCommitRequestV0(
        group_id=body.group_id, offsets=offsets,
        generation=call.field("generation_id", "generation_id_or_member_epoch", default=-1),
        member_id=call.field("member_id", default=""),
        group_instance_id=call.field("group_instance_id"),
        retention_ms=None if retention_ms < 0 else retention_ms)
    response: OffsetCommitResponseV0 = call_coordinator(gateway, body.group_id, request,
                                                        OffsetCommitResponseV0)
    codes = dict(response.partitions)
    return {"throttle_time_ms": 0, "topics": [
        {"name": topic.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": response.error_code or codes.get(
                 TopicPartition(topic.name, p.partition_index), ErrorCode.NONE)}
            for p in topic.partitions]} for topic in body.topics]}


def _fetch_offsets(gateway: Gateway, group_id: str, topics: Any) -> dict[str, Any]:
    """One group's committed offsets, as OffsetFetch lists them (every requested partition,
    -1 where nothing is committed)."""
    wanted = None if topics is None else tuple(
        TopicPartition(topic.name, index) for topic in topics
        for index in topic.partition_indexes)
    response: OffsetFetchResponseV0 = call_coordinator(
        gateway, group_id, OffsetFetchRequestV0(group_id, wanted), OffsetFetchResponseV0)
    if response.error_code != ErrorCode.NONE:
        return {"group_id": group_id, "error_code": response.error_code, "topics": []}
    found = {TopicPartition(o.topic, o.partition): o for o in response.offsets}
    listed = wanted if wanted is not None else tuple(found)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp in listed:
        offset = found.get(tp) or FetchedOffset(tp.topic, tp.partition)
        by_topic.setdefault(tp.topic, []).append({
            "partition_index": tp.partition, "committed_offset": offset.offset,
            "committed_leader_epoch": offset.leader_epoch, "metadata": offset.metadata,
            "error_code": ErrorCode.NONE})
    return {"group_id": group_id, "error_code": ErrorCode.NONE, "topics": [
        {"name": name, "partitions": partitions} for name, partitions in by_topic.items()]}


def offset_fetch(gateway: Gateway, call: Call) -> dict[str, Any]:
    groups = call.field("groups")
    if groups is not None:  # v8: several groups in one request
        return {"throttle_time_ms": 0, "groups": [
            _fetch_offsets(gateway, group.group_id, group.topics) for group in groups]}
    answer = _fetch_offsets(gateway, call.body.group_id, call.body.topics)
    return {"throttle_time_ms": 0, **answer}


def describe_groups(gateway: Gateway, call: Call) -> dict[str, Any]:
    described = []
    for group_id in call.body.groups:
        response: DescribeGroupsResponseV0 = call_coordinator(
            gateway, group_id, DescribeGroupsRequestV0((group_id,)), DescribeGroupsResponseV0)
        described += [{
            "error_code": group.error_code, "group_id": group.group_id,
            "group_state": group.state, "protocol_type": group.protocol_type,
            "protocol_data": group.protocol_name, "authorized_operations": -2147483648,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "member_metadata": m.metadata, "member_assignment": m.assignment}
                        for m in group.members]} for group in response.groups]
    return {"throttle_time_ms": 0, "groups": described}


def list_groups(gateway: Gateway, call: Call) -> dict[str, Any]:
    states = {state.lower() for state in call.field("states_filter", default=()) or ()}
    gateway.native.authorize(ListGroupsRequestV0())
    listed = gateway.native.groups.list_groups()
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": [
        {"group_id": group.group_id, "protocol_type": group.protocol_type,
         "group_state": group.state} for group in listed
        if not states or group.state.lower() in states]}


def delete_groups(gateway: Gateway, call: Call) -> dict[str, Any]:
    results = []
    for group_id in call.body.groups_names:
        response: DeleteGroupsResponseV0 = call_coordinator(
            gateway, group_id, DeleteGroupsRequestV0((group_id,)), DeleteGroupsResponseV0)
        results += [{"group_id": name, "error_code": code} for name, code in response.results]
    return {"throttle_time_ms": 0, "results": results}
