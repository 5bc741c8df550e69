"""The coordinator of a group moves with the leadership of its `__consumer_offsets`
partition (docs/groups.md §1, §10): three brokers, a classic group that has committed, the
broker leading the group's offsets partition killed with SIGKILL. FindCoordinator then names
the new leader, whose coordinator has replayed the partition: the committed offsets are
there, the member that was in the group still is, and a new member joins it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.group_calls import (
    GROUP_TOPIC,
    call_coordinator,
    collect,
    committed,
    find_coordinator,
    join_request,
    new_member_id,
)
from zlog.client import Admin, NewTopic
from zlog.errors import ErrorCode
from zlog.groups.partitioning import OFFSETS_TOPIC, partition_for
from zlog.transport.messages.groups import (
    HeartbeatRequestV0,
    HeartbeatResponseV0,
    JoinGroupResponseV0,
    OffsetCommitRequestV0,
    OffsetCommitResponseV0,
    PartitionCommit,
    SyncGroupRequestV0,
    SyncGroupResponseV0,
)
from zlog.transport.rpc import RpcClient
from zlog.types import TopicPartition
from zlog_testbed.broker_process import CALL_TIMEOUT_MS
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes

pytestmark = pytest.mark.slow

OFFSETS_PARTITIONS: Final = 2  # a small offsets topic is created quickly
GROUP: Final = "failover-readers"
COMMITS: Final = {TopicPartition(GROUP_TOPIC, 0): 10, TopicPartition(GROUP_TOPIC, 1): 20}
FAILOVER_TIMEOUT_S: Final = 60.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    with cluster_processes(3, tmp_path, extra_args=[
            "--offsets-topic-num-partitions", str(OFFSETS_PARTITIONS),
            "--group-initial-rebalance-delay-ms", "0"]) as running:
        yield running


def _control_endpoints(cluster: ClusterProcesses) -> list[str]:
    return [broker.endpoint for broker in cluster.running()]


def _join(client: RpcClient, member_id: str) -> JoinGroupResponseV0:
    reply = call_coordinator(client, join_request(GROUP, member_id))
    assert isinstance(reply, JoinGroupResponseV0) and reply.error_code == ErrorCode.NONE, reply
    return reply


def _sync(client: RpcClient, generation: int, member_id: str,
          assignments: tuple[tuple[str, bytes], ...] = ()) -> None:
    reply = call_coordinator(client, SyncGroupRequestV0(GROUP, generation,
                                                         member_id, assignments=assignments))
    assert isinstance(reply, SyncGroupResponseV0) and reply.error_code == ErrorCode.NONE, reply


def _commit(client: RpcClient, generation: int, member_id: str,
            offsets: dict[TopicPartition, int]) -> None:
    reply = call_coordinator(client, OffsetCommitRequestV0(
        GROUP, tuple((tp, PartitionCommit(o)) for tp, o in offsets.items()),
        generation, member_id))
    assert isinstance(reply, OffsetCommitResponseV0), reply
    assert {code for _tp, code in reply.partitions} == {ErrorCode.NONE}, reply


def test_commits_and_members_survive_killing_the_coordinator(cluster: ClusterProcesses) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(GROUP_TOPIC, 2, replication_factor=3)])
    first = find_coordinator(_control_endpoints(cluster), GROUP)
    index = partition_for(GROUP, OFFSETS_PARTITIONS)
    cluster.wait_isr(OFFSETS_TOPIC, index, {1, 2, 3})  # every commit will be on every broker

    with RpcClient(first.endpoint) as client:
        member = new_member_id(client, GROUP)
        generation = _join(client, member).generation
        _sync(client, generation, member, ((member, b""),))
        _commit(client, generation, member, COMMITS)
        assert committed(client, GROUP) == COMMITS

    cluster.broker(first.node_id).kill_all()
    now = find_coordinator(_control_endpoints(cluster), GROUP, FAILOVER_TIMEOUT_S)
    assert now.node_id != first.node_id
    endpoint = now.endpoint

    with RpcClient(endpoint) as old, RpcClient(endpoint) as new:
        assert committed(old, GROUP) == COMMITS
        beat = call_coordinator(old, HeartbeatRequestV0(GROUP, generation,
                                                         member))
        assert beat == HeartbeatResponseV0(ErrorCode.NONE), "the group was replayed"
        newcomer = new_member_id(new, GROUP)
        joining = new.send(join_request(GROUP, newcomer), CALL_TIMEOUT_MS)
        rejoining = old.send(join_request(GROUP, member), CALL_TIMEOUT_MS)
        [rejoined] = collect(old, [rejoining])
        [joined] = collect(new, [joining])
        assert isinstance(rejoined, JoinGroupResponseV0)
        assert isinstance(joined, JoinGroupResponseV0)
        assert rejoined.error_code == joined.error_code == ErrorCode.NONE, (rejoined, joined)
        assert rejoined.generation == joined.generation > generation
        assert sorted(m.member_id for m in rejoined.members) == sorted([member, newcomer])
        later = rejoined.generation
        syncing = new.send(SyncGroupRequestV0(GROUP, later, newcomer),
                           CALL_TIMEOUT_MS)
        _sync(old, later, member, ((member, b""), (newcomer, b"")))
        [synced] = collect(new, [syncing])
        assert isinstance(synced, SyncGroupResponseV0) and synced.error_code == ErrorCode.NONE
        moved = {TopicPartition(GROUP_TOPIC, 0): 11}
        _commit(new, later, newcomer, moved)
        assert committed(new, GROUP) == COMMITS | moved


def test_raw_calls_are_answered_by_the_coordinator_just_found(cluster: ClusterProcesses) -> None:
    """The raw helpers behave as a client: the coordinator FindCoordinator names may not
    serve the group yet (its worker has not taken the offsets partition or its lease, or is
    loading it; or it is a killed broker not yet fenced), so the first calls to it, made at
    once, must still be answered: once right after the offsets topic is made, once right
    after the coordinator's broker is killed."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(GROUP_TOPIC, 2, replication_factor=3)])
    first = find_coordinator(_control_endpoints(cluster), GROUP)
    with RpcClient(first.endpoint) as client:
        assert new_member_id(client, GROUP)
        assert committed(client, GROUP) == {}
    cluster.wait_isr(OFFSETS_TOPIC, partition_for(GROUP, OFFSETS_PARTITIONS), {1, 2, 3})
    cluster.broker(first.node_id).kill_all()
    now = find_coordinator(_control_endpoints(cluster), GROUP)
    assert now.node_id != first.node_id
    with RpcClient(now.endpoint) as client:
        assert new_member_id(client, GROUP)
        assert committed(client, GROUP) == {}



def test_a_broker_that_is_not_the_controller_has_the_offsets_topic_created(
        cluster: ClusterProcesses) -> None:
    """FindCoordinator creates `__consumer_offsets` when it is missing; a broker that is not
    the controller has the controller create it (as it forwards CreateTopics, KIP-590), so a
    client that only knows that broker finds its coordinator."""
    controller = cluster.metadata().controller_id
    (node, broker) = next((n, b) for n, b in cluster.brokers.items() if n != controller)
    found = find_coordinator([broker.endpoint], GROUP)
    assert found.error_code == 0 and found.endpoint, (node, found)
