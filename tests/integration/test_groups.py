"""Consumer groups on a real `zlog serve`: FindCoordinator, server-side members heartbeating
into an assignment, commits that survive a restart, bad input refused with its code. Raw
RpcClient requests (docs/groups.md, "Inside the worker")."""

from __future__ import annotations

from tests.group_calls import GROUP_TOPIC, find_coordinator
from zlog.errors import ErrorCode
from zlog.transport.messages.groups import (
    GroupHeartbeatRequestV0,
    GroupHeartbeatResponseV0,
    OffsetCommitRequestV0,
    OffsetCommitResponseV0,
    OffsetFetchRequestV0,
    OffsetFetchResponseV0,
    PartitionCommit,
)
from zlog.transport.rpc import RpcClient
from zlog.types import TopicPartition
from zlog_testbed.broker_process import CALL_TIMEOUT_MS, BrokerProcess
from zlog_testbed.waiting import wait_until

GROUP = "orders-readers"
TOPIC = GROUP_TOPIC


def _coordinator(broker: BrokerProcess) -> str:
    return find_coordinator([broker.endpoint], GROUP).endpoint


def _beat(client: RpcClient, member_id: str, epoch: int,
          owned: tuple[TopicPartition, ...] | None = None) -> GroupHeartbeatResponseV0:
    reply = client.call(GroupHeartbeatRequestV0(
        GROUP, member_id, epoch, rebalance_timeout_ms=30_000,
        subscribed_topics=(TOPIC,) if epoch == 0 else None, owned=owned), CALL_TIMEOUT_MS)
    assert isinstance(reply, GroupHeartbeatResponseV0)
    return reply


def test_members_share_a_topic_and_commits_survive_a_restart(group_broker: BrokerProcess) -> None:
    broker = group_broker
    endpoint = _coordinator(broker)
    with RpcClient(endpoint) as client:
        first = _beat(client, "", 0)
        assert first.error_code == ErrorCode.NONE and first.member_id, first
        assert first.assignment is not None and len(first.assignment) == 6
        second = _beat(client, "", 0)
        assert second.error_code == ErrorCode.NONE, second
        # The first member revokes what the second is to get; then the second gets it.
        mine: tuple[TopicPartition, ...] = first.assignment
        epoch = first.member_epoch
        theirs: tuple[TopicPartition, ...] = second.assignment or ()
        for _ in range(10):
            reply = _beat(client, first.member_id, epoch, mine)
            assert reply.error_code == ErrorCode.NONE, reply
            mine, epoch = reply.assignment if reply.assignment is not None else mine, \
                reply.member_epoch
            other = _beat(client, second.member_id, second.member_epoch, theirs)
            assert other.error_code == ErrorCode.NONE, other
            theirs = other.assignment if other.assignment is not None else theirs
            second = other
            if len(mine) == 3 and len(theirs) == 3:
                break
        assert sorted(mine + theirs) == [TopicPartition(TOPIC, p) for p in range(6)]
        assert len(mine) == len(theirs) == 3

        commit = client.call(OffsetCommitRequestV0(
            GROUP, ((mine[0], PartitionCommit(42, metadata="m")),),
            epoch, first.member_id), CALL_TIMEOUT_MS)
        assert isinstance(commit, OffsetCommitResponseV0)
        assert commit.partitions == ((mine[0], ErrorCode.NONE),)
        unknown = client.call(OffsetCommitRequestV0(
            "simple", ((TopicPartition("nope", 0), PartitionCommit(1)),)),
            CALL_TIMEOUT_MS)
        assert isinstance(unknown, OffsetCommitResponseV0)
        assert unknown.partitions[0][1] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    broker.kill_all()
    broker.start()
    with RpcClient(_coordinator(broker)) as client:
        def fetched() -> bool:
            reply = client.call(OffsetFetchRequestV0(GROUP, (mine[0],)),
                                CALL_TIMEOUT_MS)
            assert isinstance(reply, OffsetFetchResponseV0)
            if reply.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                return False
            assert reply.offsets[0].offset == 42 and reply.offsets[0].metadata == "m"
            return True

        wait_until(fetched, timeout_s=30, interval_s=0.1, what="the commit after a restart")
        empty = client.call(OffsetFetchRequestV0("never-seen"), CALL_TIMEOUT_MS)
        assert isinstance(empty, OffsetFetchResponseV0) and empty.offsets == ()
