"""Partition rules over an in-memory log: HW, acks, visibility, errors (docs/reliability.md §3)."""

from __future__ import annotations

from pathlib import Path

import crc32c
import pytest

from tests.memory_log import MemoryLog
from tests.storage_helpers import base_offset_of, make_batch
from zlog.broker.data.isr import ReplicaSet
from zlog.broker.data.partition import Partition
from zlog.errors import ErrorCode, ZlogError
from zlog.record.arrays import build_batch_from_values
from zlog.record.header import Compression, read_header, validate_batch
from zlog.record.records import NewRecord, build_batch, read_records
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig

T0_MS = 1_700_000_000_000


def _partition(replicas: ReplicaSet | None = None, **kwargs: object) -> Partition:
    return Partition("t", 0, MemoryLog(), leader_epoch=3, replicas=replicas, **kwargs)  # type: ignore[arg-type]


def _fake(partition: Partition) -> MemoryLog:
    assert isinstance(partition.log, MemoryLog)
    return partition.log


def _three_replicas(min_insync: int = 2) -> ReplicaSet:
    return ReplicaSet(0, frozenset({0, 1, 2}), frozenset({0, 1}), min_insync)


def test_appends_get_consecutive_offsets_and_one_replica_commits_at_once() -> None:
    partition = _partition()
    first = partition.produce([make_batch(0, 3), make_batch(1, 2)], acks=1)
    assert (first.error_code, first.base_offset, first.required_offset) == (ErrorCode.NONE, 0, 5)
    assert first.appended_bytes == first.committed_bytes > 0
    assert partition.high_watermark == 5
    assert partition.produce([make_batch(2)], acks=-1).base_offset == 5
    assert partition.acks_status(8) == ErrorCode.NONE
    stored = _fake(partition).batches[0]
    assert validate_batch(stored).partition_leader_epoch == 3, "stamped with the leader epoch"


def test_a_follower_refuses_produce_fetch_and_list_offsets() -> None:
    partition = _partition(is_leader=False)
    assert partition.produce([make_batch(0)], 1).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    read = partition.read(0, 100, replica_id=-1, at_least_one=True)
    assert read.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(ZlogError) as caught:
        partition.list_offset(-1)
    assert caught.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_acks_all_below_min_insync_replicas_appends_nothing() -> None:
    partition = _partition(ReplicaSet.single(0, min_insync_replicas=2))
    outcome = partition.produce([make_batch(0)], acks=-1)
    assert outcome.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert _fake(partition).log_end_offset == 0
    assert partition.produce([make_batch(0)], acks=1).error_code == ErrorCode.NONE


def test_the_high_watermark_is_the_lowest_log_end_in_the_isr() -> None:
    partition = _partition(_three_replicas())
    outcome = partition.produce([make_batch(0, 2), make_batch(1, 2)], acks=-1)
    assert outcome.error_code == ErrorCode.NONE and outcome.committed_bytes == 0
    assert partition.high_watermark == 0
    assert partition.acks_status(outcome.required_offset) is None, "acks=all waits"
    assert partition.note_replica_fetch(1, 2, now_ms=0, broker_epoch=1,
                                        log_start_offset=0) == len(make_batch(0, 2))
    assert partition.high_watermark == 2
    assert partition.acks_status(outcome.required_offset) is None
    assert partition.note_replica_fetch(2, 4, now_ms=0, broker_epoch=1, log_start_offset=0) == 0, (
        "replica 2 is not in the ISR")
    assert partition.note_replica_fetch(1, 4, now_ms=0, broker_epoch=1,
                                        log_start_offset=0) == len(make_batch(1, 2))
    assert partition.high_watermark == 4
    assert partition.acks_status(outcome.required_offset) == ErrorCode.NONE


def test_the_log_is_told_each_new_high_watermark_for_its_local_readers() -> None:
    """The ring's readers on this host (Consumer(local=True)) are bounded by what the
    partition publishes: a leader's appends are not visible until the ISR holds them; one
    replica's are at once; a follower publishes what its leader told it."""
    partition = _partition(_three_replicas())
    assert _fake(partition).published_high_watermark == 0
    partition.produce([make_batch(0, 2)], acks=1)
    assert _fake(partition).published_high_watermark == 0
    partition.note_replica_fetch(1, 2, now_ms=0, broker_epoch=1, log_start_offset=0)
    assert _fake(partition).published_high_watermark == 2
    single = _partition()
    single.produce([make_batch(0, 3)], acks=1)
    assert _fake(single).published_high_watermark == 3
    follower = _partition(is_leader=False)
    follower.append_from_leader(make_batch(0, 2), read_header(make_batch(0, 2)))
    follower.follow_high_watermark(1)
    assert _fake(follower).published_high_watermark == 1


def test_the_high_watermark_never_moves_back() -> None:
    partition = _partition(_three_replicas())
    partition.produce([make_batch(0, 4)], acks=1)
    partition.note_replica_fetch(1, 4, now_ms=0, broker_epoch=1, log_start_offset=0)
    # a follower that truncated and restarted:
    partition.note_replica_fetch(1, 1, now_ms=0, broker_epoch=1, log_start_offset=0)
    assert partition.high_watermark == 4


def test_an_isr_below_min_after_the_append_cannot_be_acknowledged() -> None:
    """The HW stays while the ISR is below min.insync.replicas (KIP-966), so the entry waits
    (for the ISR to grow back, or its timeout); one the HW covered before the shrink is
    answered NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
    partition = _partition(_three_replicas())
    waiting = partition.produce([make_batch(0)], acks=-1)
    covered = partition.produce([make_batch(1)], acks=-1)
    partition.note_replica_fetch(1, waiting.required_offset, now_ms=0, broker_epoch=1,
                                 log_start_offset=0)
    partition.set_replicas(ReplicaSet(0, frozenset({0, 1, 2}), frozenset({0}), 2))
    assert partition.acks_status(waiting.required_offset) == (
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    )
    assert partition.acks_status(covered.required_offset) is None
    assert partition.high_watermark == waiting.required_offset


def test_consumers_read_below_the_high_watermark_and_followers_to_the_log_end() -> None:
    partition = _partition(_three_replicas())
    partition.produce([make_batch(0, 2)], acks=1)
    partition.note_replica_fetch(1, 2, now_ms=0, broker_epoch=1, log_start_offset=0)
    partition.produce([make_batch(1, 2)], acks=1)
    consumer = partition.read(0, 1 << 20, replica_id=-1, at_least_one=True)
    assert [base_offset_of(bytes(c)) for c in consumer.chunks] == [0]
    assert consumer.high_watermark == 2
    at_hw = partition.read(2, 1 << 20, replica_id=-1, at_least_one=True)
    assert at_hw.error_code == ErrorCode.NONE and at_hw.chunks == ()
    follower = partition.read(0, 1 << 20, replica_id=2, at_least_one=True)
    assert [base_offset_of(bytes(c)) for c in follower.chunks] == [0, 2]


def test_an_unknown_replica_may_not_fetch_as_a_follower() -> None:
    partition = _partition(_three_replicas())
    for replica_id in (0, 5):  # itself, a stranger
        read = partition.read(0, 100, replica_id=replica_id, at_least_one=True)
        assert read.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize("offset", [-1, 4, 2**62])
def test_offsets_outside_the_log_are_out_of_range_with_offsets_filled_in(offset: int) -> None:
    partition = _partition()
    partition.produce([make_batch(0, 3)], acks=1)
    read = partition.read(offset, 100, replica_id=-1, at_least_one=True)
    assert read.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (read.high_watermark, read.log_start_offset, read.chunks) == (3, 0, ())


def test_a_batch_over_the_budget_is_left_for_later_unless_it_is_the_first() -> None:
    partition = _partition()
    partition.produce([make_batch(0, 10, value_bytes=100)], acks=1)
    assert partition.read(0, 10, replica_id=-1, at_least_one=True).size_bytes > 10
    assert partition.read(0, 10, replica_id=-1, at_least_one=False).chunks == ()


def test_a_bad_batch_fails_itself_and_the_rest_of_its_entry_only() -> None:
    partition = _partition()
    corrupt = bytearray(make_batch(1))
    corrupt[-1] ^= 0xFF
    outcome = partition.produce([make_batch(0, 2), bytes(corrupt), make_batch(2)], acks=1)
    assert outcome.error_code == ErrorCode.CORRUPT_MESSAGE and outcome.base_offset == -1
    assert outcome.appended_bytes == len(make_batch(0, 2)), "the first batch stays appended"
    assert _fake(partition).log_end_offset == 2
    assert partition.produce([make_batch(3)], acks=1).base_offset == 2


def test_an_entry_without_batches_is_invalid() -> None:
    assert _partition().produce([], acks=1).error_code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(
    ("batch", "code"),
    [
        (b"\x00" * 10, ErrorCode.CORRUPT_MESSAGE),
        (build_batch([NewRecord(b"v", b"k")], is_transactional=True),
         ErrorCode.INVALID_RECORD),
    ],
)
def test_malformed_or_unsupported_batches_are_refused(batch: bytes, code: ErrorCode) -> None:
    partition = _partition()
    assert partition.produce([batch], acks=1).error_code == code
    assert _fake(partition).log_end_offset == 0


def test_clients_may_not_write_control_batches() -> None:
    control = bytearray(build_batch([NewRecord(b"v", b"k")]))
    control[22] |= 0x20  # the control bit of the attributes, which the CRC covers
    control[17:21] = crc32c.crc32c(bytes(control[21:])).to_bytes(4, "big")
    partition = _partition()
    outcome = partition.produce([bytes(control)], acks=1)
    assert outcome.error_code == ErrorCode.INVALID_RECORD
    assert _fake(partition).log_end_offset == 0


def test_a_compacted_topic_refuses_records_without_a_key() -> None:
    partition = _partition(compacted=True)
    keyless = build_batch([NewRecord(b"v", b"k"), NewRecord(b"v", None)])
    assert partition.produce([keyless], acks=1).error_code == ErrorCode.INVALID_RECORD
    keyed = build_batch([NewRecord(b"v", b"k"), NewRecord(None, b"j")])
    assert partition.produce([keyed], acks=1).error_code == ErrorCode.NONE


@pytest.mark.parametrize(
    ("sent", "stored"), [(Compression.LZ4, Compression.NONE), (Compression.NONE, Compression.LZ4)]
)
def test_a_topic_codec_re_encodes_batches_sent_in_another(
    sent: Compression, stored: Compression
) -> None:
    """compression.type names a codec: the stored batch is in it, with the same records and
    producer fields (Kafka's rule)."""
    records = [NewRecord(b"v0", b"k0", (("h", b"x"),), T0_MS), NewRecord(None, b"k1"),
               NewRecord(b"", None, (), T0_MS + 5)]
    batch = build_batch(records, compression=sent, producer_id=7, producer_epoch=1,
                        base_sequence=0, base_timestamp_ms=T0_MS)
    partition = _partition(compression=stored)
    outcome = partition.produce([batch], acks=1)
    assert outcome.error_code == ErrorCode.NONE
    (kept,) = _fake(partition).batches
    header = read_header(kept)
    assert header.compression == stored
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 0)
    assert outcome.appended_bytes == len(kept) != len(batch)
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp_ms) for r in read_records(kept)] == [
        (r.offset, r.key, r.value, r.headers, r.timestamp_ms) for r in read_records(batch)]
    assert partition.produce([batch], acks=1).base_offset == 0, "still a known retry"


def test_the_producers_codec_is_kept_as_sent() -> None:
    batch = make_batch(0, compression=Compression.LZ4)
    for compression in (None, Compression.LZ4):
        partition = _partition(compression=compression)
        partition.produce([batch], acks=1)
        (kept,) = _fake(partition).batches
        assert kept[16:] == batch[16:], "the same bytes, but for the stamped offset and epoch"


def test_a_batch_with_a_wrong_crc_is_refused_before_it_is_re_encoded() -> None:
    corrupt = bytearray(make_batch(0, compression=Compression.LZ4))
    corrupt[17] ^= 0xFF  # the CRC field: the records themselves are intact
    partition = _partition(compression=Compression.NONE)
    assert partition.produce([bytes(corrupt)], acks=1).error_code == ErrorCode.CORRUPT_MESSAGE
    assert _fake(partition).log_end_offset == 0


def _idempotent(first_sequence: int, count: int = 2, epoch: int = 0) -> bytes:
    return build_batch_from_values(
        [b"x"] * count, timestamp_ms=T0_MS, producer_id=11, producer_epoch=epoch,
        base_sequence=first_sequence,
    )


def test_an_idempotent_retry_gets_the_original_offset_and_appends_nothing() -> None:
    partition = _partition()
    partition.produce([make_batch(0)], acks=1)
    first = partition.produce([_idempotent(0)], acks=-1)
    retry = partition.produce([_idempotent(0)], acks=-1)
    assert first.base_offset == retry.base_offset == 3
    assert retry.appended_bytes == 0 and retry.required_offset == 5
    assert _fake(partition).log_end_offset == 5
    gap = partition.produce([_idempotent(5)], acks=-1)
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert partition.produce([_idempotent(2)], acks=-1).base_offset == 5


def test_list_offsets_latest_earliest_and_by_time() -> None:
    partition = _partition(_three_replicas())
    for tag in range(3):
        partition.produce([make_batch(tag, 2, timestamp_ms=T0_MS + 1000 * tag)], acks=1)
    partition.note_replica_fetch(1, 4, now_ms=0, broker_epoch=1, log_start_offset=0)
    assert partition.list_offset(-1) == (4, -1), "latest is the high watermark"
    assert partition.list_offset(-2) == (0, -1)
    assert partition.list_offset(T0_MS + 500) == (2, T0_MS + 1000)
    assert partition.list_offset(T0_MS + 1500) == (-1, -1), "only above the HW"
    assert partition.list_offset(-3) == (2, T0_MS + 1000), "the max timestamp below the HW"
    with pytest.raises(ZlogError) as caught:
        partition.list_offset(-4)
    assert caught.value.code == ErrorCode.INVALID_REQUEST


def test_an_older_assignment_epoch_is_fenced() -> None:
    partition = _partition()
    partition.become(leader_epoch=4, is_leader=True)
    with pytest.raises(ZlogError) as caught:
        partition.become(leader_epoch=3, is_leader=True)
    assert caught.value.code == ErrorCode.FENCED_LEADER_EPOCH


def test_the_rules_hold_over_the_real_log(tmp_path: Path, shm_dir: Path) -> None:
    """The fake keeps PartitionLog's contract: the same scenario over the real one."""
    config = LogConfig(ring_bytes=64 * 1024)
    with PartitionLog(tmp_path, "t", 0, config, ring_dir=shm_dir) as log:
        partition = Partition("t", 0, log, leader_epoch=1, replicas=_three_replicas())
        for tag in range(3):
            partition.produce([make_batch(tag, 2, timestamp_ms=T0_MS + 1000 * tag)], acks=1)
        fetched = partition.note_replica_fetch(1, 4, now_ms=0, broker_epoch=1, log_start_offset=0)
        assert fetched == 2 * len(make_batch(0, 2))
        consumer = partition.read(0, 1 << 20, replica_id=-1, at_least_one=True)
        assert sum(c.nbytes for c in consumer.chunks) == 2 * len(make_batch(0, 2))
        assert partition.read(7, 100, replica_id=-1, at_least_one=True).error_code == (
            ErrorCode.OFFSET_OUT_OF_RANGE
        )
        assert partition.list_offset(T0_MS + 500) == (2, T0_MS + 1000)
