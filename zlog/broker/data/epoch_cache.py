"""The leader-epoch cache of one replica: where each leader epoch's batches start (KIP-101).

Every batch carries the epoch of the leader that appended it (RecordBatch v2's
partitionLeaderEpoch). The cache lists, for each epoch in the log, the offset of its first
batch: `(epoch, start_offset)` pairs, both strictly increasing. It answers the one question a
follower asks after a leader change, "where does my epoch end in your log?"
(OffsetForLeaderEpoch), which finds the exact point where two logs diverge. Truncating by
the high watermark instead loses acknowledged batches or keeps divergent ones (KIP-101's two
scenarios); answering with the epoch too (KIP-279) settles the case where a follower holds an
epoch the leader never had. docs/replication.md §2.4 walks through those cases.

Pure: the checkpoint is text (`encode`/`decode`); writing it (atomically, fsynced) is the
partition host's job. A new leader records `(its epoch, its log end)` before its first append
(KAFKA-7415), so a follower ahead of any batch the leader wrote in that epoch still gets a real
answer.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

UNDEFINED: Final = -1  # an epoch or offset the cache cannot say (Kafka's UNDEFINED_EPOCH)
CHECKPOINT_VERSION: Final = 0
CHECKPOINT_ENTRIES_MAX: Final = 1_000_000  # a checkpoint claiming more is corrupt


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int  # the first offset appended in this epoch


class CheckpointError(ValueError):
    """A checkpoint file that is not one: the caller rebuilds the cache from the log."""


class LeaderEpochCache:
    """Ordered (epoch, start offset) entries; both strictly increase."""

    def __init__(self, entries: Iterable[EpochEntry] = ()) -> None:
        self._entries: list[EpochEntry] = []
        for entry in entries:
            self.assign(entry.epoch, entry.start_offset)

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED

    def __len__(self) -> int:
        return len(self._entries)

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; whether the cache changed.

        An entry whose epoch or start is not below the new one's is dropped first: the log
        was cut there, or an earlier answer is superseded (Kafka's
        maybeTruncateNonMonotonicEntries). Assigning the latest epoch again changes nothing.
        """
        assert epoch >= 0 and start_offset >= 0, (epoch, start_offset)
        latest = self._entries[-1] if self._entries else None
        if latest is not None and latest.epoch == epoch and latest.start_offset <= start_offset:
            return False
        kept = [e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset]
        self._entries = [*kept, EpochEntry(epoch, start_offset)]
        self._check()
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(the largest epoch <= `epoch` here, the offset where it ends): KIP-101 with KIP-279.

        The latest epoch ends at the log end. An epoch above every entry, or a cache with no
        entry at all, is (UNDEFINED, UNDEFINED). An epoch below the first entry ends where the
        first entry starts, and is answered with itself.
        """
        if epoch == UNDEFINED or not self._entries:
            return UNDEFINED, UNDEFINED
        if epoch == self._entries[-1].epoch:
            return epoch, log_end_offset
        higher = next((e for e in self._entries if e.epoch > epoch), None)
        if higher is None:
            return UNDEFINED, UNDEFINED
        floor = [e for e in self._entries if e.epoch <= epoch]
        if not floor:
            return epoch, higher.start_offset
        return floor[-1].epoch, higher.start_offset

    def start_of(self, epoch: int) -> int:
        """Where `epoch` starts (UNDEFINED when the cache has no entry for it)."""
        return next((e.start_offset for e in self._entries if e.epoch == epoch), UNDEFINED)

    def epoch_at(self, offset: int) -> int:
        """The epoch of the batch holding `offset` (UNDEFINED below the first entry)."""
        found = UNDEFINED
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            found = entry.epoch
        return found

    def truncate_from_end(self, end_offset: int) -> bool:
        """The log was cut at `end_offset`: drop the entries starting there or later."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        changed = len(kept) != len(self._entries)
        self._entries = kept
        return changed

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log now starts at `start_offset`: entries below it go, but the epoch that holds
        it stays, moved to start there."""
        if not self._entries or self._entries[0].start_offset >= start_offset:
            return False
        holding = self.epoch_at(start_offset)
        kept = [e for e in self._entries if e.start_offset > start_offset]
        self._entries = [EpochEntry(holding, start_offset), *kept]
        self._check()
        return True

    def clear(self) -> None:
        self._entries = []

    def _check(self) -> None:
        for before, after in itertools.pairwise(self._entries):
            assert before.epoch < after.epoch, self._entries
            assert before.start_offset < after.start_offset, self._entries

    # -- the checkpoint file ---------------------------------------------------------------

    def encode(self) -> bytes:
        """Kafka's leader-epoch-checkpoint text: version, count, one "epoch offset" per line."""
        lines = [str(CHECKPOINT_VERSION), str(len(self._entries))]
        lines += [f"{e.epoch} {e.start_offset}" for e in self._entries]
        return ("\n".join(lines) + "\n").encode()

    @classmethod
    def decode(cls, data: bytes) -> LeaderEpochCache:
        """The cache a checkpoint holds; CheckpointError for anything else."""
        try:
            lines = data.decode("ascii").splitlines()
            version, count = int(lines[0]), int(lines[1])
        except (UnicodeDecodeError, ValueError, IndexError):
            raise CheckpointError("not a leader-epoch checkpoint") from None
        if version != CHECKPOINT_VERSION:
            raise CheckpointError(f"checkpoint version {version}, expected {CHECKPOINT_VERSION}")
        if not 0 <= count <= CHECKPOINT_ENTRIES_MAX or len(lines) != 2 + count:
            raise CheckpointError(f"checkpoint claims {count} entries, has {len(lines) - 2}")
        entries: list[EpochEntry] = []
        for line in lines[2:]:
            parts = line.split()
            if len(parts) != 2 or not all(p.isdigit() for p in parts):
                raise CheckpointError(f"bad checkpoint line {line!r}")
            entries.append(EpochEntry(int(parts[0]), int(parts[1])))
        for before, after in itertools.pairwise(entries):
            if not (before.epoch < after.epoch and before.start_offset < after.start_offset):
                raise CheckpointError("checkpoint entries do not both increase")
        return cls(entries)
