"""The worker's group coordinators driven by hand: real partitions over in-memory logs, the
real produce path (DataPlane.append_batch), wire responses decoded, time moved by the test."""

from __future__ import annotations

from dataclasses import replace

from tests.clock import ManualClock
from tests.memory_log import MemoryLog
from zlog.broker.data.data_plane import DataPlane
from zlog.broker.data.group_host import (
    LOAD_RETRY_BACKOFF_MAX_MS,
    LOAD_RETRY_BACKOFF_MS,
    GroupHost,
)
from zlog.broker.data.isr import ReplicaSet
from zlog.broker.data.partition import Partition
from zlog.broker.worker_protocol import GroupSettings
from zlog.errors import ErrorCode
from zlog.groups.classic.consumer_protocol import Subscription, encode_subscription
from zlog.groups.config import GroupConfig
from zlog.groups.partitioning import OFFSETS_TOPIC, partition_for
from zlog.record.header import validate_batch
from zlog.transport.codec import RequestHeader, decode_response
from zlog.transport.messages import (
    ErrorBody,
    Response,
)
from zlog.transport.messages.groups import (
    DeleteGroupsRequestV0,
    DeleteGroupsResponseV0,
    DescribeGroupsRequestV0,
    DescribeGroupsResponseV0,
    FetchedOffset,
    GroupHeartbeatRequestV0,
    GroupHeartbeatResponseV0,
    GroupRequest,
    JoinGroupRequestV0,
    JoinGroupResponseV0,
    ListGroupsRequestV0,
    ListGroupsResponseV0,
    OffsetCommitRequestV0,
    OffsetCommitResponseV0,
    OffsetFetchRequestV0,
    OffsetFetchResponseV0,
    PartitionCommit,
)
from zlog.transport.server import Reply
from zlog.types import TopicPartition

OFFSETS_PARTITIONS = 4
WITH_FOLLOWERS = ReplicaSet(0, frozenset({0, 1, 2}), frozenset({0, 1}), min_insync_replicas=2)
"""Replica 0 (this worker) leads, 1 is in sync: nothing is committed until 1 has fetched it."""
TOPIC = "t"
CLIENT = b"client"


def group_on(index: int, nth: int = 0) -> str:
    """The `nth` group id (in the order g0, g1, ...) whose offsets partition is `index`."""
    ids = (f"g{n}" for n in range(10_000))
    return [g for g in ids if partition_for(g, OFFSETS_PARTITIONS) == index][nth]


class Host:
    """One worker's GroupHost, the partitions it holds and the clock it runs on."""

    def __init__(self, initial_rebalance_delay_ms: int = 0,
                 offsets_retention_ms: int = GroupConfig().offsets_retention_ms) -> None:
        self.clock = ManualClock()
        self.partitions: dict[TopicPartition, Partition] = {}
        self.plane = DataPlane(self.partitions, clock=self.clock)
        self.groups = GroupHost(self.partitions, self.plane.append_batch, self.clock.wall_ms,
                                seed=7, lease_remaining_ms=self.plane.lease_remaining_ms)
        self.groups.configure(GroupSettings({OFFSETS_TOPIC: OFFSETS_PARTITIONS, TOPIC: 3},
                                            initial_rebalance_delay_ms,
                                            min_session_timeout_ms=1000,
                                            consumer_session_timeout_ms=10_000,
                                            consumer_heartbeat_interval_ms=1000,
                                            offsets_retention_ms=offsets_retention_ms,
                                            offsets_retention_check_interval_ms=1000))
        self.correlation_id = 0

    def lead(self, index: int, replicas: ReplicaSet | None = None,
             log: MemoryLog | None = None, leader_epoch: int = 1) -> list[Reply]:
        return self.groups.partition_changed(self.hold(index, replicas, log, leader_epoch))

    def hold(self, index: int, replicas: ReplicaSet | None = None,
             log: MemoryLog | None = None, leader_epoch: int = 1) -> TopicPartition:
        """The partition, opened as its leader (partition_host.py), before the worker is told
        it leads it."""
        tp = TopicPartition(OFFSETS_TOPIC, index)
        partition = Partition(OFFSETS_TOPIC, index, log or MemoryLog(),
                              leader_epoch=leader_epoch, replicas=replicas, compacted=True)
        partition.start_term(self.clock.now_ms)
        self.partitions[tp] = partition
        return tp

    def offsets(self, index: int) -> Partition:
        return self.partitions[TopicPartition(OFFSETS_TOPIC, index)]

    def offsets_log(self, index: int) -> MemoryLog:
        log = self.offsets(index).log
        assert isinstance(log, MemoryLog)
        return log

    def follower_catches_up(self, index: int) -> list[Reply]:
        """Replica 1 fetches at the log end of partition `index`; the replies that releases."""
        partition = self.offsets(index)
        partition.note_replica_fetch(1, partition.log.log_end_offset, now_ms=0, broker_epoch=1,
                                     log_start_offset=0)
        return self.groups.release()

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
        response = self.call(OffsetFetchRequestV0(group_id))
        assert isinstance(response, OffsetFetchResponseV0), response
        assert response.error_code == ErrorCode.NONE, response
        return {f.partition: f.offset for f in response.offsets if f.topic == TOPIC}


def commit_request(group_id: str, *offsets: tuple[int, int]) -> OffsetCommitRequestV0:
    return OffsetCommitRequestV0(group_id, tuple(
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
    assert host.commit(group, (0, 5)) == OffsetCommitResponseV0(
        ErrorCode.NONE, ((TopicPartition(TOPIC, 0), ErrorCode.NONE),))
    described = host.call(DescribeGroupsRequestV0((group,)))
    assert isinstance(described, DescribeGroupsResponseV0)
    [description] = described.groups
    assert (description.group_id, description.error_code, description.state) == (
        group, ErrorCode.NONE, "Empty")
    deleted = host.call(DeleteGroupsRequestV0((group,)))
    assert deleted == DeleteGroupsResponseV0(((group, ErrorCode.NONE),))
    assert host.fetched(group) == {}


def join_request(group_id: str, member_id: str = "") -> JoinGroupRequestV0:
    subscription = encode_subscription(Subscription((TOPIC,)))
    return JoinGroupRequestV0(group_id, member_id, "consumer", (("range", subscription),),
                            session_timeout_ms=10_000, rebalance_timeout_ms=30_000)


def records_in(batch: bytearray) -> int:
    return validate_batch(batch, check_crc=True).record_count


def test_a_new_leader_loads_the_groups_its_log_holds() -> None:
    first = Host()
    first.lead(1)
    group = group_on(1)
    first.commit(group, (0, 5), (2, 9))
    successor = Host()
    before = successor.call(OffsetFetchRequestV0(group))
    assert before == OffsetFetchResponseV0(ErrorCode.NOT_COORDINATOR), "it does not lead yet"
    successor.lead(1, log=first.offsets_log(1), leader_epoch=2)
    assert successor.fetched(group) == {0: 5, 2: 9}


def test_requests_go_to_the_coordinator_of_their_groups_partition() -> None:
    host = Host()
    host.lead(1)
    host.lead(2)
    on_1, on_2, elsewhere = group_on(1), group_on(2), group_on(3)
    host.commit(on_1, (0, 1))
    assert (host.offsets_log(1).log_end_offset, host.offsets_log(2).log_end_offset) == (1, 0)
    host.commit(on_2, (0, 2))
    assert (host.offsets_log(1).log_end_offset, host.offsets_log(2).log_end_offset) == (1, 1)
    refused = host.commit(elsewhere, (0, 3))
    assert refused == OffsetCommitResponseV0(
        ErrorCode.NOT_COORDINATOR, ((TopicPartition(TOPIC, 0), ErrorCode.NOT_COORDINATOR),))
    assert (host.offsets_log(1).log_end_offset, host.offsets_log(2).log_end_offset) == (1, 1)
    assert (host.fetched(on_1), host.fetched(on_2)) == ({0: 1}, {0: 2})


def test_the_records_of_one_output_are_one_batch() -> None:
    host = Host()
    host.lead(1)
    host.commit(group_on(1), (0, 1), (1, 2), (2, 3))
    [batch] = host.offsets_log(1).batches
    assert records_in(batch) == 3
    host.commit(group_on(1), (0, 4))
    assert [records_in(b) for b in host.offsets_log(1).batches] == [3, 1]


def test_replies_wait_until_the_high_watermark_covers_what_was_written_before_them() -> None:
    """A reply to a write, and a reply that writes nothing but was computed from a write not
    yet committed, are both held until the in-sync follower has the write."""
    host = Host()
    host.lead(1, WITH_FOLLOWERS)
    group = group_on(1)
    assert host.send(commit_request(group, (0, 5))) == [], "the follower does not have it"
    assert host.send(OffsetFetchRequestV0(group)) == [], "it would reveal the commit"
    assert host.offsets(1).high_watermark == 0
    commit_reply, fetch_reply = host.follower_catches_up(1)
    assert decode(commit_reply) == OffsetCommitResponseV0(
        ErrorCode.NONE, ((TopicPartition(TOPIC, 0), ErrorCode.NONE),))
    assert decode(fetch_reply) == OffsetFetchResponseV0(
        ErrorCode.NONE, (FetchedOffset(TOPIC, 0, 5),))
    assert host.groups.release() == [], "each reply is released once"
    assert host.fetched(group) == {0: 5}, "nothing unwritten before it: answered at once"


def test_losing_the_leadership_answers_parked_and_unreleased_requests_not_coordinator() -> None:
    host = Host(initial_rebalance_delay_ms=3000)
    host.lead(1, WITH_FOLLOWERS)
    group = group_on(1)
    required = host.call(join_request(group))
    assert isinstance(required, JoinGroupResponseV0)
    assert required.error_code == ErrorCode.MEMBER_ID_REQUIRED
    joining = join_request(group, required.member_id)
    assert host.send(joining, b"joiner") == [], "parked: the initial delay"
    committing = commit_request(group_on(1, 1), (0, 5))
    assert host.send(committing, b"committer") == [], "waits for the follower"
    assert host.groups.partition_changed(TopicPartition(OFFSETS_TOPIC, 1)) == [], "no change"
    host.offsets(1).become(leader_epoch=2, is_leader=False)
    answers = host.groups.partition_changed(TopicPartition(OFFSETS_TOPIC, 1))
    codes = {identity: _error_code(decode((identity, frames))) for identity, frames in answers}
    assert codes == {b"joiner": ErrorCode.NOT_COORDINATOR,
                     b"committer": ErrorCode.NOT_COORDINATOR}
    assert host.commit(group, (0, 1)) == OffsetCommitResponseV0(
        ErrorCode.NOT_COORDINATOR, ((TopicPartition(TOPIC, 0), ErrorCode.NOT_COORDINATOR),))
    assert host.groups.ms_to_next_timer() is None, "no coordinator, no timers"


def _error_code(response: Response | ErrorBody) -> int:
    assert isinstance(response, ErrorBody), response
    return response.error_code


def test_a_failed_append_answers_not_coordinator_and_reloads_from_the_log() -> None:
    """Memory never runs ahead of the log: the commit the log refused is not served after."""
    host = Host()
    host.lead(1)
    group = group_on(1)
    host.commit(group, (0, 5))
    host.offsets(1).set_replicas(ReplicaSet(0, frozenset({0, 1}), frozenset({0}), 2))
    assert _error_code(host.commit(group, (0, 7))) == ErrorCode.NOT_COORDINATOR
    assert host.offsets_log(1).log_end_offset == 1, "acks=all below min.insync: not appended"
    assert host.fetched(group) == {0: 5}
    host.offsets(1).set_replicas(ReplicaSet.single())
    host.commit(group, (0, 8))
    assert host.fetched(group) == {0: 8}, "the reloaded coordinator goes on"


def test_describe_and_delete_over_several_partitions_are_merged_in_request_order() -> None:
    host = Host()
    host.lead(1)
    host.lead(2, WITH_FOLLOWERS)
    on_1, on_2, elsewhere, unknown = group_on(1), group_on(2), group_on(3), group_on(1, 1)
    host.commit(on_1, (0, 1))
    host.send(commit_request(on_2, (0, 2)))
    host.follower_catches_up(2)
    described = host.call(DescribeGroupsRequestV0((elsewhere, on_2, unknown, on_1)))
    assert isinstance(described, DescribeGroupsResponseV0)
    assert [(g.group_id, g.error_code, g.state) for g in described.groups] == [
        (elsewhere, ErrorCode.NOT_COORDINATOR, ""), (on_2, ErrorCode.NONE, "Empty"),
        (unknown, ErrorCode.NONE, "Dead"), (on_1, ErrorCode.NONE, "Empty")]
    listed = host.call(ListGroupsRequestV0())
    assert isinstance(listed, ListGroupsResponseV0)
    assert sorted(g.group_id for g in listed.groups) == sorted([on_1, on_2])
    assert host.send(DeleteGroupsRequestV0((on_2, elsewhere, on_1, unknown))) == [], (
        "partition 2's tombstones are not on its follower yet")
    [deleted] = host.follower_catches_up(2)
    assert decode(deleted) == DeleteGroupsResponseV0((
        (on_2, ErrorCode.NONE), (elsewhere, ErrorCode.NOT_COORDINATOR), (on_1, ErrorCode.NONE),
        (unknown, ErrorCode.GROUP_ID_NOT_FOUND)))
    assert (host.fetched(on_1), host.fetched(on_2)) == ({}, {})
    assert host.call(DescribeGroupsRequestV0(())) == DescribeGroupsResponseV0(())


class FailingReads(MemoryLog):
    """A log whose first `failures` reads fail as a disk can (the bytes themselves are fine)."""

    def __init__(self, source: MemoryLog) -> None:
        super().__init__()
        for batch in source.batches:
            self.append_replicated(batch)
        self.failures = 0

    def read(self, offset: int, max_bytes: int,
             upto_offset: int | None = None) -> list[memoryview]:
        if self.failures > 0:
            self.failures -= 1
            raise OSError(5, "Input/output error")
        return super().read(offset, max_bytes, upto_offset)


def test_a_load_that_fails_is_tried_again_with_a_doubling_backoff_while_leading() -> None:
    """Before, a failed load left the partition's groups answered NOT_COORDINATOR until the
    leadership moved, which it need never do: the groups were gone for good."""
    first = Host()
    first.lead(1)
    group = group_on(1)
    first.commit(group, (0, 5))
    host = Host()
    log = FailingReads(first.offsets_log(1))
    tp = host.hold(1, log=log, leader_epoch=2)
    log.failures = 3
    host.groups.partition_changed(tp)
    refused = host.call(OffsetFetchRequestV0(group))
    assert refused == OffsetFetchResponseV0(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), \
        "a retriable answer, so the client asks this worker again"
    waits = []
    for _ in range(2):
        wait_ms = host.groups.ms_to_next_timer()
        assert wait_ms is not None
        waits.append(wait_ms)
        host.clock.advance(wait_ms - 1)
        host.groups.on_timer()
        assert host.groups.ms_to_next_timer() == 1, "not tried before its time"
        host.clock.advance(1)
        host.groups.on_timer()
    assert waits == [LOAD_RETRY_BACKOFF_MS, 2 * LOAD_RETRY_BACKOFF_MS]
    host.clock.advance(4 * LOAD_RETRY_BACKOFF_MS)
    host.groups.on_timer()
    assert host.fetched(group) == {0: 5}, "the fourth try reads the log"


def test_load_retries_stop_with_the_leadership_and_their_backoff_is_bounded() -> None:
    first = Host()
    first.lead(1)
    first.commit(group_on(1), (0, 5))
    host = Host()
    log = FailingReads(first.offsets_log(1))
    tp = host.hold(1, log=log, leader_epoch=2)
    log.failures = 1_000
    host.groups.partition_changed(tp)
    for _ in range(12):
        wait_ms = host.groups.ms_to_next_timer()
        assert wait_ms is not None and wait_ms <= LOAD_RETRY_BACKOFF_MAX_MS
        host.clock.advance(wait_ms)
        host.groups.on_timer()
    assert host.groups.ms_to_next_timer() == LOAD_RETRY_BACKOFF_MAX_MS
    del host.partitions[tp]
    host.groups.partition_changed(tp)
    assert host.groups.ms_to_next_timer() is None, "no leadership, nothing to retry"
    assert host.call(OffsetFetchRequestV0(group_on(1))) == OffsetFetchResponseV0(
        ErrorCode.NOT_COORDINATOR)


def test_offsets_of_an_emptied_group_are_deleted_after_the_configured_retention() -> None:
    """offsets.retention.minutes reaches the coordinator: a simple group's offset expires a
    retention after its commit, as a tombstone in the log, and the group is then gone."""
    retention_ms = 5_000
    host = Host(offsets_retention_ms=retention_ms)
    host.lead(1)
    group = group_on(1)
    host.commit(group, (0, 5))
    host.clock.advance(retention_ms - 1_000)
    host.groups.on_timer()
    assert host.fetched(group) == {0: 5}, "not yet expired"
    end_before = host.offsets_log(1).log_end_offset
    while host.offsets_log(1).log_end_offset == end_before:
        wait_ms = host.groups.ms_to_next_timer()
        assert wait_ms is not None and host.clock.now_ms < 1_700_000_000_000 + 3 * retention_ms
        host.clock.advance(wait_ms)
        host.groups.on_timer()
    assert host.fetched(group) == {}
    successor = Host()
    successor.lead(1, log=host.offsets_log(1), leader_epoch=2)
    assert successor.fetched(group) == {}, "the tombstone is in the log, not only in memory"
def test_the_outputs_of_one_turn_are_one_batch_and_answered_after_it() -> None:
    """Between defer_appends and flush (one drain of the worker's socket) every output's
    records go to one batch per partition; nothing is answered before the flush, and a reply
    that writes nothing waits for the records computed before it."""
    host = Host()
    host.lead(1)
    host.lead(2)
    group, other = group_on(1), group_on(2)
    host.groups.defer_appends()
    assert host.send(commit_request(group, (0, 1), (1, 2))) == []
    assert host.send(commit_request(group, (0, 3))) == []
    assert host.send(OffsetFetchRequestV0(group)) == [], "computed after unflushed commits"
    assert host.send(commit_request(other, (0, 9))) == []
    assert host.offsets_log(1).log_end_offset == 0, "nothing appended before the flush"
    first, second, fetch, elsewhere = (decode(r) for r in host.groups.flush())
    assert [records_in(b) for b in host.offsets_log(1).batches] == [2], (
        "partition 0's commit of 1 is overwritten by its commit of 3 in the same batch")
    assert [records_in(b) for b in host.offsets_log(2).batches] == [1]
    assert first == OffsetCommitResponseV0(ErrorCode.NONE, (
        (TopicPartition(TOPIC, 0), ErrorCode.NONE), (TopicPartition(TOPIC, 1), ErrorCode.NONE)))
    assert second == elsewhere == OffsetCommitResponseV0(
        ErrorCode.NONE, ((TopicPartition(TOPIC, 0), ErrorCode.NONE),))
    assert fetch == OffsetFetchResponseV0(ErrorCode.NONE, (
        FetchedOffset(TOPIC, 0, 3), FetchedOffset(TOPIC, 1, 2)))
    assert host.groups.flush() == [], "each reply is released once"
    successor = Host()
    successor.lead(1, log=host.offsets_log(1), leader_epoch=2)
    assert successor.fetched(group) == {0: 3, 1: 2}, "the log holds the latest of each"
    host.commit(group, (0, 4))
    assert [records_in(b) for b in host.offsets_log(1).batches] == [2, 1], "no turn: per output"


def test_a_failed_append_of_a_turn_answers_each_of_its_requests_not_coordinator() -> None:
    host = Host()
    host.lead(1)
    group = group_on(1)
    host.commit(group, (0, 5))
    host.offsets(1).set_replicas(ReplicaSet(0, frozenset({0, 1}), frozenset({0}), 2))
    host.groups.defer_appends()
    assert host.send(commit_request(group, (0, 6)), b"a") == []
    assert host.send(commit_request(group, (0, 7)), b"b") == []
    answers = host.groups.flush()
    assert {identity: _error_code(decode((identity, frames))) for identity, frames in answers
            } == {b"a": ErrorCode.NOT_COORDINATOR, b"b": ErrorCode.NOT_COORDINATOR}
    host.offsets(1).set_replicas(ReplicaSet.single())
    assert host.fetched(group) == {0: 5}, "memory never ran ahead of the log"


def test_a_lapsed_lease_stops_the_coordinators_until_it_is_renewed() -> None:
    """Past the broker's lease another broker may coordinate these groups: parked requests
    and every group request hear NOT_COORDINATOR (no stale OffsetFetch or Describe), no
    timer runs (the member's session does not expire, nothing is written), and a renewed
    lease loads the coordinator again from the log with the member still in its group."""
    host = Host(initial_rebalance_delay_ms=3000)
    host.plane.lease_until_ms = host.clock.now_ms + 500
    host.lead(1)
    group, classic, simple = group_on(1), group_on(1, 1), group_on(1, 2)
    joined = host.call(GroupHeartbeatRequestV0(group, "m1", 0, rebalance_timeout_ms=60_000,
                                             subscribed_topics=(TOPIC,), owned=()))
    assert isinstance(joined, GroupHeartbeatResponseV0) and joined.error_code == ErrorCode.NONE
    host.commit(simple, (0, 5))
    required = host.call(join_request(classic))
    assert isinstance(required, JoinGroupResponseV0)
    assert host.send(join_request(classic, required.member_id), b"joiner") == [], "parked"
    assert host.groups.ms_to_next_timer() == 500, "wakes when the lease runs out"
    host.clock.advance(500)
    answers = host.groups.on_timer()
    assert [(identity, _error_code(decode((identity, frames))))
            for identity, frames in answers] == [(b"joiner", ErrorCode.NOT_COORDINATOR)]
    end = host.offsets_log(1).log_end_offset
    assert host.call(OffsetFetchRequestV0(simple)) == OffsetFetchResponseV0(
        ErrorCode.NOT_COORDINATOR)
    assert host.commit(simple, (0, 9)) == OffsetCommitResponseV0(
        ErrorCode.NOT_COORDINATOR, ((TopicPartition(TOPIC, 0), ErrorCode.NOT_COORDINATOR),))
    assert host.call(ListGroupsRequestV0()) == ListGroupsResponseV0(ErrorCode.NOT_COORDINATOR)
    described = host.call(DescribeGroupsRequestV0((group,)))
    assert isinstance(described, DescribeGroupsResponseV0)
    assert described.groups[0].error_code == ErrorCode.NOT_COORDINATOR
    host.clock.advance(60_000)  # far past the member's session
    assert host.groups.on_timer() == [] and host.groups.ms_to_next_timer() is None
    assert host.offsets_log(1).log_end_offset == end, "a stale coordinator writes nothing"
    host.plane.lease_until_ms = host.clock.now_ms + 5_000
    assert host.groups.check_lease() == []
    assert host.fetched(simple) == {0: 5}
    described = host.call(DescribeGroupsRequestV0((group,)))
    assert isinstance(described, DescribeGroupsResponseV0)
    assert [m.member_id for m in described.groups[0].members] == ["m1"], \
        "the member's session was not run out while the coordinator was stopped"


class ReadOffsets(MemoryLog):
    """A log that notes the offset of every read: what a load replayed."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[int] = []

    def read(self, offset: int, max_bytes: int,
             upto_offset: int | None = None) -> list[memoryview]:
        self.reads.append(offset)
        return super().read(offset, max_bytes, upto_offset)


def test_a_renewed_lease_replays_only_what_was_written_since_the_last_load() -> None:
    """A busy worker's lease can lapse and come back every second; replaying a long offsets
    log at each renewal blocked its loop for seconds each time until its supervisor killed it
    as silent (a soak's broker crash-looped so). Within one leader epoch the log only grows,
    so a reload replays its new records onto what the last load replayed; a new epoch (the
    log may have been cut and rewritten meanwhile) replays it whole."""
    host = Host()
    log = ReadOffsets()
    host.plane.lease_until_ms = host.clock.now_ms + 500
    host.lead(1, log=log)
    group = group_on(1)

    def lapse_and_renew() -> None:
        host.clock.advance(host.plane.lease_until_ms - host.clock.now_ms)
        host.groups.on_timer()
        assert host.call(OffsetFetchRequestV0(group)) == OffsetFetchResponseV0(
            ErrorCode.NOT_COORDINATOR)
        host.plane.lease_until_ms = host.clock.now_ms + 500
        host.groups.check_lease()

    host.commit(group, (0, 5))
    first_end = log.log_end_offset
    log.reads.clear()
    lapse_and_renew()
    assert log.reads == [0], "the first load saw an empty log: everything is new"
    assert host.fetched(group) == {0: 5}
    host.commit(group, (0, 9), (1, 3))
    log.reads.clear()
    lapse_and_renew()
    assert log.reads == [first_end], "only the batch written since the last load"
    assert host.fetched(group) == {0: 9, 1: 3}
    log.reads.clear()
    lapse_and_renew()
    assert log.reads == [], "nothing new, nothing read"
    assert host.fetched(group) == {0: 9, 1: 3}
    log.reads.clear()
    host.lead(1, log=log, leader_epoch=2)
    assert log.reads[0] == 0, "a new leader epoch replays the whole log"
    assert host.fetched(group) == {0: 9, 1: 3}


def test_a_held_heartbeat_is_answered_at_its_hold_timer_or_not_coordinator() -> None:
    """The worker keeps a held GroupHeartbeat parked like a JoinGroup: its timer answers it
    from the worker's loop, and a lost leadership answers it NOT_COORDINATOR."""
    host = Host()
    host.lead(1)
    group = group_on(1)
    joined = host.call(GroupHeartbeatRequestV0(group, "m", 0, rebalance_timeout_ms=30_000,
                                             subscribed_topics=(TOPIC,)))
    assert isinstance(joined, GroupHeartbeatResponseV0) and joined.assignment is not None
    idle = GroupHeartbeatRequestV0(group, "m", joined.member_epoch, owned=joined.assignment,
                                 max_wait_ms=1_000)
    assert host.send(idle, b"held") == [], "nothing changed for it: held"
    assert host.groups.ms_to_next_timer() == 1_000
    host.clock.advance(1_000)
    (answered,) = host.groups.on_timer()
    assert answered[0] == b"held"
    assert decode(answered) == GroupHeartbeatResponseV0(
        ErrorCode.NONE, "", "m", joined.member_epoch, 1_000, 10_000, None)
    assert host.send(replace(idle, owned=None), b"held") == []
    host.offsets(1).become(leader_epoch=2, is_leader=False)
    (lost,) = host.groups.partition_changed(TopicPartition(OFFSETS_TOPIC, 1))
    assert lost[0] == b"held" and _error_code(decode(lost)) == ErrorCode.NOT_COORDINATOR



def test_held_members_are_woken_once_per_turn_with_everything_the_turn_released() -> None:
    """The heartbeats of one turn that free partitions wake the held members once, at the
    flush: a joiner waiting for two releases of one turn hears both in one answer."""
    host = Host()
    assert host.groups.settings is not None
    host.groups.configure(replace(host.groups.settings, partition_counts={
        OFFSETS_TOPIC: OFFSETS_PARTITIONS, TOPIC: 6}))
    host.lead(1)
    group = group_on(1)
    epochs: dict[str, int] = {}

    def beat(member_id: str, owned: tuple[TopicPartition, ...] | None = None,
             ) -> dict[bytes, GroupHeartbeatResponseV0]:
        """A long-poll heartbeat (a join without an epoch); the answers it released."""
        epoch = epochs.get(member_id, 0)
        join = {"rebalance_timeout_ms": 30_000, "subscribed_topics": (TOPIC,)} if not epoch else {}
        replies = host.send(GroupHeartbeatRequestV0(group, member_id, epoch, owned=owned,
                                                  max_wait_ms=1_000, **join),  # type: ignore[arg-type]
                            member_id.encode())
        return {identity: answered for identity, answered in
                ((identity, decode((identity, frames))) for identity, frames in replies)
                if isinstance(answered, GroupHeartbeatResponseV0)}

    def given(answers: dict[bytes, GroupHeartbeatResponseV0], member_id: str,
              ) -> tuple[TopicPartition, ...]:
        answer = answers[member_id.encode()]
        assert answer.error_code == ErrorCode.NONE and answer.assignment is not None, answer
        epochs[member_id] = answer.member_epoch
        return answer.assignment

    a = given(beat("a"), "a")
    assert len(a) == 6 and beat("a", a) == {}, "it holds what it was given: held"
    joined = beat("b")  # news for a, answered in the same call
    a = given(joined, "a")
    b = given(joined, "b")
    assert (len(a), b) == (3, ())
    released = beat("a", a)
    epochs["a"] = released[b"a"].member_epoch
    b = given(beat("b", ()), "b")
    assert len(b) == 3
    assert beat("b", b) == {} and beat("a", a) == {}, "both settled: held"
    joined = beat("c")
    a, b, c = given(joined, "a"), given(joined, "b"), given(joined, "c")
    assert (len(a), len(b), c) == (2, 2, ())
    assert beat("c", ()) == {}, "nothing free for it yet: held"
    host.groups.defer_appends()
    assert beat("a", a) == {} and beat("b", b) == {}, "nothing answered before the flush"
    answers = {identity: decode((identity, frames)) for identity, frames in host.groups.flush()}
    assert set(answers) == {b"a", b"b", b"c"}
    gained = answers[b"c"]
    assert isinstance(gained, GroupHeartbeatResponseV0) and gained.assignment is not None
    assert len(gained.assignment) == 2, "both releases in one answer, not one per round trip"
    assert not set(gained.assignment) & (set(a) | set(b))
