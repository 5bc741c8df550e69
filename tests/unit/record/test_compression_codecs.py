"""Kafka's five codecs: batches round-trip, Java's xerial snappy and raw snappy both read,
and a section that lies about its codec or inflates past the bound gets a Kafka code."""

from __future__ import annotations

import struct
import zlib

import cramjam
import pytest

from tests.unit.record.batch_edits import reseal
from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.record.arrays import build_batch_from_values, parse_batch
from zlog.record.compression import XERIAL_MAGIC, uncompressed_records
from zlog.record.header import (
    BATCH_HEADER_BYTES,
    CODEC_MASK,
    Compression,
    seal_batch,
    validate_batch,
)
from zlog.record.records import NewRecord, build_batch, read_records

RECORDS = [NewRecord(b"value-%d" % i * 50, key=b"k%d" % i, headers=(("h", b"x"),),
                     timestamp_ms=1_700_000_000_000 + i) for i in range(300)]


@pytest.mark.parametrize("codec", list(Compression))
def test_every_codec_round_trips(codec: Compression) -> None:
    batch = build_batch(RECORDS, compression=codec)
    header = validate_batch(batch)
    assert header.compression == codec
    assert [(r.key, r.value, r.headers, r.timestamp_ms) for r in read_records(batch)] == [
        (r.key, r.value, r.headers, r.timestamp_ms) for r in RECORDS]
    values = [b"v%d" % i for i in range(1000)]
    assert parse_batch(build_batch_from_values(values, timestamp_ms=5,
                                               compression=codec)).values() == values


def _plain_section() -> bytes:
    return bytes(build_batch(RECORDS)[BATCH_HEADER_BYTES:])


def _resealed(section: bytes, codec: Compression) -> bytes:
    plain = validate_batch(build_batch(RECORDS))
    return seal_batch(section, base_offset=0, partition_leader_epoch=-1,
                      attributes=(plain.attributes & ~CODEC_MASK) | int(codec),
                      last_offset_delta=plain.last_offset_delta,
                      base_timestamp_ms=plain.base_timestamp_ms,
                      max_timestamp_ms=plain.max_timestamp_ms, producer_id=-1,
                      producer_epoch=-1, base_sequence=-1, record_count=plain.record_count)


def test_snappy_reads_raw_blocks_and_java_xerial_framing() -> None:
    section = _plain_section()
    raw = bytes(cramjam.snappy.compress_raw(section))
    half = len(section) // 2
    blocks = [bytes(cramjam.snappy.compress_raw(part)) for part in (section[:half],
                                                                     section[half:])]
    xerial = struct.pack(">8sii", XERIAL_MAGIC, 1, 1) + b"".join(
        struct.pack(">i", len(block)) + block for block in blocks)
    for framed in (raw, xerial):
        batch = _resealed(framed, Compression.SNAPPY)
        assert bytes(uncompressed_records(batch, validate_batch(batch))) == section
    ours = build_batch(RECORDS, compression=Compression.SNAPPY)
    assert ours[BATCH_HEADER_BYTES:][: len(XERIAL_MAGIC)] == XERIAL_MAGIC, "Java reads xerial"


def test_gzip_reads_concatenated_members() -> None:
    section = _plain_section()
    members = b"".join(_gzip(part) for part in (section[:100], section[100:]))
    batch = _resealed(members, Compression.GZIP)
    assert bytes(uncompressed_records(batch, validate_batch(batch))) == section


def _gzip(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4,
                                   Compression.ZSTD])
def test_inflation_past_the_bound_is_message_too_large(
        codec: Compression, monkeypatch: pytest.MonkeyPatch) -> None:
    batch = build_batch([NewRecord(b"\0" * 200_000)], compression=codec)
    header = validate_batch(batch)
    monkeypatch.setattr(limits, "DECOMPRESSED_BATCH_BYTES_MAX", 100_000)
    with pytest.raises(ZlogError) as raised:
        uncompressed_records(batch, header)
    assert raised.value.code == ErrorCode.MESSAGE_TOO_LARGE


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.ZSTD])
def test_a_truncated_section_is_corrupt(codec: Compression) -> None:
    batch = build_batch(RECORDS, compression=codec)
    cut = reseal(bytearray(batch[:-7] + b"\0" * 3))
    header = validate_batch(cut)
    with pytest.raises(ZlogError) as raised:
        uncompressed_records(cut, header)
    assert raised.value.code == ErrorCode.CORRUPT_MESSAGE
