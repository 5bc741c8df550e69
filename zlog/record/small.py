"""Small batches, one record at a time: the latency path of producers, brokers and consumers.

numpy's array passes have a fixed cost per batch (about 80 us to decode one, 90 us to encode
one) that a plain walk with the general codec's varint readers (about 2.5 us a record)
undercuts up to about 30 records; both paths switch below 24 records
(`arrays.WALK_BELOW_RECORDS`, the producer's `ARRAY_CODEC_RECORDS_MIN`). A producer or consumer
keeping up at a low rate moves small batches, so this is the latency path of the producer's
encode, the broker's produce check and the consumer's decode.

`walk_records` decodes for `arrays.parse_batch` and the broker; it makes exactly the checks the
array parser makes, and tests hold the two to the same answers on every single-byte corruption.
`build_plain_batch` encodes a small batch of records without headers; its bytes are
`records.build_batch`'s, which tests hold it to.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from zlog.errors import ErrorCode, ZlogError
from zlog.record.compression import compress_records
from zlog.record.header import (
    RECORD_BODY_BYTES_MIN,
    RECORD_BYTES_MIN,
    BatchHeader,
    Compression,
    attributes_for,
    seal_batch,
)
from zlog.record.records import RecordHeaders, decode_headers, record_body, record_timestamp_ms
from zlog.record.varint import decode_varint, decode_varlong, encode_varint

# A batch of records without headers estimated at no more than this, with timestamps in
# [0, 2^62), may be written by `build_plain_batch`: far from every size and range limit that
# `records.build_batch` checks for, so it needs none of those checks and none of their objects.
PLAIN_BATCH_BYTES_MAX: Final = 64 * 1024
PLAIN_TIMESTAMP_MS_MAX: Final = 2**62 - 1


class WalkedRecords(NamedTuple):
    offsets: list[int]
    timestamps_ms: list[int]
    key_starts: list[int]
    key_lengths: list[int]
    value_starts: list[int]
    value_lengths: list[int]
    header_counts: list[int]
    record_headers: dict[int, RecordHeaders]


def walk_records(data: bytes, header: BatchHeader) -> WalkedRecords:
    """Decode the records of a validated batch one by one, with the checks `parse_batch` makes."""
    data_bytes = len(data)
    count = header.record_count
    if data_bytes < count * RECORD_BYTES_MIN:
        raise ZlogError(ErrorCode.CORRUPT_MESSAGE,
                        f"{count} records cannot fit in {data_bytes} bytes")
    offsets: list[int] = []
    stamps: list[int] = []
    key_starts: list[int] = []
    key_lengths: list[int] = []
    value_starts: list[int] = []
    value_lengths: list[int] = []
    header_counts: list[int] = []
    record_headers: dict[int, RecordHeaders] = {}
    position = 0
    previous_delta = -1
    for index in range(count):
        length, body_start = decode_varint(data, position, data_bytes)
        if length < RECORD_BODY_BYTES_MIN or length > data_bytes - body_start:
            raise ZlogError(ErrorCode.CORRUPT_MESSAGE, f"record {index} claims {length} bytes")
        end = body_start + length
        # Skip the attributes byte: unused in v2 and ignored by Kafka's own readers.
        timestamp_delta_ms, cursor = decode_varlong(data, body_start + 1, end)
        offset_delta, cursor = decode_varint(data, cursor, end)
        if offset_delta <= previous_delta or offset_delta > header.last_offset_delta:
            raise ZlogError(
                ErrorCode.INVALID_RECORD,
                f"record {index} has offset delta {offset_delta} after {previous_delta}"
                f" (lastOffsetDelta {header.last_offset_delta})",
            )
        previous_delta = offset_delta
        for starts, lengths, what in ((key_starts, key_lengths, "key"),
                                      (value_starts, value_lengths, "value")):
            piece_length, cursor = decode_varint(data, cursor, end)
            if piece_length < -1 or piece_length > end - cursor:
                raise ZlogError(ErrorCode.CORRUPT_MESSAGE,
                                f"a {what} length of {piece_length} does not fit its record")
            starts.append(cursor)
            lengths.append(piece_length)
            cursor += max(piece_length, 0)
        headers, cursor = decode_headers(data, cursor, end)
        if cursor != end:
            raise ZlogError(ErrorCode.CORRUPT_MESSAGE,
                            f"record {index} has {end - cursor} bytes left over")
        if headers:
            record_headers[index] = headers
        offsets.append(header.base_offset + offset_delta)
        stamps.append(record_timestamp_ms(header, timestamp_delta_ms))
        header_counts.append(len(headers))
        position = end
    if position != data_bytes:
        raise ZlogError(ErrorCode.CORRUPT_MESSAGE,
                        f"{data_bytes - position} bytes follow the last of {count} records")
    return WalkedRecords(offsets, stamps, key_starts, key_lengths, value_starts, value_lengths,
                         header_counts, record_headers)


def build_plain_batch(
    values: list[bytes | None],
    keys: list[bytes | None] | None,
    timestamps_ms: list[int],
    *,
    compression: Compression,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
) -> bytes:
    """The batch `records.build_batch` writes for records without headers, without its checks.

    The caller keeps to PLAIN_BATCH_BYTES_MAX and PLAIN_TIMESTAMP_MS_MAX. The base and max
    timestamp are the largest timestamp, as `build_batch` picks them. The latency path sends
    batches of one or a few records, for which the general builder's per-record objects and
    limit checks cost more than the encoding itself.
    """
    count = len(values)
    assert 0 < count == len(timestamps_ms), "one timestamp per value"
    base_ms = max(timestamps_ms)
    parts: list[bytes] = []
    for index, value in enumerate(values):
        key = None if keys is None else keys[index]
        body = record_body(timestamps_ms[index] - base_ms, index, key, value)
        parts.append(encode_varint(len(body)))
        parts.append(body)
    return seal_batch(
        compress_records(b"".join(parts), compression),
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=attributes_for(compression),
        last_offset_delta=count - 1,
        base_timestamp_ms=base_ms,
        max_timestamp_ms=base_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=count,
    )
