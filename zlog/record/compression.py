"""Compression of a batch's records section: LZ4 frames in, bounded inflation out.

The codec bits of the attributes say how the records section after the header is stored; zlog
writes and reads NONE and LZ4 (frames of independent blocks, as Java clients require).
Inflation is bounded by `limits.DECOMPRESSED_BATCH_BYTES_MAX`, so a small frame that claims
gigabytes costs no more than the bound. `recompress` re-encodes a batch for a topic whose
compression.type is not the producer's.
"""

from __future__ import annotations

from typing import Final

import lz4.frame

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.record.header import (
    BATCH_HEADER_BYTES,
    CODEC_MASK,
    BatchHeader,
    Buffer,
    Compression,
    as_byte_view,
    attributes_for,
    seal_batch,
)

# An LZ4 frame is inflated in chunks that double from this size, so a small batch never pays
# for a buffer the size of the decompression bound.
_LZ4_CHUNK_BYTES_MIN: Final = 64 * 1024
_LZ4_ROUNDS_MAX: Final = 64

assert limits.BATCH_SIZE_BYTES_MAX <= limits.DECOMPRESSED_BATCH_BYTES_MAX


def _corrupt(message: str) -> ZlogError:
    return ZlogError(ErrorCode.CORRUPT_MESSAGE, message)


def compress_records(records: Buffer, compression: Compression) -> Buffer:
    """Compress a records section; LZ4 blocks are independent because Java clients require it."""
    if compression == Compression.NONE:
        return records
    if compression == Compression.LZ4:
        compressed: bytes = lz4.frame.compress(records, block_linked=False)
        return compressed
    raise ZlogError(
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        f"cannot write codec {int(compression)}; zlog writes uncompressed and LZ4 batches",
    )


def uncompressed_records(buf: Buffer, header: BatchHeader) -> Buffer:
    """The record bytes of a validated batch: a view when stored plain, else inflated (bounded)."""
    view = as_byte_view(buf)
    assert view.nbytes == header.size_bytes
    section = view[BATCH_HEADER_BYTES:]
    codec = header.attributes & CODEC_MASK
    if codec == Compression.NONE:
        return section
    assert codec == Compression.LZ4, "validate_batch admits no other codec"
    return _decompress_lz4(section)


def _decompress_lz4(section: memoryview) -> bytes:
    bound_bytes = limits.DECOMPRESSED_BATCH_BYTES_MAX
    decompressor = lz4.frame.LZ4FrameDecompressor()
    chunks: list[bytes] = []
    total_bytes = 0
    chunk_bytes = min(bound_bytes + 1, max(_LZ4_CHUNK_BYTES_MIN, 4 * section.nbytes))
    pending: Buffer = section
    for _round in range(_LZ4_ROUNDS_MAX):
        try:
            chunk = decompressor.decompress(pending, max_length=chunk_bytes)
        except RuntimeError as error:
            raise _corrupt(f"the LZ4 frame does not decode: {error}") from error
        pending = b""
        total_bytes += len(chunk)
        if total_bytes > bound_bytes:
            raise ZlogError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"the batch decompresses to more than {bound_bytes} bytes",
            )
        chunks.append(chunk)
        if decompressor.eof:
            if decompressor.unused_data:
                raise _corrupt("bytes follow the end of the LZ4 frame")
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if decompressor.needs_input:
            raise _corrupt("the LZ4 frame is truncated")
        chunk_bytes = min(2 * chunk_bytes, bound_bytes + 1 - total_bytes)
    raise _corrupt(f"the LZ4 frame did not end within {_LZ4_ROUNDS_MAX} rounds")


def recompress(buf: Buffer, header: BatchHeader, compression: Compression) -> bytes:
    """The same batch with its records under another codec, for a topic whose
    compression.type is not the producer's: records, offsets, timestamps and producer fields
    stay; the codec bits, the length and the CRC change. `header` is `buf`'s, validated."""
    records = uncompressed_records(buf, header)
    attributes = (header.attributes & ~CODEC_MASK) | attributes_for(compression)
    return seal_batch(
        compress_records(records, compression),
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp_ms=header.base_timestamp_ms,
        max_timestamp_ms=header.max_timestamp_ms,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        record_count=header.record_count,
    )
