"""Batches with recognisable contents, for storage tests."""

from __future__ import annotations

from zlog.record.arrays import build_batch_from_values, parse_batch
from zlog.record.header import Compression


def make_batch(
    tag: int,
    record_count: int = 3,
    value_bytes: int = 20,
    timestamp_ms: int = 1_700_000_000_000,
    compression: Compression = Compression.NONE,
) -> bytes:
    """A batch whose values say which batch (tag) and which record they are."""
    values = [
        f"{tag:010d}:{i:06d}:".encode().ljust(value_bytes, b"x") for i in range(record_count)
    ]
    return build_batch_from_values(values, timestamp_ms=timestamp_ms, compression=compression)


def batch_tags(buf: bytes | memoryview) -> list[int]:
    """The tags of the records in one batch (each record carries its batch's tag)."""
    view = parse_batch(buf)
    return [int(bytes(view.value(i))[:10]) for i in range(len(view.offsets))]


def split_batches(chunks: list[memoryview]) -> list[bytes]:
    """Cut read() results into individual batches."""
    batches: list[bytes] = []
    for chunk in chunks:
        raw = bytes(chunk)
        position = 0
        while position < len(raw):
            length = int.from_bytes(raw[position + 8 : position + 12], "big") + 12
            batches.append(raw[position : position + length])
            position += length
    return batches


def base_offset_of(batch: bytes) -> int:
    return int.from_bytes(batch[:8], "big", signed=True)
