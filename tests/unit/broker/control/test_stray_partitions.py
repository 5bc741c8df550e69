"""Which partition directories a broker deletes because it holds no replica of them."""

from __future__ import annotations

from zlog.broker.control.metadata_state import ClusterState, PartitionInfo, TopicInfo
from zlog.broker.control.stray_partitions import partition_of_dir_name, stray_partitions
from zlog.types import TopicPartition


def _topic(name: str, *replica_sets: tuple[int, ...]) -> TopicInfo:
    partitions = tuple(PartitionInfo(index, replicas, replicas[0], 0, replicas, 0)
                       for index, replicas in enumerate(replica_sets))
    return TopicInfo(name, 0, len(replica_sets[0]), {}, partitions)


STATE = ClusterState(
    topics={"kept": _topic("kept", (1, 2), (2, 3)), "a-b-1": _topic("a-b-1", (3, 1))},
    deleting={"going": 2},
)


def test_only_names_of_partition_directories_are_read() -> None:
    assert partition_of_dir_name("orders-12") == TopicPartition("orders", 12)
    assert partition_of_dir_name("a-b-1-0") == TopicPartition("a-b-1", 0)
    for other in ("__raft", "meta.json", ".zlog.lock", "lost+found", "orders-", "-3",
                  "orders-01", "orders-+1", "orders-x", "bad name-0"):
        assert partition_of_dir_name(other) is None, other


def test_a_replica_placed_elsewhere_or_of_an_unknown_topic_is_a_stray() -> None:
    entries = ["kept-0", "kept-1", "kept-2", "a-b-1-0", "gone-0", "going-1", "__raft",
               "meta.json"]
    assert stray_partitions(entries, STATE, node_id=1) == [
        TopicPartition("gone", 0), TopicPartition("kept", 1), TopicPartition("kept", 2)]
    # Broker 3 holds kept-1 and a-b-1-0, not kept-0; a topic being deleted is the deletion's.
    assert stray_partitions(entries, STATE, node_id=3) == [
        TopicPartition("gone", 0), TopicPartition("kept", 0), TopicPartition("kept", 2)]


def test_a_replica_still_leaving_in_a_reassignment_is_kept() -> None:
    moving = PartitionInfo(0, (2, 3, 1), 2, 1, (2, 3, 1), 1, adding=(3,), removing=(1,))
    state = ClusterState(topics={"m": TopicInfo("m", 0, 2, {}, (moving,))})
    assert stray_partitions(["m-0"], state, node_id=1) == []
    done = PartitionInfo(0, (2, 3), 2, 1, (2, 3), 2)
    state = ClusterState(topics={"m": TopicInfo("m", 0, 2, {}, (done,))})
    assert stray_partitions(["m-0"], state, node_id=1) == [TopicPartition("m", 0)]
