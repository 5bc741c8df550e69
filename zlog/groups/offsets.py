"""Committed offsets of the groups of one coordinator: per-partition checks, fetch, retention.

Group-level acceptance (generation or member epoch fencing) is the protocol's business; this
module checks each partition of an accepted commit, turns it into records, and decides which
offsets have outlived `offsets.retention.minutes`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from zlog.errors import ErrorCode
from zlog.groups.records import OffsetCommitKey, OffsetCommitValue, OffsetsRecord
from zlog.transport.messages.groups import FetchedOffset, OffsetCommitRequestV0
from zlog.transport.wire import utf8_longer_than
from zlog.types import TopicPartition


def latest_commits_only(records: list[OffsetsRecord]) -> list[OffsetsRecord]:
    """`records` without the offset commits that a later record of the same batch overwrites
    (same group, topic and partition: a newer commit or a tombstone), in their order.

    A compacted log keeps only the latest record of a key, so a batch that carries a burst of
    commits of one partition need not carry more than the last: replaying either gives the same
    offsets, and the coordinator applied each commit in memory already. Only offset commits
    go: a group's metadata records are kept as they are.
    """
    last: dict[OffsetCommitKey, int] = {}
    for index, record in enumerate(records):
        if isinstance(record.key, OffsetCommitKey):
            last[record.key] = index
    return [record for index, record in enumerate(records)
            if not isinstance(record.key, OffsetCommitKey) or last[record.key] == index]


def audit_headers(member_id: str, generation: int) -> tuple[tuple[str, bytes], ...]:
    """Who committed, under which generation or member epoch: read only by audits of the log."""
    return (("zm", member_id.encode("utf-8", "surrogatepass")),
            ("zg", generation.to_bytes(4, "big", signed=True)))


@dataclass(slots=True)
class OffsetStore:
    committed: dict[str, dict[TopicPartition, OffsetCommitValue]] = field(default_factory=dict)

    def of(self, group_id: str) -> dict[TopicPartition, OffsetCommitValue]:
        return self.committed.get(group_id, {})

    def apply(self, record: OffsetsRecord) -> None:
        key = record.key
        assert isinstance(key, OffsetCommitKey)
        tp = TopicPartition(key.topic, key.partition)
        if record.value is None:
            group = self.committed.get(key.group_id, {})
            group.pop(tp, None)
            if not group:
                self.committed.pop(key.group_id, None)
        else:
            assert isinstance(record.value, OffsetCommitValue)
            self.committed.setdefault(key.group_id, {})[tp] = record.value

    def commit_records(
        self,
        req: OffsetCommitRequestV0,
        partition_counts: Mapping[str, int],
        metadata_max_bytes: int,
        now_ms: int,
    ) -> tuple[list[tuple[TopicPartition, ErrorCode]], list[OffsetsRecord]]:
        """Per-partition checks of an accepted commit: the partitions that fail do so alone."""
        results: list[tuple[TopicPartition, ErrorCode]] = []
        records: list[OffsetsRecord] = []
        headers = audit_headers(req.member_id, req.generation)
        for tp, data in req.offsets:
            if not 0 <= tp.partition < partition_counts.get(tp.topic, 0):
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif utf8_longer_than(data.metadata, metadata_max_bytes):
                code = ErrorCode.OFFSET_METADATA_TOO_LARGE
            elif data.offset < 0:
                code = ErrorCode.OFFSET_OUT_OF_RANGE
            else:
                code = ErrorCode.NONE
                expire_ms = None if req.retention_ms is None else now_ms + req.retention_ms
                records.append(OffsetsRecord(
                    OffsetCommitKey(req.group_id, tp.topic, tp.partition),
                    OffsetCommitValue(data.offset, now_ms, data.leader_epoch, data.metadata,
                                      expire_ms),
                    headers,
                ))
            results.append((tp, code))
        return results, records

    def fetch(self, group_id: str, partitions: Iterable[TopicPartition] | None,
              ) -> tuple[FetchedOffset, ...]:
        committed = self.of(group_id)
        wanted = sorted(committed) if partitions is None else list(partitions)
        found = []
        for tp in wanted:
            value = committed.get(tp)
            found.append(FetchedOffset(tp.topic, tp.partition) if value is None else
                         FetchedOffset(tp.topic, tp.partition, value.offset,
                                       value.leader_epoch, value.metadata))
        return tuple(found)

    def tombstones(self, group_id: str, partitions: Iterable[TopicPartition] | None = None,
                   ) -> list[OffsetsRecord]:
        chosen = sorted(self.of(group_id)) if partitions is None else sorted(partitions)
        return [OffsetsRecord(OffsetCommitKey(group_id, tp.topic, tp.partition), None)
                for tp in chosen]

    def expired(
        self,
        group_id: str,
        now_ms: int,
        retention_ms: int,
        *,
        since_ms: int | None,
        keep_topics: frozenset[str] = frozenset(),
    ) -> list[TopicPartition]:
        """Offsets past retention: measured from `since_ms` (when a classic group became
        Empty) when given, else from each commit; an explicit expire time overrides both.
        Offsets of `keep_topics` (subscribed by a live member) never expire."""
        out = []
        for tp, value in sorted(self.of(group_id).items()):
            if tp.topic in keep_topics:
                continue
            if value.expire_timestamp_ms is not None:
                deadline = value.expire_timestamp_ms
            else:
                deadline = (value.commit_timestamp_ms if since_ms is None else since_ms)
                deadline += retention_ms
            if deadline <= now_ms:
                out.append(tp)
        return out
