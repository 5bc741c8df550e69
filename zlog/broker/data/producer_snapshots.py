"""Producer-state snapshots of one partition: `<offset>.snapshot` files beside its segments.

A snapshot at offset o holds the idempotent-producer table as it stands after every batch below
o (`ProducerStateTable.to_snapshot`). The table is rebuilt from the newest snapshot at or below
the point it is wanted for, then the batches from the snapshot's offset up to that point (Kafka's
`ProducerStateManager` snapshots and `UnifiedLog.rebuildProducerState`): at open, the point is
the log end; after a follower cut its log, it is where the log was cut. A snapshot above the
point describes batches the log no longer has and is deleted; without one at or below it, the
batches are read from the log start. So a producer idle for any number of rolls, or whose every
batch retention deleted, is still known after a restart or a truncation.

The broker takes one when a segment rolls (at the worker's next tick, at the log end then),
every few seconds while the table changes, at open when the log end has none, and at close
(partition_host.py). The newest `PRODUCER_SNAPSHOTS_MAX` are kept, and also the newest at or
below the high watermark: a follower never cuts below its HW (docs/replication.md), so that is
the snapshot a truncation rebuilds from, and retention keeps the log from it on
(`PartitionLog.enforce_retention`'s `keep_from_offset`), as Kafka keeps a snapshot at the base of
every segment. Snapshots below the log start go with retention.

A snapshot is written without fsync unless the topic fsyncs its segments (flush.messages,
flush.ms), as the segments it describes are: it is a cache of what the log holds. One lost or
torn by a power loss is skipped (it does not parse, or it claims offsets past the surviving log)
and an older one, or the log itself, is read instead.
"""

from __future__ import annotations

import bisect
import logging
import os
from pathlib import Path
from typing import Final

from zlog.broker.data.producer_state import ProducerBatch, ProducerStateTable
from zlog.record.header import BatchHeader, read_header
from zlog.shm_segments.durable_files import replace_atomically
from zlog.shm_segments.log import PartitionLog

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX: Final = ".snapshot"
LEGACY_SNAPSHOT_FILE: Final = "producer-state.snapshot"
"""The one snapshot file of zlog before per-offset snapshots: adopted at open."""
PRODUCER_SNAPSHOTS_MAX: Final = 8
"""Snapshots kept per partition (plus the newest at or below the high watermark): a follower
cuts only its uncommitted tail, a few seconds of writes at most (its leader's lease)."""


def snapshot_path(directory: Path, offset: int) -> Path:
    """`<offset, 20 digits>.snapshot`, named as Kafka names them."""
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerSnapshots:
    """The snapshot files of one partition directory, by offset. Used from the partition's
    worker thread only."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._adopt_legacy()
        self._offsets = sorted(
            int(name[: -len(SNAPSHOT_SUFFIX)]) for name in os.listdir(directory)
            if name.endswith(SNAPSHOT_SUFFIX) and name[: -len(SNAPSHOT_SUFFIX)].isdigit()
        )

    def _adopt_legacy(self) -> None:
        legacy = self.directory / LEGACY_SNAPSHOT_FILE
        try:
            _table, offset = ProducerStateTable.from_snapshot(legacy.read_bytes())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as error:
            log.warning("%s unreadable (%s): the producers are read from the log", legacy, error)
            legacy.unlink(missing_ok=True)
            return
        os.replace(legacy, snapshot_path(self.directory, offset))

    @property
    def offsets(self) -> tuple[int, ...]:
        return tuple(self._offsets)

    def newest_at_or_below(self, offset: int) -> int | None:
        slot = bisect.bisect_right(self._offsets, offset)
        return self._offsets[slot - 1] if slot else None

    def save(self, table: ProducerStateTable, offset: int, *, fsync: bool) -> None:
        """Write the table as it stands after every batch below `offset` (atomically: a
        temporary file renamed into place; one left by a crash is removed at the next open)."""
        replace_atomically(snapshot_path(self.directory, offset), table.to_snapshot(offset),
                           durable=fsync)
        if offset not in self._offsets:
            bisect.insort(self._offsets, offset)

    def load(self, offset: int) -> ProducerStateTable | None:
        """The table of the snapshot at `offset`; None (and the file deleted) if it is not a
        snapshot of that offset."""
        path = snapshot_path(self.directory, offset)
        try:
            table, claimed = ProducerStateTable.from_snapshot(path.read_bytes())
            if claimed != offset:
                raise ValueError(f"it says offset {claimed}")
        except (OSError, ValueError) as error:
            log.warning("producer snapshot %s unreadable (%s): skipped", path, error)
            self._delete([offset])
            return None
        return table

    def keep_within(self, start_offset: int, end_offset: int) -> None:
        """Delete the snapshots below the log start (retention passed them) and above the log
        end (a truncation cut what they describe)."""
        self._delete([o for o in self._offsets if o < start_offset or o > end_offset])

    def prune(self, high_watermark: int) -> None:
        """Keep the newest PRODUCER_SNAPSHOTS_MAX and the newest at or below the HW."""
        if len(self._offsets) <= PRODUCER_SNAPSHOTS_MAX:
            return
        keep = set(self._offsets[-PRODUCER_SNAPSHOTS_MAX:])
        below = self.newest_at_or_below(high_watermark)
        if below is not None:
            keep.add(below)
        self._delete([o for o in self._offsets if o not in keep])

    def _delete(self, offsets: list[int]) -> None:
        for offset in offsets:
            snapshot_path(self.directory, offset).unlink(missing_ok=True)
            self._offsets.remove(offset)


def load_producer_state(
    partition_log: PartitionLog, snapshots: ProducerSnapshots
) -> ProducerStateTable:
    """The table of what the log holds now: the newest usable snapshot at or below the log
    end, then every idempotent batch after it; without one, every batch from the log start.

    Snapshots outside the log are deleted first (see `keep_within`).
    """
    start, end = partition_log.log_start_offset, partition_log.log_end_offset
    snapshots.keep_within(start, end)
    for offset in reversed(snapshots.offsets):
        table = snapshots.load(offset)
        if table is not None:
            _replay(partition_log, table, offset)
            return table
    table = ProducerStateTable()
    _replay(partition_log, table, start)
    return table


def _replay(partition_log: PartitionLog, producers: ProducerStateTable, offset: int) -> None:
    """Observe every idempotent batch from `offset` to the log end, in order."""
    position = offset
    while position < partition_log.log_end_offset:
        # A read stops before a corrupt segment; the next one, from there, raises.
        before = position
        for chunk in partition_log.read(position, 1 << 62):
            for header in _headers(chunk):
                if header.producer_id >= 0 and header.base_offset >= offset:
                    producers.observe(ProducerBatch.from_header(header), header.base_offset)
                position = header.next_offset
        if position == before:
            break


def _headers(chunk: memoryview) -> list[BatchHeader]:
    headers, position = [], 0
    while position < len(chunk):
        header = read_header(chunk, position)
        headers.append(header)
        position += header.size_bytes
    return headers
