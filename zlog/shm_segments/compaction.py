"""Key compaction for `cleanup.policy=compact`: keep the latest record of every key.

Only sealed segments are compacted: they never change, so compaction can read and rewrite
them on another thread while appends go on to the active segment. Each sealed segment is
rewritten into a `.cleaned` file beside it and swapped in by one rename under the log's
lock. Offsets never change: surviving records keep their offsets, a partly kept batch is
rebuilt with its original base offset and last offset delta, so the gaps left behind are
visible to consumers exactly as in Kafka. Tombstones (null values) outlive the records they
delete by `delete.retention.ms`, so that consumers have time to see them.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from zlog.clock import Clock, SystemClock
from zlog.record.header import read_header
from zlog.record.records import NewRecord, Record, build_batch, read_records
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.segment import Segment

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CompactionStats:
    segments_rewritten: int
    records_before: int
    records_after: int
    bytes_before: int
    bytes_after: int


@dataclass(frozen=True, slots=True)
class _Horizons:
    tombstone_ms: int  # tombstones in batches last written before this are dropped
    lag_ms: int  # batches with records newer than this are left alone (min.compaction.lag.ms)


def latest_offsets(segments: list[Segment]) -> dict[bytes, int]:
    """The offset of the newest record of each key across `segments`."""
    latest: dict[bytes, int] = {}
    for segment in segments:
        for view in segment.batch_views():
            if read_header(view).is_control:
                continue
            for record in read_records(view):
                if record.key is not None:
                    latest[record.key] = record.offset
    return latest


def compact(log_: PartitionLog, clock: Clock | None = None) -> CompactionStats:
    """Compact every sealed segment of `log_`; safe to run beside the writer thread."""
    assert log_.config.compacted, "compaction runs only on compacted topics"
    now_ms = (clock or log_.clock or SystemClock()).wall_ms()
    horizons = _Horizons(
        tombstone_ms=now_ms - log_.config.delete_retention_ms,
        lag_ms=now_ms - log_.config.min_compaction_lag_ms,
    )
    sealed = log_.segments_snapshot()[:-1]
    latest = latest_offsets(sealed)
    totals = [0, 0, 0, 0, 0]
    for segment in sealed:
        kept, before, after = _compact_segment(segment, latest, horizons)
        totals[1] += before
        totals[2] += after
        totals[3] += segment.size_bytes
        if kept is None:
            totals[4] += segment.size_bytes
            continue
        cleaned = segment.log_path.with_name(segment.log_path.name + ".cleaned")
        _write_durably(cleaned, kept)
        if log_.swap_compacted(segment, cleaned):
            totals[0] += 1
            totals[4] += sum(len(batch) for batch in kept)
    stats = CompactionStats(*totals)
    log.info("compacted %s-%d: %s", log_.topic, log_.partition, stats)
    return stats


def _compact_segment(
    segment: Segment, latest: dict[bytes, int], horizons: _Horizons
) -> tuple[list[bytes] | None, int, int]:
    """The segment's surviving batches, or None when nothing would change."""
    kept: list[bytes] = []
    changed = False
    records_before = records_after = 0
    for view in segment.batch_views():
        header = read_header(view)
        if header.is_control or header.max_timestamp_ms > horizons.lag_ms:
            kept.append(bytes(view))
            records_before += header.record_count
            records_after += header.record_count
            continue
        records = read_records(view)
        survivors = [r for r in records if _survives(r, latest, header.max_timestamp_ms, horizons)]
        records_before += len(records)
        records_after += len(survivors)
        if len(survivors) == len(records):
            kept.append(bytes(view))
            continue
        changed = True
        if survivors:
            kept.append(_rebuild(view, survivors))
    return (kept if changed else None), records_before, records_after


def _survives(
    record: Record, latest: dict[bytes, int], batch_max_timestamp_ms: int, horizons: _Horizons
) -> bool:
    if record.key is None:
        return True  # nothing to compact it against
    if latest.get(record.key, record.offset) != record.offset:
        return False  # a newer record of this key exists
    is_tombstone = record.value is None
    return not (is_tombstone and batch_max_timestamp_ms < horizons.tombstone_ms)


def _rebuild(view: memoryview, survivors: list[Record]) -> bytes:
    """A batch of the surviving records that keeps the original offsets and producer fields."""
    header = read_header(view)
    return build_batch(
        [NewRecord(r.value, r.key, r.headers, r.timestamp_ms) for r in survivors],
        base_offset=header.base_offset,
        base_timestamp_ms=header.base_timestamp_ms,
        compression=header.compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        offset_deltas=[r.offset - header.base_offset for r in survivors],
        last_offset_delta=header.last_offset_delta,
    )


def _write_durably(path: os.PathLike[str], batches: list[bytes]) -> None:
    """Compacted data replaces the only copy, so it is on disk before the rename."""
    with open(path, "wb") as file:
        for batch in batches:
            file.write(batch)
        file.flush()
        os.fsync(file.fileno())
