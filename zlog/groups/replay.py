"""Rebuilding every group of one offsets partition from its log, as a new coordinator does.

Records apply in log order; the last value of a key wins and a tombstone deletes it. The result
depends only on the last record of each key, so a compacted log and the uncompacted log it came
from load to the same state: the rule that lets compaction run under a live coordinator.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from zlog.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    OffsetsRecord,
    UnknownRecordTypeError,
    decode_record,
)
from zlog.groups.server_side.records import ConsumerKey, ConsumerValue
from zlog.transport.wire import Buffer
from zlog.types import TopicPartition


@dataclass(slots=True)
class LoadedGroup:
    """What the log says about one group: its committed offsets and its last classic metadata."""

    offsets: dict[TopicPartition, OffsetCommitValue] = field(default_factory=dict)
    metadata: GroupMetadataValue | None = None
    join_complete: bool = False
    """The last metadata was written at join completion, before the leader's SyncGroup."""
    consumer: dict[ConsumerKey, ConsumerValue] = field(default_factory=dict)
    """The records of a server-side group (`consumer_records.group_from_records`)."""

    @property
    def is_empty(self) -> bool:
        return not self.offsets and self.metadata is None and not self.consumer


@dataclass(slots=True)
class LoadedGroups:
    groups: dict[str, LoadedGroup] = field(default_factory=dict)
    skipped_records: int = 0
    """Records of key types this version does not know (written by a newer zlog)."""

    def apply(self, record: OffsetsRecord) -> None:
        key = record.key
        group = self.groups.setdefault(key.group_id, LoadedGroup())
        if isinstance(key, OffsetCommitKey):
            tp = TopicPartition(key.topic, key.partition)
            if record.value is None:
                group.offsets.pop(tp, None)
            else:
                assert isinstance(record.value, OffsetCommitValue)
                group.offsets[tp] = record.value
        elif isinstance(key, GroupMetadataKey):
            assert record.value is None or isinstance(record.value, GroupMetadataValue)
            group.metadata = record.value
            group.join_complete = record.value is not None and record.is_join_complete
        elif record.value is None:
            group.consumer.pop(key, None)
        else:
            assert not isinstance(record.value, OffsetCommitValue | GroupMetadataValue)
            group.consumer[key] = record.value
        if group.is_empty:
            del self.groups[key.group_id]


def replay(records: Iterable[OffsetsRecord]) -> LoadedGroups:
    loaded = LoadedGroups()
    for record in records:
        loaded.apply(record)
    return loaded


def replay_encoded(
    entries: Iterable[tuple[Buffer, Buffer | None, tuple[tuple[str, bytes], ...]]],
    onto: LoadedGroups | None = None,
) -> LoadedGroups:
    """Replay (key, value, headers) as read from the log; unknown key types are counted and
    skipped, any other malformed record raises (a corrupt offsets log is not guessed at).

    `onto` continues an earlier replay with the records written after it (its object is
    updated and returned).
    """
    loaded = LoadedGroups() if onto is None else onto
    for key, value, headers in entries:
        try:
            record = decode_record(key, value, headers)
        except UnknownRecordTypeError:
            loaded.skipped_records += 1
            continue
        loaded.apply(record)
    return loaded
