"""Idempotent-producer state of one partition: retries are deduplicated, gaps and zombies refused.

Kafka's rules (KIP-98, `ProducerStateManager`/`ProducerAppendInfo`), kept per partition and per
producer id: the producer's epoch and the first/last sequence and base offset of its last
`limits.CACHED_BATCHES_PER_PRODUCER` batches. A batch of an idempotent producer (producer
id >= 0) is

* appended when its epoch is the current one and its first sequence follows the last one;
* answered with its original base offset, and not appended, when it repeats one of the cached
  batches exactly (a retry after a lost response): this is what makes retries safe;
* refused with OUT_OF_ORDER_SEQUENCE_NUMBER on a gap, a reordering, or a repeat older than the
  cache (the broker can no longer prove it is a repeat, so it must not append it twice);
* refused with INVALID_PRODUCER_EPOCH when its epoch is older (a fenced zombie);
* appended as the start of a new epoch only at sequence 0;
* refused with UNKNOWN_PRODUCER_ID when the producer id is not known here and the sequence is not 0.

Sequences count records and wrap from 2^31 - 1 to 0, as Kafka's do. The table is rebuilt at open
by `observe`-ing the batches of the log's tail in order, so deduplication survives a restart of
the worker. The module is pure: no clocks, files or sockets.
"""

from __future__ import annotations

import json
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.record.header import BatchHeader
from zlog.types import SEQUENCE_MODULUS


def next_sequence(sequence: int) -> int:
    """The sequence after `sequence`, wrapping as Kafka's `incrementSequence` does."""
    assert 0 <= sequence < SEQUENCE_MODULUS, sequence
    return (sequence + 1) % SEQUENCE_MODULUS


def last_sequence_of(first_sequence: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record: one sequence per offset, with wrap."""
    assert 0 <= first_sequence < SEQUENCE_MODULUS, first_sequence
    assert last_offset_delta >= 0, last_offset_delta
    return (first_sequence + last_offset_delta) % SEQUENCE_MODULUS


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """The producer fields of one batch that the rules need."""

    producer_id: int
    producer_epoch: int
    first_sequence: int
    last_offset_delta: int

    @classmethod
    def from_header(cls, header: BatchHeader) -> ProducerBatch:
        return cls(
            header.producer_id, header.producer_epoch, header.base_sequence,
            header.last_offset_delta,
        )

    @property
    def is_idempotent(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        return last_sequence_of(self.first_sequence, self.last_offset_delta)


@dataclass(frozen=True, slots=True)
class CachedBatch:
    """What a retry is matched against, and the answer it gets."""

    first_sequence: int
    last_sequence: int
    base_offset: int


@dataclass(slots=True)
class ProducerEntry:
    """One producer's epoch and its most recent batches, oldest first."""

    epoch: int
    batches: deque[CachedBatch] = field(
        default_factory=lambda: deque(maxlen=limits.CACHED_BATCHES_PER_PRODUCER))

    @property
    def last_sequence(self) -> int:
        assert self.batches, "an entry is created with its first batch"
        return self.batches[-1].last_sequence

    def find_duplicate(self, batch: ProducerBatch) -> CachedBatch | None:
        for cached in self.batches:
            same_first = cached.first_sequence == batch.first_sequence
            if same_first and cached.last_sequence == batch.last_sequence:
                return cached
        return None


class ProducerStateTable:
    """Per producer id: epoch and last batches, for one partition. Single-threaded."""

    def __init__(self, producers_max: int = limits.PRODUCERS_PER_PARTITION_MAX) -> None:
        assert producers_max >= 1
        self._producers_max = producers_max
        self._entries: OrderedDict[int, ProducerEntry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    def check(self, batch: ProducerBatch) -> int | None:
        """Decide a batch before it is appended.

        Returns None when the batch is to be appended, or the base offset of the identical
        batch already in the log (a retry: append nothing, answer with that offset). Raises
        ZlogError with Kafka's code when the batch must be refused. Changes nothing: the caller
        calls `record` once the append succeeded, so a batch that fails later (a bad CRC) leaves
        no trace here.
        """
        assert batch.is_idempotent, "only batches with a producer id have sequences"
        _check_fields(batch)
        entry = self._entries.get(batch.producer_id)
        if entry is None:
            if batch.first_sequence != 0:
                raise ZlogError(
                    ErrorCode.UNKNOWN_PRODUCER_ID,
                    f"producer {batch.producer_id} has no state on this partition and its batch "
                    f"starts at sequence {batch.first_sequence}, not 0",
                )
            return None
        if batch.producer_epoch < entry.epoch:
            raise ZlogError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {batch.producer_id} epoch {batch.producer_epoch} is older than the "
                f"current epoch {entry.epoch}",
            )
        if batch.producer_epoch > entry.epoch:
            if batch.first_sequence != 0:
                raise _out_of_order(batch, "a new epoch must start at sequence 0")
            return None
        duplicate = entry.find_duplicate(batch)
        if duplicate is not None:
            return duplicate.base_offset
        if batch.first_sequence != next_sequence(entry.last_sequence):
            raise _out_of_order(
                batch, f"expected sequence {next_sequence(entry.last_sequence)}"
            )
        return None

    def record(self, batch: ProducerBatch, base_offset: int) -> None:
        """Remember a batch that was appended at `base_offset` (after `check` allowed it)."""
        self.observe(batch, base_offset)
        entry = self._entries[batch.producer_id]
        assert entry.epoch == batch.producer_epoch
        assert entry.batches[-1].base_offset == base_offset

    def observe(self, batch: ProducerBatch, base_offset: int) -> None:
        """Take in a batch that is in the log, without judging it (rebuild at open, followers).

        Batches must come in log order. A newer epoch starts the producer afresh; a batch of an
        older epoch (impossible in a log this table guarded) is ignored.
        """
        assert batch.is_idempotent
        assert base_offset >= 0, base_offset
        entry = self._entries.get(batch.producer_id)
        if entry is None or batch.producer_epoch > entry.epoch:
            entry = ProducerEntry(batch.producer_epoch)
            self._entries[batch.producer_id] = entry
        elif batch.producer_epoch < entry.epoch:
            return
        entry.batches.append(CachedBatch(batch.first_sequence, batch.last_sequence, base_offset))
        self._entries.move_to_end(batch.producer_id)
        while len(self._entries) > self._producers_max:
            self._entries.popitem(last=False)
        assert len(entry.batches) <= limits.CACHED_BATCHES_PER_PRODUCER

    def to_snapshot(self, log_offset: int) -> bytes:
        """The table as it stands after every batch below `log_offset`, for a restart."""
        producers = [
            [pid, entry.epoch, [[b.first_sequence, b.last_sequence, b.base_offset]
                                for b in entry.batches]]
            for pid, entry in self._entries.items()
        ]
        return json.dumps({"version": 1, "log_offset": log_offset, "producers": producers},
                          separators=(",", ":")).encode()

    @classmethod
    def from_snapshot(
        cls, data: bytes, producers_max: int = limits.PRODUCERS_PER_PARTITION_MAX
    ) -> tuple[ProducerStateTable, int]:
        """The table and log offset a snapshot holds; ValueError if it is not one."""
        try:
            document = json.loads(data)
            if document.get("version") != 1:
                raise ValueError("unknown producer snapshot version")
            table = cls(producers_max)
            for pid, epoch, batches in document["producers"]:
                entry = ProducerEntry(int(epoch))
                for first, last, base in batches[-limits.CACHED_BATCHES_PER_PRODUCER:]:
                    entry.batches.append(CachedBatch(int(first), int(last), int(base)))
                if entry.batches:
                    table._entries[int(pid)] = entry
            return table, int(document["log_offset"])
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as error:
            raise ValueError(f"not a producer snapshot: {error}") from None

    def rebuild(self, batches: list[tuple[ProducerBatch, int]]) -> None:
        """Forget everything, then observe the (batch, base offset) pairs of the log, in order."""
        self._entries.clear()
        for batch, base_offset in batches:
            if batch.is_idempotent:
                self.observe(batch, base_offset)


def _check_fields(batch: ProducerBatch) -> None:
    """A producer id without a usable epoch or sequence is a malformed batch."""
    if batch.producer_epoch < 0:
        raise ZlogError(
            ErrorCode.INVALID_RECORD,
            f"producer {batch.producer_id} sent epoch {batch.producer_epoch}; idempotent "
            "batches carry an epoch >= 0",
        )
    if not 0 <= batch.first_sequence < SEQUENCE_MODULUS:
        raise ZlogError(
            ErrorCode.INVALID_RECORD,
            f"producer {batch.producer_id} sent base sequence {batch.first_sequence}; "
            "idempotent batches carry a sequence >= 0",
        )


def _out_of_order(batch: ProducerBatch, expectation: str) -> ZlogError:
    return ZlogError(
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        f"producer {batch.producer_id} epoch {batch.producer_epoch}: batch with sequences "
        f"{batch.first_sequence}..{batch.last_sequence} is out of order; {expectation}",
    )
