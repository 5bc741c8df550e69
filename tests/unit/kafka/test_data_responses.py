"""The hand-written Produce and Fetch encoders give exactly kio's bytes, at every version served:
kio reads each answer field for field and writes the same bytes back."""

from __future__ import annotations

import io
import struct
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer

from zlog.errors import ErrorCode
from zlog.kafka.data_responses import (
    FetchPartition,
    ProducePartition,
    encode_fetch_response,
    encode_produce_response,
    uvarint,
    with_throttle_time,
)


def _read_with_kio(api_key: int, version: int, frame: bytes) -> tuple[Any, Any]:
    """kio's reading of a whole frame, which must consume it exactly and write it back."""
    (size_bytes,) = struct.unpack_from(">i", frame)
    assert size_bytes == len(frame) - 4
    payload = frame[4:]
    schema = load_response_schema(api_key, version)
    header, header_bytes = entity_reader(schema.__header_schema__)(payload, 0)
    body, body_bytes = entity_reader(schema)(payload, header_bytes)
    assert header_bytes + body_bytes == len(payload)
    again = io.BytesIO()
    entity_writer(schema.__header_schema__)(again, header)
    entity_writer(schema)(again, body)
    assert again.getvalue() == payload, "kio writes the same bytes"
    return header, body


@pytest.mark.parametrize("version", range(3, 10))
def test_produce_response_is_kios(version: int) -> None:
    partitions = [ProducePartition(0, 0, 42, 7),
                  ProducePartition(3, int(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER), -1, 7,
                                   "sequence 9 follows 4")]
    frame = encode_produce_response(version, 1234, [("orders", partitions), ("é", [])])
    header, body = _read_with_kio(0, version, frame)
    assert header.correlation_id == 1234
    assert [t.name for t in body.responses] == ["orders", "é"]
    first, second = body.responses[0].partition_responses
    assert (first.index, first.error_code, first.base_offset) == (0, 0, 42)
    assert (second.index, int(second.error_code), second.base_offset) == (3, 45, -1)
    assert first.log_append_time is None  # -1: CreateTime
    if version >= 5:
        assert first.log_start_offset == 7
    if version >= 8:
        assert (first.error_message, second.error_message) == (None, "sequence 9 follows 4")
        assert second.record_errors == ()


@pytest.mark.parametrize("version", range(4, 13))
def test_fetch_response_is_kios_and_gathers_the_stored_bytes(version: int) -> None:
    stored = bytearray(b"batch-one|batch-two")
    view = memoryview(stored)
    chunks = [view[:10], view[10:]]
    frames = encode_fetch_response(version, 99, [
        ("t", [FetchPartition(0, 0, 500, 3, chunks), FetchPartition(1, 0, 8, 0)]),
        ("u", [FetchPartition(2, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1, -1)]),
    ])
    assert any(frame is chunk for frame in frames for chunk in chunks), "never copied"
    header, body = _read_with_kio(1, version, b"".join(bytes(f) for f in frames))
    assert header.correlation_id == 99
    data, empty = body.responses[0].partitions
    assert data.records == bytes(stored)
    assert empty.records == b"", "empty bytes, never null"
    assert (data.high_watermark, data.last_stable_offset) == (500, 500), "LSO = HW"
    assert data.aborted_transactions == ()
    if version >= 5:
        assert data.log_start_offset == 3
    if version >= 11:
        assert data.preferred_read_replica == -1
    if version >= 7:
        assert (int(body.error_code), body.session_id) == (0, 0)
    (failed,) = body.responses[1].partitions
    assert (failed.partition_index, int(failed.error_code)) == (2, 6)


def test_uvarint_matches_kafkas_unsigned_varint() -> None:
    assert [uvarint(n) for n in (0, 1, 127, 128, 300, 2**31 - 1)] == [
        b"\x00", b"\x01", b"\x7f", b"\x80\x01", b"\xac\x02", b"\xff\xff\xff\xff\x07"]


@pytest.mark.parametrize("version", range(3, 10))
def test_a_held_produce_answer_says_its_throttle_time(version: int) -> None:
    frame = encode_produce_response(version, 7, [("orders", [ProducePartition(0, 0, 42, 0)])])
    held = with_throttle_time(True, version, [frame], 1_500)
    _header, body = _read_with_kio(0, version, b"".join(held))
    assert body.throttle_time.total_seconds() * 1000 == 1_500
    assert body.responses[0].partition_responses[0].base_offset == 42


@pytest.mark.parametrize("version", range(4, 13))
def test_a_held_fetch_answer_says_its_throttle_time(version: int) -> None:
    batch = memoryview(b"stored batch bytes")
    frames = encode_fetch_response(version, 7, [("orders", [FetchPartition(0, 0, 5, 0,
                                                                         (batch,))])])
    held = with_throttle_time(False, version, frames, 250)
    assert held[1:] == frames[1:], "the stored batches stay uncopied"
    _header, body = _read_with_kio(1, version, b"".join(bytes(part) for part in held))
    assert body.throttle_time.total_seconds() * 1000 == 250
    assert bytes(body.responses[0].partitions[0].records) == bytes(batch)
