"""The Admin's group calls: list, describe, delete, read and alter committed offsets.

Every group lives with the coordinator of its `__consumer_offsets` partition, so a call about
named groups goes to each one's coordinator (found with FindCoordinator, retried while it
moves: coordinator.py). ListGroups is answered per coordinator for the offsets
partitions it leads, so it goes to every distinct leader of `__consumer_offsets`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from zlog.client.cluster import Connections
from zlog.client.group.coordinator import CoordinatorLink, is_retried
from zlog.client.group.offsets import commit_offsets, fetch_committed
from zlog.client.records import GroupDescription, GroupListing, GroupMemberDescription
from zlog.client.retries import after_coordinator_error, retry_within
from zlog.errors import ErrorCode, ZlogError, for_code
from zlog.groups.classic.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_assignment
from zlog.groups.partitioning import OFFSETS_TOPIC
from zlog.transport.messages.groups import (
    DeleteGroupsRequestV0,
    DeleteGroupsResponseV0,
    DescribedMember,
    DescribeGroupsRequestV0,
    DescribeGroupsResponseV0,
    ListGroupsRequestV0,
    ListGroupsResponseV0,
)
from zlog.types import TopicPartition


class GroupAdmin:
    """Group calls over the Admin's connections (one thread)."""

    def __init__(self, connections: Connections, request_timeout_ms: int,
                 retry_backoff_ms: int = 100) -> None:
        self._connections = connections
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms

    def link(self, group_id: str) -> CoordinatorLink:
        if not group_id:
            raise ZlogError(ErrorCode.INVALID_GROUP_ID, "a group id must not be empty")
        return CoordinatorLink(self._connections, group_id,
                               request_timeout_ms=self.request_timeout_ms,
                               retry_backoff_ms=self.retry_backoff_ms)

    def list_groups(self) -> list[GroupListing]:
        """Every group of every coordinator, sorted by id; none before `__consumer_offsets`
        exists (it is made by the first FindCoordinator). An offsets partition without a
        leader, or a coordinator that moved or does not answer, is asked about again within
        request_timeout_ms."""
        return retry_within(self._list_groups_once, timeout_ms=self.request_timeout_ms,
                            backoff_ms=self.retry_backoff_ms, next_step=after_coordinator_error)

    def _list_groups_once(self, timeout_ms: int) -> list[GroupListing]:
        errors = self._connections.refresh([OFFSETS_TOPIC], timeout_ms)
        if OFFSETS_TOPIC in errors:
            if errors[OFFSETS_TOPIC].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                return []
            raise errors[OFFSETS_TOPIC]
        info = self._connections.metadata.topic(OFFSETS_TOPIC)
        assert info is not None
        endpoints = sorted({p.endpoint for p in info.partitions if p.endpoint and p.leader >= 0})
        if len(endpoints) == 0 or any(not p.endpoint or p.leader < 0 for p in info.partitions):
            raise ZlogError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                            f"some partitions of {OFFSETS_TOPIC} have no leader right now")
        found: dict[str, GroupListing] = {}
        for endpoint in endpoints:
            response = self._connections.call_endpoint(
                endpoint, ListGroupsRequestV0(), timeout_ms)
            if not isinstance(response, ListGroupsResponseV0):
                raise ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                f"ListGroups answered with {type(response).__name__}")
            if response.error_code != ErrorCode.NONE:
                raise for_code(response.error_code, f"listing groups at {endpoint}")
            for group in response.groups:
                found[group.group_id] = GroupListing(group.group_id, group.state,
                                                     group.group_type, group.protocol_type)
        return [found[g] for g in sorted(found)]

    def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        described: list[GroupDescription] = []
        for group_id in group_ids:
            response = self.link(group_id).call(
                DescribeGroupsRequestV0(group_ids=(group_id,)),
                DescribeGroupsResponseV0)
            for group in response.groups:
                if group.error_code != ErrorCode.NONE:
                    raise for_code(group.error_code, f"group {group.group_id!r}: "
                                   f"{ErrorCode(group.error_code).name.lower()}")
                described.append(GroupDescription(
                    group.group_id, group.state, group.group_type, group.protocol_type,
                    group.protocol_name, group.epoch,
                    tuple(_member(m, group.protocol_type) for m in group.members)))
        return described

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ZlogError | None]:
        """Each group's outcome: None (deleted), NON_EMPTY_GROUP (members left),
        GROUP_ID_NOT_FOUND."""
        outcome: dict[str, ZlogError | None] = {}
        for group_id in group_ids:
            response = self.link(group_id).call(
                DeleteGroupsRequestV0(group_ids=(group_id,)), DeleteGroupsResponseV0)
            for name, code in response.results:
                outcome[name] = None if code == ErrorCode.NONE else for_code(
                    code, f"group {name!r}: {_why(ErrorCode(code))}")
        return outcome

    def list_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        return fetch_committed(self.link(group_id), None)

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit `offsets` as a simple member (generation -1, no member id): the coordinator
        refuses it while the group has members."""
        try:
            commit_offsets(self.link(group_id),
                           {TopicPartition(*tp): offset for tp, offset in offsets.items()})
        except ZlogError as error:
            if error.code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.NON_EMPTY_GROUP):
                raise ZlogError(ErrorCode.NON_EMPTY_GROUP,
                                f"group {group_id!r} has members: its offsets can be altered "
                                "only once every consumer of it has left") from None
            raise


def _member(member: DescribedMember, protocol_type: str) -> GroupMemberDescription:
    assignment: tuple[TopicPartition, ...] = ()
    if protocol_type == CONSUMER_PROTOCOL_TYPE and member.assignment:
        assignment = tuple(sorted(decode_assignment(member.assignment).partitions))
    return GroupMemberDescription(member.member_id, member.group_instance_id, member.client_id,
                                  member.client_host, assignment)


def _why(code: ErrorCode) -> str:
    if code == ErrorCode.NON_EMPTY_GROUP:
        return "it still has members"
    if code == ErrorCode.GROUP_ID_NOT_FOUND:
        return "no such group"
    return code.name.lower().replace("_", " ") + (" (retry)" if is_retried(code) else "")
