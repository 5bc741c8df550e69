"""Malformed batches: each fault gets its Kafka error code, and nothing but ZlogError escapes.

Batches arrive from clients and from disk after a crash (DESIGN.md section 5: bad input gets a
clear error code and the process keeps serving), so every decoder must turn any byte string
into either records or a ZlogError, never an IndexError, struct.error or ValueError.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import lz4.frame
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.record.batch_edits import reseal
from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.record.arrays import build_batch_from_values, parse_batch
from zlog.record.header import (
    BATCH_HEADER_BYTES,
    LOG_OVERHEAD_BYTES,
    Compression,
    read_header,
    scan_batches,
    validate_batch,
)
from zlog.record.records import NewRecord, build_batch, read_records, validate_records
from zlog.record.varint import INT64_MAX, encode_varint

# Byte positions of header fields (DefaultRecordBatch.java).
BATCH_LENGTH_AT = 8
MAGIC_AT = 16
CRC_AT = 17
CODEC_AT = 22  # low byte of the int16 attributes
LAST_OFFSET_DELTA_AT = 23
BASE_TIMESTAMP_AT = 27
RECORD_COUNT_AT = 57


def with_field(batch: bytes, fmt: str, at: int, value: int) -> bytes:
    edited = bytearray(batch)
    struct.pack_into(fmt, edited, at, value)
    return reseal(edited)


def with_records(section: bytes, count: int, compression: Compression = Compression.NONE) -> bytes:
    """A batch whose records section is `section` (compressed here if asked), sealed validly."""
    template = bytearray(build_batch([NewRecord(b"")] * count))
    if compression == Compression.LZ4:
        section = lz4.frame.compress(section, block_linked=False)
        template[CODEC_AT] = int(Compression.LZ4)
    return reseal(template[:BATCH_HEADER_BYTES] + bytearray(section))


def record(
    *,
    attributes: bytes = b"\x00",
    timestamp_delta: bytes = b"\x00",
    offset_delta: bytes = b"\x00",
    key: bytes = encode_varint(-1),
    value: bytes = encode_varint(1) + b"a",
    headers: bytes = b"\x00",
) -> bytes:
    """One record with a correct length prefix; each field given as its encoded bytes."""
    body = attributes + timestamp_delta + offset_delta + key + value + headers
    return encode_varint(len(body)) + body


def deep_decoders() -> list[Callable[[bytes], object]]:
    return [validate_records, read_records, parse_batch]


def assert_rejected(batch: bytes, code: ErrorCode, *, deep: bool = False) -> None:
    """Every decoder rejects the batch with `code`; `deep` faults pass the O(1) check."""
    decoders = deep_decoders()
    if deep:
        validate_batch(batch, strict=False)
    else:
        decoders = [lambda buf: validate_batch(buf, strict=False), *decoders]
    for decode in decoders:
        with pytest.raises(ZlogError) as raised:
            decode(batch)
        assert raised.value.code == code, (decode, raised.value)


GOOD = build_batch([NewRecord(b"value", key=b"key"), NewRecord(b"v2"), NewRecord(None)])


def test_the_good_batch_is_good() -> None:
    validate_batch(GOOD)
    validate_records(GOOD)


# ---------------------------------------------------------------------------------------------
# Header faults
# ---------------------------------------------------------------------------------------------


def test_wrong_magic() -> None:
    for magic in (0, 1, 3, -1):
        edited = bytearray(GOOD)
        struct.pack_into(">b", edited, MAGIC_AT, magic)  # outside the CRC
        assert_rejected(bytes(edited), ErrorCode.CORRUPT_MESSAGE)
        with pytest.raises(ZlogError) as raised:
            read_header(edited)
        assert raised.value.code == ErrorCode.CORRUPT_MESSAGE


def test_crc_mismatch() -> None:
    edited = bytearray(GOOD)
    edited[-2] ^= 0x20
    assert_rejected(bytes(edited), ErrorCode.CORRUPT_MESSAGE)
    assert scan_batches(edited) == ([], 0)


@pytest.mark.parametrize("delta_bytes", [-1, 1, 1000, -(len(GOOD) - 20)])
def test_batch_length_disagreeing_with_the_bytes(delta_bytes: int) -> None:
    edited = bytearray(GOOD)
    struct.pack_into(">i", edited, BATCH_LENGTH_AT, len(GOOD) - LOG_OVERHEAD_BYTES + delta_bytes)
    assert_rejected(bytes(edited), ErrorCode.CORRUPT_MESSAGE)


def test_buffer_longer_or_shorter_than_the_batch() -> None:
    assert_rejected(GOOD + b"\x00", ErrorCode.CORRUPT_MESSAGE)
    assert_rejected(GOOD[:-1], ErrorCode.CORRUPT_MESSAGE)


@pytest.mark.parametrize("kept_bytes", [0, 1, 12, 60])
def test_truncated_header(kept_bytes: int) -> None:
    assert_rejected(GOOD[:kept_bytes], ErrorCode.CORRUPT_MESSAGE)
    with pytest.raises(ZlogError) as raised:
        read_header(GOOD[:kept_bytes])
    assert raised.value.code == ErrorCode.CORRUPT_MESSAGE


def test_read_header_past_the_end() -> None:
    for position in (len(GOOD), len(GOOD) - 60, -1):
        with pytest.raises(ZlogError) as raised:
            read_header(GOOD, position)
        assert raised.value.code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("count", [0, -1, -(2**31)])
def test_record_count_not_positive(count: int) -> None:
    assert_rejected(with_field(GOOD, ">i", RECORD_COUNT_AT, count), ErrorCode.INVALID_RECORD)


def test_record_count_beyond_the_bound() -> None:
    edited = with_field(GOOD, ">i", RECORD_COUNT_AT, limits.BATCH_RECORDS_MAX + 1)
    edited = with_field(edited, ">i", LAST_OFFSET_DELTA_AT, limits.BATCH_RECORDS_MAX)
    assert_rejected(edited, ErrorCode.INVALID_RECORD)


def test_record_count_that_cannot_fit_the_bytes() -> None:
    edited = with_field(GOOD, ">i", RECORD_COUNT_AT, 1_000)
    edited = with_field(edited, ">i", LAST_OFFSET_DELTA_AT, 999)
    assert_rejected(edited, ErrorCode.CORRUPT_MESSAGE)


def test_record_count_disagreeing_with_the_records() -> None:
    fewer = with_field(GOOD, ">i", RECORD_COUNT_AT, 2)  # a record is left over
    assert_rejected(fewer, ErrorCode.CORRUPT_MESSAGE, deep=True)
    more = with_field(GOOD, ">i", RECORD_COUNT_AT, 4)  # records run out
    more = with_field(more, ">i", LAST_OFFSET_DELTA_AT, 3)
    assert_rejected(more, ErrorCode.CORRUPT_MESSAGE, deep=True)


@pytest.mark.parametrize("last_offset_delta", [0, 1, 3, 2**31 - 1, -1])
def test_last_offset_delta_other_than_count_minus_one(last_offset_delta: int) -> None:
    edited = with_field(GOOD, ">i", LAST_OFFSET_DELTA_AT, last_offset_delta)
    with pytest.raises(ZlogError) as raised:
        validate_batch(edited, strict=True)
    assert raised.value.code == ErrorCode.INVALID_RECORD
    if last_offset_delta >= 2:  # compacted batches may keep a larger delta
        assert len(read_records(edited)) == 3
    else:
        assert_rejected(edited, ErrorCode.INVALID_RECORD)


def test_negative_base_offset() -> None:
    edited = bytearray(GOOD)
    struct.pack_into(">q", edited, 0, -5)  # outside the CRC
    assert_rejected(bytes(edited), ErrorCode.CORRUPT_MESSAGE)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec(codec: int) -> None:
    edited = bytearray(GOOD)
    edited[CODEC_AT] = codec
    assert_rejected(reseal(edited), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
    with pytest.raises(ZlogError) as raised:
        _ = read_header(edited).compression
    assert raised.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.ZSTD])
def test_a_codec_claimed_over_plain_records_is_corrupt(codec: Compression) -> None:
    """The header passes (its CRC is right), the records section does not inflate."""
    edited = bytearray(GOOD)
    edited[CODEC_AT] = int(codec)
    with pytest.raises(ZlogError) as raised:
        read_records(reseal(edited))
    assert raised.value.code == ErrorCode.CORRUPT_MESSAGE


def test_batch_beyond_the_size_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "BATCH_SIZE_BYTES_MAX", len(GOOD) - 1)
    assert_rejected(GOOD, ErrorCode.MESSAGE_TOO_LARGE)
    assert scan_batches(GOOD) == ([], 0)
    with pytest.raises(ZlogError) as raised:
        build_batch([NewRecord(b"x" * len(GOOD))])
    assert raised.value.code == ErrorCode.MESSAGE_TOO_LARGE
    with pytest.raises(ZlogError) as raised:
        build_batch_from_values([b"x" * len(GOOD)], timestamp_ms=0)
    assert raised.value.code == ErrorCode.MESSAGE_TOO_LARGE


def test_builder_limits_are_checked_in_the_order_fields_are_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Header count, key, value, header keys and values, then the whole record."""
    monkeypatch.setattr(limits, "RECORD_SIZE_BYTES_MAX", 10)
    monkeypatch.setattr(limits, "HEADERS_PER_RECORD_MAX", 2)
    cases = [
        (NewRecord(b"v" * 11, key=b"k" * 11, headers=(("a", None),) * 3),
         ErrorCode.INVALID_RECORD, "3 headers exceed 2"),
        (NewRecord(b"v" * 11, key=b"k" * 11), ErrorCode.MESSAGE_TOO_LARGE, "a key of 11"),
        (NewRecord(b"v" * 11, key=b"k"), ErrorCode.MESSAGE_TOO_LARGE, "a value of 11"),
        (NewRecord(b"v", headers=(("a" * 11, b"x" * 11),)), ErrorCode.MESSAGE_TOO_LARGE,
         "a header key of 11"),
        (NewRecord(b"v", headers=(("a", b"x" * 11),)), ErrorCode.MESSAGE_TOO_LARGE,
         "a header value of 11"),
        (NewRecord(b"v" * 5, key=b"k" * 5), ErrorCode.MESSAGE_TOO_LARGE, "a record of 16"),
    ]
    for record, code, message in cases:
        with pytest.raises(ZlogError) as raised:
            build_batch([record])
        assert (raised.value.code, message in str(raised.value)) == (code, True), record


def test_building_nothing_or_impossible_timestamps() -> None:
    with pytest.raises(ZlogError) as raised:
        build_batch([])
    assert raised.value.code == ErrorCode.INVALID_RECORD
    with pytest.raises(ZlogError) as raised:
        build_batch_from_values([], timestamp_ms=0)
    assert raised.value.code == ErrorCode.INVALID_RECORD
    with pytest.raises(ZlogError) as raised:
        build_batch([NewRecord(b"a", timestamp_ms=-(2**63)), NewRecord(b"b", timestamp_ms=1)])
    assert raised.value.code == ErrorCode.INVALID_TIMESTAMP
    with pytest.raises(ZlogError) as raised:
        build_batch([NewRecord(b"a", timestamp_ms=2**63)])
    assert raised.value.code == ErrorCode.INVALID_TIMESTAMP


# ---------------------------------------------------------------------------------------------
# Record faults (the header is valid; only a deep check finds them)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4])
def test_hand_built_records_are_valid(compression: Compression) -> None:
    batch = with_records(record() + record(offset_delta=b"\x02"), 2, compression)
    assert [r.value for r in read_records(batch)] == [b"a", b"a"]
    assert parse_batch(batch).values() == [b"a", b"a"]


@pytest.mark.parametrize(
    "claimed_length",
    [
        encode_varint(2**31 - 1),  # a record claiming 2 GiB
        b"\x80\x80\x80\x80\x10",  # 2**31: overflows the int32 length
        encode_varint(-7),  # negative
        encode_varint(5),  # shorter than the smallest record body
        encode_varint(100),  # past the end of the records
    ],
)
def test_absurd_record_lengths(claimed_length: bytes) -> None:
    body = record()[1:]
    batch = with_records(record() + claimed_length + body, 2)
    assert_rejected(batch, ErrorCode.CORRUPT_MESSAGE, deep=True)


@pytest.mark.parametrize(
    "fields",
    [
        {"timestamp_delta": b"\xff" * 10 + b"\x01"},  # varlong of 11 bytes
        {"timestamp_delta": b"\xff" * 9 + b"\x02"},  # overflows int64
        {"offset_delta": b"\xff" * 5 + b"\x00"},  # varint with 5 continuation bytes
        {"key": b"\xff" * 6},  # continues past the record
        {"key": encode_varint(-2)},
        {"value": encode_varint(-3)},
        {"key": encode_varint(2**31 - 1)},
        {"value": encode_varint(50) + b"short"},
        {"headers": encode_varint(-1)},
        {"headers": encode_varint(1) + encode_varint(-1) + encode_varint(-1)},  # null key
        {"headers": encode_varint(1) + encode_varint(1) + b"k" + encode_varint(-2)},
        {"headers": encode_varint(1) + encode_varint(2) + b"\xc3\x28" + b"\x00"},  # bad UTF-8
        {"headers": encode_varint(limits.HEADERS_PER_RECORD_MAX + 1)},
        {"headers": encode_varint(3) + b"\x02k\x00"},  # fewer headers than counted
        {"headers": b"\x00\x00"},  # a byte left over in the record
    ],
)
@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4])
def test_malformed_record_fields(fields: dict[str, bytes], compression: Compression) -> None:
    second = record(**{"offset_delta": encode_varint(1), **fields})
    batch = with_records(record() + second, 2, compression)
    assert_rejected(batch, ErrorCode.CORRUPT_MESSAGE, deep=True)


@pytest.mark.parametrize(
    "second_offset_delta",
    [encode_varint(0), encode_varint(-1), encode_varint(2)],  # repeats, goes back, passes last
)
def test_offset_deltas_not_increasing_up_to_the_last(second_offset_delta: bytes) -> None:
    batch = with_records(record() + record(offset_delta=second_offset_delta), 2)
    assert_rejected(batch, ErrorCode.INVALID_RECORD, deep=True)


def test_timestamp_overflowing_int64() -> None:
    batch = with_records(record(timestamp_delta=encode_varint(1)), 1)
    batch = with_field(batch, ">q", BASE_TIMESTAMP_AT, INT64_MAX)
    assert_rejected(batch, ErrorCode.CORRUPT_MESSAGE, deep=True)


def test_lz4_bomb_beyond_the_decompression_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """64 MiB of zeros compress to about 250 KiB; the bound stops inflating long before."""
    bomb = with_records(bytes(64 * 1024 * 1024), 1, Compression.LZ4)
    assert len(bomb) < 300_000
    genuine = build_batch([NewRecord(bytes(2 * 1024 * 1024))], compression=Compression.LZ4)
    monkeypatch.setattr(limits, "DECOMPRESSED_BATCH_BYTES_MAX", 1024 * 1024)
    assert_rejected(bomb, ErrorCode.MESSAGE_TOO_LARGE, deep=True)
    assert_rejected(genuine, ErrorCode.MESSAGE_TOO_LARGE, deep=True)
    # Nor does zlog build a batch it would refuse to read.
    with pytest.raises(ZlogError) as raised:
        build_batch([NewRecord(bytes(2 * 1024 * 1024))], compression=Compression.LZ4)
    assert raised.value.code == ErrorCode.MESSAGE_TOO_LARGE


@pytest.mark.parametrize(
    "section",
    [
        b"not an lz4 frame at all",
        lz4.frame.compress(record(), block_linked=False)[:-3],  # truncated
        lz4.frame.compress(record(), block_linked=False) + b"\x00",  # trailing byte
        b"",
    ],
)
def test_broken_lz4_frames(section: bytes) -> None:
    template = bytearray(build_batch([NewRecord(b"a")]))
    template[CODEC_AT] = int(Compression.LZ4)
    batch = reseal(template[:BATCH_HEADER_BYTES] + bytearray(section))
    assert_rejected(batch, ErrorCode.CORRUPT_MESSAGE, deep=True)


# ---------------------------------------------------------------------------------------------
# Random mutations: only ZlogError or success, and the two readers agree
# ---------------------------------------------------------------------------------------------


def outcome(decode: Callable[[bytes], object], batch: bytes) -> object:
    """The decoded result, or the error code; any other exception fails the test."""
    try:
        return decode(batch)
    except ZlogError as error:
        return error.code


def check_every_decoder(batch: bytes) -> None:
    outcome(validate_batch, batch)
    outcome(lambda buf: validate_batch(buf, strict=False), batch)
    _found, end = scan_batches(batch)
    assert 0 <= end <= len(batch)
    general = outcome(read_records, batch)
    fast = outcome(lambda buf: parse_batch(buf).to_records(), batch)
    if isinstance(general, ErrorCode) or isinstance(fast, ErrorCode):
        assert isinstance(general, ErrorCode) and isinstance(fast, ErrorCode), (general, fast)
    else:
        assert general == fast
    assert (outcome(validate_records, batch) is None) == (not isinstance(general, ErrorCode))


def mutation_bases() -> list[bytes]:
    rng = np.random.default_rng(0)
    return [
        GOOD,
        build_batch(
            [NewRecord(b"v" * 70, key=b"k", headers=(("h", b"x"), ("n", None)))] * 3,
            compression=Compression.LZ4,
        ),
        build_batch_from_values([b"x" * 100] * 80, timestamp_ms=1_000),
        build_batch_from_values(
            [rng.bytes(int(size)) for size in rng.integers(0, 40, 30)],
            keys=[b"key"] * 30,
            timestamp_ms=rng.integers(0, 10_000, 30),
        ),
        build_batch([NewRecord(b"a"), NewRecord(b"b")], offset_deltas=[1, 5], last_offset_delta=9),
    ]


BASES = mutation_bases()
mutation_strategy = st.one_of(
    st.tuples(st.just("set"), st.integers(0, 10_000), st.integers(0, 255)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.binary(min_size=1, max_size=6)),
    st.tuples(st.just("delete"), st.integers(0, 10_000), st.integers(1, 6)),
    st.tuples(st.just("truncate"), st.integers(0, 10_000), st.just(0)),
)


def mutate(batch: bytes, mutations: list[tuple[str, int, object]], floor: int) -> bytearray:
    """Apply edits at positions >= floor (positions wrap around the remaining bytes)."""
    edited = bytearray(batch)
    for kind, raw_position, argument in mutations:
        span = max(len(edited) - floor, 1)
        position = floor + raw_position % span
        if kind == "set" and position < len(edited):
            assert isinstance(argument, int)
            edited[position] = argument
        elif kind == "insert":
            assert isinstance(argument, bytes)
            edited[position:position] = argument
        elif kind == "delete":
            assert isinstance(argument, int)
            del edited[position : position + argument]
        elif kind == "truncate":
            del edited[position:]
    return edited


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(BASES),
    mutations=st.lists(mutation_strategy, min_size=1, max_size=4),
    keep_crc_valid=st.booleans(),
)
def test_mutated_batches_raise_only_zlog_errors(
    base: bytes, mutations: list[tuple[str, int, object]], keep_crc_valid: bool
) -> None:
    edited = mutate(base, mutations, floor=0)
    if keep_crc_valid and len(edited) >= BATCH_HEADER_BYTES:
        reseal(edited)
    check_every_decoder(bytes(edited))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(BASES),
    mutations=st.lists(mutation_strategy, min_size=1, max_size=4),
    compression=st.sampled_from([Compression.NONE, Compression.LZ4]),
    count_change=st.integers(-1, 1),
)
def test_mutated_records_raise_only_zlog_errors(
    base: bytes,
    mutations: list[tuple[str, int, object]],
    compression: Compression,
    count_change: int,
) -> None:
    """Mutate the decompressed records and reseal, so the deep checks see every edit."""
    header = validate_batch(base, strict=False)
    view = parse_batch(base)
    section = mutate(view.records.tobytes(), mutations, floor=0)
    count = max(header.record_count + count_change, 1)
    batch = bytearray(with_records(bytes(section), count, compression))
    struct.pack_into(">i", batch, LAST_OFFSET_DELTA_AT, max(header.last_offset_delta, count - 1))
    check_every_decoder(reseal(batch))
