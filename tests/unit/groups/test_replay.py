"""Replay of the offsets log: last value wins, tombstones delete, compaction changes nothing."""

from __future__ import annotations

import random

from zlog.groups.records import (
    JOIN_COMPLETE_HEADER,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    OffsetsRecord,
    encode_record,
)
from zlog.groups.replay import replay, replay_encoded
from zlog.types import TopicPartition


def commit(group: str, partition: int, offset: int) -> OffsetsRecord:
    return OffsetsRecord(OffsetCommitKey(group, "t", partition), OffsetCommitValue(offset, 0))


def metadata(group: str, generation: int) -> OffsetsRecord:
    return OffsetsRecord(GroupMetadataKey(group),
                         GroupMetadataValue("consumer", generation, "range", None, 0))


def test_last_value_wins_and_tombstones_delete() -> None:
    loaded = replay([
        commit("a", 0, 1), commit("a", 0, 5), commit("a", 1, 3),
        OffsetsRecord(OffsetCommitKey("a", "t", 1), None),
        metadata("a", 1), metadata("a", 2),
    ])
    group = loaded.groups["a"]
    assert group.offsets == {TopicPartition("t", 0): OffsetCommitValue(5, 0)}
    assert group.metadata is not None and group.metadata.generation == 2


def test_a_group_with_nothing_left_is_gone() -> None:
    loaded = replay([metadata("a", 1), commit("a", 0, 1),
                     OffsetsRecord(OffsetCommitKey("a", "t", 0), None),
                     OffsetsRecord(GroupMetadataKey("a"), None)])
    assert loaded.groups == {}


def test_commits_alone_make_a_group() -> None:
    assert replay([commit("simple", 0, 9)]).groups["simple"].metadata is None


def test_join_complete_marker_is_read_from_the_last_metadata_only() -> None:
    marked = OffsetsRecord(metadata("a", 3).key, metadata("a", 3).value, (JOIN_COMPLETE_HEADER,))
    assert replay([metadata("a", 2), marked]).groups["a"].join_complete
    assert not replay([marked, metadata("a", 3)]).groups["a"].join_complete


def compact(records: list[OffsetsRecord]) -> list[OffsetsRecord]:
    last = {r.key: i for i, r in enumerate(records)}
    return [r for i, r in enumerate(records) if last[r.key] == i and r.value is not None]


def test_compacted_and_full_logs_load_the_same_state() -> None:
    rng = random.Random(7)
    for _ in range(200):
        records = []
        for _ in range(rng.randrange(30)):
            group = rng.choice("abc")
            kind = rng.random()
            if kind < 0.5:
                records.append(commit(group, rng.randrange(3), rng.randrange(100)))
            elif kind < 0.7:
                records.append(OffsetsRecord(OffsetCommitKey(group, "t", rng.randrange(3)), None))
            elif kind < 0.9:
                records.append(metadata(group, rng.randrange(9)))
            else:
                records.append(OffsetsRecord(GroupMetadataKey(group), None))
        assert replay(records) == replay(compact(records))


def test_encoded_replay_skips_unknown_types() -> None:
    key, value = encode_record(commit("a", 0, 4))
    loaded = replay_encoded([(b"\x00\x63\x00\x01a", b"?", ()), (key, value, ())])
    assert loaded.skipped_records == 1
    assert loaded.groups["a"].offsets[TopicPartition("t", 0)].offset == 4
