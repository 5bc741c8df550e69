"""A classic group on a real `zlog serve`, spoken by raw RpcClient requests as a Kafka client
would: two-round joins (KIP-394), the leader's assignment delivered by SyncGroup, a second
member's join seen as REBALANCE_IN_PROGRESS on heartbeat, leaving (docs/groups.md §4)."""

from __future__ import annotations

from tests.group_calls import GROUP_TOPIC, collect, find_coordinator, join_request, new_member_id
from zlog.errors import ErrorCode
from zlog.groups.classic.consumer_protocol import Assignment, decode_assignment, encode_assignment
from zlog.transport.messages.groups import (
    DescribeGroupsRequestV0,
    DescribeGroupsResponseV0,
    HeartbeatRequestV0,
    HeartbeatResponseV0,
    JoinGroupResponseV0,
    LeaveGroupRequestV0,
    LeaveGroupResponseV0,
    SyncGroupRequestV0,
    SyncGroupResponseV0,
)
from zlog.transport.rpc import RpcClient
from zlog.types import TopicPartition
from zlog_testbed.broker_process import CALL_TIMEOUT_MS, BrokerProcess
from zlog_testbed.waiting import wait_until

GROUP = "classic-readers"


def _heartbeat(client: RpcClient, generation: int, member_id: str) -> ErrorCode:
    reply = client.call(HeartbeatRequestV0(GROUP, generation, member_id),
                        CALL_TIMEOUT_MS)
    assert isinstance(reply, HeartbeatResponseV0)
    return reply.error_code


def _partitions(*numbers: int) -> bytes:
    return encode_assignment(Assignment(tuple(TopicPartition(GROUP_TOPIC, n) for n in numbers)))


def _describe(client: RpcClient) -> tuple[str, int, list[str]]:
    reply = client.call(DescribeGroupsRequestV0((GROUP,)), CALL_TIMEOUT_MS)
    assert isinstance(reply, DescribeGroupsResponseV0)
    [group] = reply.groups
    assert group.error_code == ErrorCode.NONE, group
    return group.state, group.epoch, sorted(m.member_id for m in group.members)


def test_two_members_join_sync_heartbeat_and_leave(group_broker: BrokerProcess) -> None:
    coordinator = find_coordinator([group_broker.endpoint], GROUP).endpoint
    with RpcClient(coordinator) as first, RpcClient(coordinator) as second:
        a = new_member_id(first, GROUP)
        [joined] = collect(first, [first.send(join_request(GROUP, a), CALL_TIMEOUT_MS)])
        assert isinstance(joined, JoinGroupResponseV0)
        assert (joined.error_code, joined.member_id, joined.leader_id, joined.protocol_name) == (
            ErrorCode.NONE, a, a, "range")
        assert [m.member_id for m in joined.members] == [a], "the leader sees every member"
        generation = joined.generation
        synced = first.call(SyncGroupRequestV0(
            GROUP, generation, a, assignments=((a, _partitions(*range(6))),)),
            CALL_TIMEOUT_MS)
        assert isinstance(synced, SyncGroupResponseV0) and synced.error_code == ErrorCode.NONE
        assert _heartbeat(first, generation, a) == ErrorCode.NONE
        assert _describe(first) == ("Stable", generation, [a])

        # A second member: its join parks and the first hears of the rebalance on heartbeat.
        b = new_member_id(second, GROUP)
        assert _heartbeat(first, generation, a) == ErrorCode.NONE, "an id alone changes nothing"
        joining_b = second.send(join_request(GROUP, b), CALL_TIMEOUT_MS)

        def told_to_rejoin() -> bool:  # b's join comes on another connection, in its time
            error = _heartbeat(first, generation, a)
            assert error in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS), error
            return error == ErrorCode.REBALANCE_IN_PROGRESS

        wait_until(told_to_rejoin, timeout_s=10, interval_s=0.05, what="a rebalance")
        joining_a = first.send(join_request(GROUP, a), CALL_TIMEOUT_MS)
        [rejoined] = collect(first, [joining_a])
        [b_joined] = collect(second, [joining_b])
        assert isinstance(rejoined, JoinGroupResponseV0)
        assert isinstance(b_joined, JoinGroupResponseV0)
        assert rejoined.generation == b_joined.generation == generation + 1
        assert rejoined.leader_id == b_joined.leader_id == a, "the leader rejoined: it leads"
        assert sorted(m.member_id for m in rejoined.members) == sorted([a, b])
        assert b_joined.members == (), "only the leader is told the subscriptions"
        generation += 1

        # b's SyncGroup parks until the leader's carries every assignment.
        syncing_b = second.send(SyncGroupRequestV0(GROUP, generation, b),
                                CALL_TIMEOUT_MS)
        leader_sync = first.call(SyncGroupRequestV0(
            GROUP, generation, a,
            assignments=((a, _partitions(0, 1, 2)), (b, _partitions(3, 4, 5)))), CALL_TIMEOUT_MS)
        assert isinstance(leader_sync, SyncGroupResponseV0)
        assert leader_sync.error_code == ErrorCode.NONE
        assert decode_assignment(leader_sync.assignment).partitions == tuple(
            TopicPartition(GROUP_TOPIC, n) for n in (0, 1, 2))
        [b_synced] = collect(second, [syncing_b])
        assert isinstance(b_synced, SyncGroupResponseV0) and b_synced.error_code == ErrorCode.NONE
        assert decode_assignment(b_synced.assignment).partitions == tuple(
            TopicPartition(GROUP_TOPIC, n) for n in (3, 4, 5))
        assert _heartbeat(second, generation, b) == ErrorCode.NONE
        assert _heartbeat(first, generation - 1, a) == ErrorCode.ILLEGAL_GENERATION
        assert _describe(first) == ("Stable", generation, sorted([a, b]))

        # b leaves: a is told to rejoin and forms the next generation alone.
        left = second.call(LeaveGroupRequestV0(GROUP, ((b, None),)), CALL_TIMEOUT_MS)
        assert left == LeaveGroupResponseV0(ErrorCode.NONE, ((b, None, ErrorCode.NONE),))
        assert _heartbeat(first, generation, a) == ErrorCode.REBALANCE_IN_PROGRESS
        [alone] = collect(first, [first.send(join_request(GROUP, a), CALL_TIMEOUT_MS)])
        assert isinstance(alone, JoinGroupResponseV0) and alone.error_code == ErrorCode.NONE
        assert (alone.generation, [m.member_id for m in alone.members]) == (generation + 1, [a])
        left = first.call(LeaveGroupRequestV0(GROUP, ((a, None),)), CALL_TIMEOUT_MS)
        assert isinstance(left, LeaveGroupResponseV0) and left.error_code == ErrorCode.NONE
        assert _describe(first) == ("Empty", generation + 2, [])
