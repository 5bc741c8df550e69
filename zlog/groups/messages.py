"""The requests a group coordinator answers and its responses, as plain values.

They are the wire's own messages (`zlog.transport.group_messages`), so what a worker decodes
goes into the coordinator as it is and what comes out is encoded as it is; this module names
them for the coordinator's side. Every request carries `request_id`, the driver's handle for
the reply: a coordinator may park a request (JoinGroup, SyncGroup) and answer it in the output
of a later event.
"""

from __future__ import annotations

from zlog.transport.group_messages import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    UNKNOWN_OFFSET,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FetchedOffset,
    GroupDescription,
    GroupHeartbeatRequest,
    GroupHeartbeatResponse,
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
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionCommit,
    SyncGroupRequest,
    SyncGroupResponse,
)
from zlog.transport.group_messages import GroupRequest as Request
from zlog.transport.group_messages import GroupResponse as Response

__all__ = [
    "JOIN_EPOCH", "LEAVE_EPOCH", "STATIC_LEAVE_EPOCH", "UNKNOWN_OFFSET",
    "DeleteGroupsRequest", "DeleteGroupsResponse", "DescribeGroupsRequest",
    "DescribeGroupsResponse", "DescribedMember", "FetchedOffset", "GroupDescription",
    "GroupHeartbeatRequest", "GroupHeartbeatResponse", "HeartbeatRequest", "HeartbeatResponse",
    "JoinGroupMember", "JoinGroupRequest", "JoinGroupResponse", "LeaveGroupRequest",
    "LeaveGroupResponse", "ListGroupsRequest", "ListGroupsResponse", "ListedGroup",
    "OffsetCommitRequest", "OffsetCommitResponse", "OffsetFetchRequest", "OffsetFetchResponse",
    "PartitionCommit", "Request", "Response", "SyncGroupRequest", "SyncGroupResponse",
]
