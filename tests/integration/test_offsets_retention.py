"""Offsets retention on a real `zlog serve`: an emptied group's offsets go after the retention,
a group with a member keeps its own. The broker takes the retention in milliseconds
(`offsets_retention_ms`, which wins over Kafka's whole `offsets_retention_minutes`), so the
test waits seconds, not minutes (docs/groups.md §5.2)."""

from __future__ import annotations

import time

from tests.group_calls import GROUP_TOPIC, committed, find_coordinator
from zlog.errors import ErrorCode
from zlog.transport.messages.admin import (
    CreateTopicsRequestV0,
    CreateTopicsResponseV0,
    TopicSpec,
)
from zlog.transport.messages.groups import (
    GroupHeartbeatRequestV0,
    GroupHeartbeatResponseV0,
    OffsetCommitRequestV0,
    OffsetCommitResponseV0,
    PartitionCommit,
)
from zlog.transport.rpc import RpcClient
from zlog.types import TopicPartition
from zlog_testbed.broker_process import CALL_TIMEOUT_MS, broker_process
from zlog_testbed.waiting import wait_until

RETENTION_MS = 1_500
LEAVE_EPOCH = -1


def _beat(client: RpcClient, group_id: str, member_id: str, epoch: int,
          ) -> GroupHeartbeatResponseV0:
    reply = client.call(GroupHeartbeatRequestV0(
        group_id, member_id, epoch, rebalance_timeout_ms=30_000,
        subscribed_topics=(GROUP_TOPIC,) if epoch == 0 else None,
        owned=None if epoch != 0 else ()), CALL_TIMEOUT_MS)
    assert isinstance(reply, GroupHeartbeatResponseV0) and reply.error_code == ErrorCode.NONE, reply
    return reply


def _join_and_commit(client: RpcClient, group_id: str, offset: int) -> GroupHeartbeatResponseV0:
    """A member joins alone (so it holds every partition) and commits `offset` on one."""
    joined = _beat(client, group_id, "", 0)
    assert joined.assignment, joined
    tp = sorted(joined.assignment)[0]
    reply = client.call(OffsetCommitRequestV0(
        group_id, ((tp, PartitionCommit(offset)),), joined.member_epoch,
        joined.member_id), CALL_TIMEOUT_MS)
    assert isinstance(reply, OffsetCommitResponseV0)
    assert reply.partitions == ((tp, ErrorCode.NONE),), reply
    return joined


def test_an_emptied_groups_offsets_expire_and_a_live_groups_stay() -> None:
    with broker_process(workers=1, extra_args=[
            "--offsets-topic-num-partitions", "1", "--group-initial-rebalance-delay-ms", "0",
            "--offsets-retention-minutes", "60", "--offsets-retention-ms", str(RETENTION_MS),
            "--offsets-retention-check-interval-ms", "200"]) as broker:
        with RpcClient(broker.endpoint) as admin:
            created = admin.call(CreateTopicsRequestV0((
                TopicSpec(GROUP_TOPIC, 2, 1),)), CALL_TIMEOUT_MS)
            assert isinstance(created, CreateTopicsResponseV0)
            assert created.topics[0].error_code == 0
        endpoint = find_coordinator([broker.endpoint], "emptied").endpoint
        assert find_coordinator([broker.endpoint], "kept").endpoint == endpoint
        with RpcClient(endpoint) as client:
            kept = _join_and_commit(client, "kept", 7)
            leaving = _join_and_commit(client, "emptied", 5)
            committed_at = time.monotonic()
            _beat(client, "emptied", leaving.member_id, LEAVE_EPOCH)
            assert committed(client, "emptied") == {TopicPartition(GROUP_TOPIC, 0): 5}

            def emptied_offsets_gone() -> bool:
                _beat(client, "kept", kept.member_id, kept.member_epoch)  # keeps its member
                return committed(client, "emptied") == {}

            wait_until(emptied_offsets_gone, timeout_s=20, interval_s=0.1,
                       what="the emptied group's offsets to expire")
            assert time.monotonic() - committed_at >= RETENTION_MS / 1000, \
                "expired by the retention, not at once"
            assert committed(client, "kept") == {TopicPartition(GROUP_TOPIC, 0): 7}, \
                "a member subscribes to the topic: its group's offsets stay"
