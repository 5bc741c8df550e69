"""Idempotent-producer rules (KIP-98, docs/reliability.md §3.5 and bad-input rows 21-23)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zlog import limits
from zlog.broker.data.producer_snapshots import ProducerSnapshots, load_producer_state
from zlog.broker.data.producer_state import (
    ProducerBatch,
    ProducerStateTable,
    last_sequence_of,
    next_sequence,
)
from zlog.errors import ErrorCode, ZlogError
from zlog.record.arrays import build_batch_from_values
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig
from zlog.types import SEQUENCE_MODULUS

PID = 7


def _batch(first: int, count: int = 3, epoch: int = 0, pid: int = PID) -> ProducerBatch:
    return ProducerBatch(pid, epoch, first, count - 1)


def _code(table: ProducerStateTable, batch: ProducerBatch) -> ErrorCode:
    with pytest.raises(ZlogError) as caught:
        table.check(batch)
    return caught.value.code


class _Log:
    """Just offsets: what the table sees of a log that appends what `check` allowed."""

    def __init__(self) -> None:
        self.table = ProducerStateTable()
        self.end_offset = 0

    def send(self, batch: ProducerBatch) -> int:
        duplicate = self.table.check(batch)
        if duplicate is not None:
            return duplicate
        base = self.end_offset
        self.end_offset += batch.last_offset_delta + 1
        self.table.record(batch, base)
        return base


def test_sequences_wrap_at_2_to_the_31() -> None:
    assert next_sequence(5) == 6
    assert next_sequence(SEQUENCE_MODULUS - 1) == 0
    assert last_sequence_of(SEQUENCE_MODULUS - 2, 3) == 1


def test_a_new_producer_starts_at_sequence_zero() -> None:
    log = _Log()
    assert log.send(_batch(0)) == 0
    assert log.send(_batch(3)) == 3
    assert log.send(_batch(6, count=1)) == 6
    assert log.end_offset == 7


def test_an_unknown_producer_with_a_sequence_other_than_zero_is_unknown() -> None:
    assert _code(ProducerStateTable(), _batch(5)) == ErrorCode.UNKNOWN_PRODUCER_ID


def test_a_retry_of_any_of_the_last_five_batches_gets_its_original_offset() -> None:
    log = _Log()
    bases = [log.send(_batch(3 * i)) for i in range(8)]
    end = log.end_offset
    for i in range(8 - limits.CACHED_BATCHES_PER_PRODUCER, 8):
        assert log.send(_batch(3 * i)) == bases[i]
    assert log.end_offset == end, "a retry appends nothing"


def test_a_duplicate_older_than_the_cache_is_out_of_order() -> None:
    log = _Log()
    for i in range(limits.CACHED_BATCHES_PER_PRODUCER + 1):
        log.send(_batch(3 * i))
    assert _code(log.table, _batch(0)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_gap_or_a_reordering_is_out_of_order() -> None:
    log = _Log()
    log.send(_batch(0))
    log.send(_batch(3))
    assert _code(log.table, _batch(7)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # gap
    assert _code(log.table, _batch(2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # overlap
    # Same first sequence as a cached batch but another length: not the same batch.
    assert _code(log.table, _batch(3, count=5)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_check_changes_nothing_until_record() -> None:
    table = ProducerStateTable()
    assert table.check(_batch(0)) is None
    assert table.check(_batch(0)) is None, "not recorded, so not a duplicate"
    assert len(table) == 0


def test_an_older_epoch_is_fenced() -> None:
    log = _Log()
    log.send(_batch(0, epoch=1))
    assert _code(log.table, _batch(3, epoch=0)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert _code(log.table, _batch(0, epoch=0)) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_new_epoch_must_start_at_zero_and_then_fences_the_old_one() -> None:
    log = _Log()
    log.send(_batch(0, epoch=0))
    log.send(_batch(3, epoch=0))
    assert _code(log.table, _batch(6, epoch=1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.send(_batch(0, epoch=1)) == 6
    assert _code(log.table, _batch(6, epoch=0)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.send(_batch(0, epoch=1)) == 6, "the new epoch's batch is a retry now"
    assert log.send(_batch(3, epoch=1)) == 9


def test_sequences_continue_across_the_wrap() -> None:
    table = ProducerStateTable()
    table.observe(_batch(SEQUENCE_MODULUS - 4, count=2), 100)  # sequences 2^31-4 .. 2^31-3
    log = _Log()
    log.table, log.end_offset = table, 102
    assert log.send(_batch(SEQUENCE_MODULUS - 2, count=4)) == 102  # 2^31-2, 2^31-1, 0, 1
    assert log.send(_batch(2)) == 106
    assert log.send(_batch(SEQUENCE_MODULUS - 2, count=4)) == 102, "retry across the wrap"
    assert _code(log.table, _batch(0)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_producers_are_independent() -> None:
    log = _Log()
    log.send(_batch(0, pid=1))
    assert log.send(_batch(0, pid=2)) == 3
    assert log.send(_batch(3, pid=1)) == 6


def test_malformed_producer_fields_are_invalid_records() -> None:
    table = ProducerStateTable()
    assert _code(table, ProducerBatch(PID, -1, 0, 0)) == ErrorCode.INVALID_RECORD
    assert _code(table, ProducerBatch(PID, 0, -1, 0)) == ErrorCode.INVALID_RECORD


def test_the_least_recently_active_producer_is_forgotten_beyond_the_bound() -> None:
    table = ProducerStateTable(producers_max=2)
    table.record(_batch(0, pid=1), 0)
    table.record(_batch(0, pid=2), 3)
    table.record(_batch(3, pid=1), 6)
    table.record(_batch(0, pid=3), 9)
    assert table.entry(2) is None and table.entry(1) is not None and table.entry(3) is not None
    assert _code(table, _batch(3, pid=2)) == ErrorCode.UNKNOWN_PRODUCER_ID


def test_rebuild_from_the_log_keeps_deduplication() -> None:
    log = _Log()
    bases = [log.send(_batch(3 * i)) for i in range(4)]
    log.send(_batch(0, pid=9, epoch=2))
    history = [(_batch(3 * i), bases[i]) for i in range(4)]
    history.append((_batch(0, pid=9, epoch=2), 12))
    history.append((ProducerBatch(-1, -1, -1, 0), 15))  # a non-idempotent batch is skipped
    rebuilt = ProducerStateTable()
    rebuilt.rebuild(history)
    assert rebuilt.check(_batch(6)) == bases[2]
    assert rebuilt.check(_batch(12)) is None
    assert rebuilt.check(_batch(0, pid=9, epoch=2)) == 12
    assert _code(rebuilt, _batch(3, pid=9, epoch=1)) == ErrorCode.INVALID_PRODUCER_EPOCH


def _producer_batch(first: int, count: int = 2, epoch: int = 0) -> bytes:
    values = [b"v%d" % i for i in range(count)]
    return build_batch_from_values(
        values, timestamp_ms=1_700_000_000_000, producer_id=PID, producer_epoch=epoch,
        base_sequence=first,
    )


def test_state_rebuilt_from_a_reopened_log_recognises_retries(
    tmp_path: Path, shm_dir: Path
) -> None:
    """Dedupe survives a restart: without a snapshot the table is rebuilt from the log."""
    config = LogConfig(ring_bytes=64 * 1024, segment_bytes=400)  # a roll every few batches
    bases: list[int] = []
    with PartitionLog(tmp_path, "idem", 0, config, ring_dir=shm_dir) as log:
        for i in range(12):
            bases.append(log.append(_producer_batch(2 * i)))
        assert log.segment_count > 2
    with PartitionLog(tmp_path, "idem", 0, config, ring_dir=shm_dir) as log:
        table = load_producer_state(log, ProducerSnapshots(log.directory))
    batch = ProducerBatch(PID, 0, 22, 1)
    assert table.check(batch) == bases[11]
    assert table.check(ProducerBatch(PID, 0, 24, 1)) is None
