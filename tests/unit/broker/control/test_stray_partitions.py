"""Which partition directories a broker deletes because it holds no replica of them."""

from __future__ import annotations

from pathlib import Path

from zlog.broker.control.metadata.state import ClusterState, PartitionInfo, TopicInfo
from zlog.broker.control.stray_partitions import partition_of_dir_name, stray_partitions
from zlog.shm_segments.partition_metadata import read_topic_id, write_topic_id
from zlog.types import TopicPartition

TOPIC_ID = "5" * 32


def _zlogs(name: str) -> str | None:
    """Every entry is a partition directory zlog created."""
    del name
    return TOPIC_ID


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
    assert stray_partitions(entries, STATE, 1, _zlogs) == [
        TopicPartition("gone", 0), TopicPartition("kept", 1), TopicPartition("kept", 2)]
    # Broker 3 holds kept-1 and a-b-1-0, not kept-0; a topic being deleted is the deletion's.
    assert stray_partitions(entries, STATE, 3, _zlogs) == [
        TopicPartition("gone", 0), TopicPartition("kept", 0), TopicPartition("kept", 2)]


def test_a_replica_still_leaving_in_a_reassignment_is_kept() -> None:
    moving = PartitionInfo(0, (2, 3, 1), 2, 1, (2, 3, 1), 1, adding=(3,), removing=(1,))
    state = ClusterState(topics={"m": TopicInfo("m", 0, 2, {}, (moving,))})
    assert stray_partitions(["m-0"], state, 1, _zlogs) == []
    done = PartitionInfo(0, (2, 3), 2, 1, (2, 3), 2)
    state = ClusterState(topics={"m": TopicInfo("m", 0, 2, {}, (done,))})
    assert stray_partitions(["m-0"], state, 1, _zlogs) == [TopicPartition("m", 0)]


def test_only_directories_zlog_created_are_strays(tmp_path: Path) -> None:
    """Named like partitions of an unknown topic, only the directory carrying zlog's
    partition.metadata is a stray: a plain file, a symbolic link, a directory of another
    program and one with a damaged metadata file are left alone."""
    ours = tmp_path / "gone-0"
    ours.mkdir()
    write_topic_id(ours, TOPIC_ID)
    (tmp_path / "gone-1").write_text("an operator's file")
    (tmp_path / "gone-2").mkdir()
    (tmp_path / "gone-2" / "notes.txt").write_text("another program's directory")
    (tmp_path / "gone-3").symlink_to(ours)
    (tmp_path / "gone-4").mkdir()
    (tmp_path / "gone-4" / "partition.metadata").write_text("version: 0\ntopic_id: xyz\n")
    entries = sorted(path.name for path in tmp_path.iterdir())
    strays = stray_partitions(entries, STATE, 1, lambda name: read_topic_id(tmp_path / name))
    assert strays == [TopicPartition("gone", 0)]
