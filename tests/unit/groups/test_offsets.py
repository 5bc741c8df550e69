"""Offset commit acceptance, fetch, retention and the admin requests."""

from __future__ import annotations

from tests.unit.groups.classic.test_machine import group_of, join_new, joined, stable_group
from tests.unit.groups.coordinator_driver import Driver
from zlog.errors import ErrorCode
from zlog.groups.classic.group import ClassicState
from zlog.groups.config import GroupConfig
from zlog.groups.offsets import latest_commits_only
from zlog.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    OffsetsRecord,
)
from zlog.transport.messages.groups import (
    DeleteGroupsRequestV0,
    DeleteGroupsResponseV0,
    DescribeGroupsRequestV0,
    DescribeGroupsResponseV0,
    FetchedOffset,
    LeaveGroupRequestV0,
    ListGroupsRequestV0,
    ListGroupsResponseV0,
    OffsetCommitRequestV0,
    OffsetCommitResponseV0,
    OffsetFetchRequestV0,
    OffsetFetchResponseV0,
    PartitionCommit,
)
from zlog.types import TopicPartition as TP

DAY_MS = 86_400_000


def commit(d: Driver, offsets: dict[TP, int | PartitionCommit], group: str = "g",
           **identity: object) -> OffsetCommitResponseV0:
    given = tuple((tp, v if isinstance(v, PartitionCommit) else PartitionCommit(v))
                  for tp, v in offsets.items())
    response = d.send(OffsetCommitRequestV0, group_id=group, offsets=given, **identity)
    assert isinstance(response, OffsetCommitResponseV0)
    return response


def fetched(d: Driver, group: str = "g", partitions: tuple[TP, ...] | None = None,
            ) -> dict[TP, int]:
    response = d.send(OffsetFetchRequestV0, group_id=group, partitions=partitions)
    assert isinstance(response, OffsetFetchResponseV0) and response.error_code == ErrorCode.NONE
    return {TP(f.topic, f.partition): f.offset for f in response.offsets}


def test_a_simple_group_commits_without_membership() -> None:
    d = Driver()
    response = commit(d, {TP("t", 0): 5, TP("t", 1): 7}, group="s")
    assert response.partitions == ((TP("t", 0), ErrorCode.NONE), (TP("t", 1), ErrorCode.NONE))
    assert fetched(d, "s") == {TP("t", 0): 5, TP("t", 1): 7}
    assert fetched(d, "s", (TP("t", 2),)) == {TP("t", 2): -1}
    assert fetched(d, "nobody") == {}
    assert d.replayed().groups["s"].offsets[TP("t", 1)].offset == 7


def test_bad_partitions_fail_alone_and_write_nothing() -> None:
    d = Driver(config=GroupConfig(offset_metadata_max_bytes=3))
    response = commit(d, {
        TP("t", 0): 1, TP("t", 6): 1, TP("nope", 0): 1,
        TP("t", 1): PartitionCommit(1, metadata="long"), TP("t", 2): -5,
    })
    assert dict(response.partitions) == {
        TP("t", 0): ErrorCode.NONE, TP("t", 6): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        TP("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        TP("t", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE, TP("t", 2): ErrorCode.OFFSET_OUT_OF_RANGE,
    }
    assert [r.key for r in d.log] == [OffsetCommitKey("g", "t", 0)]


def test_classic_commits_are_fenced_by_generation_and_state() -> None:
    d = Driver()
    a, _ = stable_group(d, 2)
    tp = {TP("t", 0): 3}
    assert commit(d, tp, member_id=a, generation=2).partitions == ((TP("t", 0), ErrorCode.NONE),)
    assert commit(d, tp, member_id=a, generation=1).error_code == ErrorCode.ILLEGAL_GENERATION
    assert commit(d, tp, member_id="ghost", generation=2).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(d, tp).error_code == ErrorCode.UNKNOWN_MEMBER_ID  # no identity, live group
    assert commit(d, tp, group="new", member_id=a, generation=1).error_code == (
        ErrorCode.ILLEGAL_GENERATION)
    _, rc = join_new(d)
    ra = d.join("g", a)
    assert commit(d, tp, member_id=a, generation=2).error_code == ErrorCode.NONE  # preparing
    d.tick(10_000)  # b neither rejoins nor heartbeats: its session ends the join
    assert joined(d, ra).generation == 3 and joined(d, rc).generation == 3
    assert commit(d, tp, member_id=a, generation=3).error_code == ErrorCode.REBALANCE_IN_PROGRESS


def test_offsets_of_an_emptied_group_expire_after_retention() -> None:
    d = Driver()
    (a,) = stable_group(d, 1)
    commit(d, {TP("t", 0): 9}, member_id=a, generation=1)
    d.send(LeaveGroupRequestV0, group_id="g", members=((a, None),))
    d.tick(7 * DAY_MS - 1)
    assert fetched(d) == {TP("t", 0): 9}
    d.tick(600_000)
    assert fetched(d) == {}
    assert "g" not in d.coordinator.groups and d.replayed().groups == {}


def test_a_stable_group_keeps_offsets_of_subscribed_topics_only() -> None:
    config = GroupConfig(initial_rebalance_delay_ms=0, offsets_retention_ms=60_000,
                         offsets_retention_check_interval_ms=5_000)
    d = Driver(config=config, counts={"t": 2, "old": 1})
    (a,) = stable_group(d, 1)
    commit(d, {TP("t", 0): 1, TP("old", 0): 1}, member_id=a, generation=1)
    for _ in range(20):
        d.tick(5_000)
        d.heartbeat(a, 1)
    assert fetched(d) == {TP("t", 0): 1}


def test_simple_group_offsets_expire_one_by_one() -> None:
    d = Driver()
    commit(d, {TP("t", 0): 1}, group="s")
    d.tick(DAY_MS)
    commit(d, {TP("t", 1): 1}, group="s")
    d.tick(6 * DAY_MS + 600_000)
    assert fetched(d, "s") == {TP("t", 1): 1}


def test_delete_groups() -> None:
    d = Driver()
    stable_group(d, 1)
    commit(d, {TP("t", 0): 1}, group="s")
    response = d.send(DeleteGroupsRequestV0, group_ids=("g", "s", "none"))
    assert response == DeleteGroupsResponseV0((
        ("g", ErrorCode.NON_EMPTY_GROUP), ("s", ErrorCode.NONE),
        ("none", ErrorCode.GROUP_ID_NOT_FOUND)))
    assert "s" not in d.replayed().groups and fetched(d, "s") == {}


def test_list_and_describe() -> None:
    d = Driver()
    a, b = stable_group(d, 2)
    commit(d, {TP("t", 0): 1}, group="s")
    listed = d.send(ListGroupsRequestV0)
    assert isinstance(listed, ListGroupsResponseV0)
    assert [(g.group_id, g.state, g.protocol_type) for g in listed.groups] == [
        ("g", "Stable", "consumer"), ("s", "Empty", "")]
    only_empty = d.send(ListGroupsRequestV0, states=frozenset({"Empty"}))
    assert isinstance(only_empty, ListGroupsResponseV0)
    assert [g.group_id for g in only_empty.groups] == ["s"]
    described = d.send(DescribeGroupsRequestV0, group_ids=("g", "none"))
    assert isinstance(described, DescribeGroupsResponseV0)
    g, none = described.groups
    assert (g.state, g.protocol_name, g.epoch) == ("Stable", "range", 2)
    assert {m.member_id: m.assignment for m in g.members} == {a: a.encode(), b: b.encode()}
    assert none.state == "Dead" and none.error_code == ErrorCode.NONE
    assert group_of(d).state is ClassicState.STABLE
    assert fetched(d, "s")[TP("t", 0)] == 1
    assert FetchedOffset("t", 0).offset == -1


def test_a_commit_that_writes_nothing_creates_no_group() -> None:
    d = Driver()
    assert dict(commit(d, {TP("nope", 0): 1}, group="s").partitions) == {
        TP("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert "s" not in d.coordinator.groups and d.log == []


def test_a_batch_keeps_only_the_latest_commit_of_each_partition_in_order() -> None:
    """What a compacted log would keep of the batch: a later commit or tombstone of the same
    (group, topic, partition) overwrites an earlier one; other keys and groups are untouched."""
    def record(group: str, partition: int, offset: int | None) -> OffsetsRecord:
        value = None if offset is None else OffsetCommitValue(offset, 0)
        return OffsetsRecord(OffsetCommitKey(group, "t", partition), value)

    metadata = OffsetsRecord(GroupMetadataKey("g"), GroupMetadataValue("consumer", 1, None,
                                                                       None, 0))
    batch = [record("g", 0, 1), metadata, record("g", 1, 5), record("h", 0, 7),
             record("g", 0, 2), metadata, record("g", 1, None), record("g", 0, 3)]
    assert latest_commits_only(batch) == [metadata, record("h", 0, 7), metadata,
                                          record("g", 1, None), record("g", 0, 3)]
    distinct = [record("g", 0, 1), record("g", 1, 1), record("h", 0, 1)]
    assert latest_commits_only(distinct) == distinct
