"""The worker's group coordinators driven by hand: real partitions over in-memory logs, the
real produce path (DataPlane.append_batch), wire responses decoded, time moved by the test."""

from __future__ import annotations

from tests.clock import ManualClock
from tests.memory_log import MemoryLog
from zlog.broker.data.data_plane import DataPlane
from zlog.broker.data.group_host import GroupHost
from zlog.broker.data.isr import ReplicaSet
from zlog.broker.data.partition import Partition
from zlog.broker.worker_protocol import GroupSettings
from zlog.errors import ErrorCode
from zlog.groups.partitioning import OFFSETS_TOPIC, partition_for
from zlog.transport.codec import RequestHeader, decode_response
from zlog.transport.group_messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    GroupRequest,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionCommit,
)
from zlog.transport.messages import ErrorBody, Response
from zlog.transport.server import Reply
from zlog.types import TopicPartition

OFFSETS_PARTITIONS = 4
TOPIC = "t"
CLIENT = b"client"


def group_on(index: int, nth: int = 0) -> str:
    """The `nth` group id (in the order g0, g1, ...) whose offsets partition is `index`."""
    ids = (f"g{n}" for n in range(10_000))
    return [g for g in ids if partition_for(g, OFFSETS_PARTITIONS) == index][nth]


class Host:
    """One worker's GroupHost, the partitions it holds and the clock it runs on."""

    def __init__(self, partitions: dict[TopicPartition, Partition] | None = None) -> None:
        self.clock = ManualClock()
        self.partitions: dict[TopicPartition, Partition] = {} if partitions is None else partitions
        self.plane = DataPlane(self.partitions, clock=self.clock)
        self.groups = GroupHost(self.partitions, self.plane.append_batch, self.clock.wall_ms,
                                seed=7)
        self.groups.configure(GroupSettings({OFFSETS_TOPIC: OFFSETS_PARTITIONS, TOPIC: 3},
                                            initial_rebalance_delay_ms=0,
                                            min_session_timeout_ms=1000,
                                            consumer_session_timeout_ms=10_000,
                                            consumer_heartbeat_interval_ms=1000))
        self.correlation_id = 0

    def lead(self, index: int, replicas: ReplicaSet | None = None,
             log: MemoryLog | None = None, leader_epoch: int = 1) -> list[Reply]:
        tp = TopicPartition(OFFSETS_TOPIC, index)
        self.partitions[tp] = Partition(OFFSETS_TOPIC, index, log or MemoryLog(),
                                        leader_epoch=leader_epoch, replicas=replicas,
                                        compacted=True)
        return self.groups.partition_changed(tp)

    def offsets_log(self, index: int) -> MemoryLog:
        log = self.partitions[TopicPartition(OFFSETS_TOPIC, index)].log
        assert isinstance(log, MemoryLog)
        return log

    def send(self, request: GroupRequest, identity: bytes = CLIENT) -> list[Reply]:
        self.correlation_id += 1
        header = RequestHeader(request.API_KEY, request.API_VERSION, self.correlation_id)
        return self.groups.handle(identity, header, request, self.clock.now_ms)

    def call(self, request: GroupRequest) -> Response | ErrorBody:
        """A request answered at once (its reply released in the same call)."""
        replies = self.send(request)
        assert len(replies) == 1, replies
        return decode(replies[0])

    def commit(self, group_id: str, *offsets: tuple[int, int]) -> Response | ErrorBody:
        """A simple member's commit (no generation, no member id) of (partition, offset)s."""
        return self.call(commit_request(group_id, *offsets))

    def fetched(self, group_id: str) -> dict[int, int]:
        """The group's committed offsets by partition of TOPIC, as OffsetFetch answers."""
        response = self.call(OffsetFetchRequest(0, group_id))
        assert isinstance(response, OffsetFetchResponse), response
        assert response.error == ErrorCode.NONE, response
        return {tp.partition: f.offset for tp, f in response.offsets if tp.topic == TOPIC}


def commit_request(group_id: str, *offsets: tuple[int, int]) -> OffsetCommitRequest:
    return OffsetCommitRequest(0, group_id, tuple(
        (TopicPartition(TOPIC, p), PartitionCommit(o)) for p, o in offsets))


def decode(reply: Reply) -> Response | ErrorBody:
    _identity, frames = reply
    _header, response = decode_response([bytes(frame) for frame in frames])
    return response


def test_describe_and_delete_of_one_group_go_to_its_partition_not_partition_zero() -> None:
    """A Describe or Delete naming one group was routed as if its group id were "" (the
    partition 0 of every partition count): NOT_COORDINATOR from the very worker that
    coordinates the group, though OffsetFetch of the same group was answered."""
    host = Host()
    host.lead(2)
    group = group_on(2)
    assert host.commit(group, (0, 5)) == OffsetCommitResponse(
        ErrorCode.NONE, ((TopicPartition(TOPIC, 0), ErrorCode.NONE),))
    described = host.call(DescribeGroupsRequest(0, (group,)))
    assert isinstance(described, DescribeGroupsResponse)
    [description] = described.groups
    assert (description.group_id, description.error, description.state) == (
        group, ErrorCode.NONE, "Empty")
    deleted = host.call(DeleteGroupsRequest(0, (group,)))
    assert deleted == DeleteGroupsResponse(((group, ErrorCode.NONE),))
    assert host.fetched(group) == {}
