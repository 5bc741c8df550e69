"""Compression of a batch's records section: every Kafka codec in, bounded inflation out.

The codec bits of the attributes say how the records section after the header is stored. zlog
reads and writes all of Kafka's: NONE, GZIP (zlib's gzip stream), SNAPPY (raw blocks, or the
xerial framing Java clients write: both are read, xerial is written because Java consumers
read only that), LZ4 (frames of independent blocks, as Java clients require) and ZSTD. The
bytes a producer sent are stored and served as sent; the codecs run only to check the records
before they are stored, to re-encode for a topic whose compression.type names another codec,
and for the clients' own reads. Inflation is bounded by `limits.DECOMPRESSED_BATCH_BYTES_MAX`,
so a small section that claims gigabytes costs no more than the bound, whatever its codec.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Final

import cramjam
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

# Inflation works in chunks that double from this size, so a small batch never pays for a
# buffer the size of the decompression bound.
_CHUNK_BYTES_MIN: Final = 64 * 1024
_LZ4_ROUNDS_MAX: Final = 64
_GZIP_LEVEL: Final = 6  # zlib's default, as Kafka's gzip producers use
_GZIP_WBITS: Final = 16 + zlib.MAX_WBITS  # a gzip header and trailer, not zlib's
_GZIP_OR_ZLIB_WBITS: Final = 32 + zlib.MAX_WBITS  # either header, told apart by zlib
# xerial snappy (snappy-java's SnappyOutputStream): a magic, two int32 versions, then blocks
# each behind an int32 length. Java writes 32 KiB blocks.
XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = struct.Struct(">8sii")
_XERIAL_VERSION: Final = 1
_XERIAL_BLOCK_LENGTH: Final = struct.Struct(">i")
_XERIAL_BLOCK_BYTES: Final = 32 * 1024

assert limits.BATCH_SIZE_BYTES_MAX <= limits.DECOMPRESSED_BATCH_BYTES_MAX


def _corrupt(message: str) -> ZlogError:
    return ZlogError(ErrorCode.CORRUPT_MESSAGE, message)


def _too_large() -> ZlogError:
    return ZlogError(
        ErrorCode.MESSAGE_TOO_LARGE,
        f"the batch decompresses to more than {limits.DECOMPRESSED_BATCH_BYTES_MAX} bytes",
    )


def compress_records(records: Buffer, compression: Compression) -> Buffer:
    """Compress a records section; LZ4 blocks are independent because Java clients require it."""
    if compression == Compression.NONE:
        return records
    if compression == Compression.LZ4:
        compressed: bytes = lz4.frame.compress(records, block_linked=False)
        return compressed
    if compression == Compression.GZIP:
        packer = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, _GZIP_WBITS)
        return packer.compress(records) + packer.flush()
    if compression == Compression.SNAPPY:
        return _xerial_compress(as_byte_view(records))
    if compression == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(records))
    raise ZlogError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown codec {int(compression)}")


def uncompressed_records(buf: Buffer, header: BatchHeader) -> Buffer:
    """The record bytes of a validated batch: a view when stored plain, else inflated (bounded)."""
    view = as_byte_view(buf)
    assert view.nbytes == header.size_bytes
    section = view[BATCH_HEADER_BYTES:]
    codec = header.attributes & CODEC_MASK
    if codec == Compression.NONE:
        return section
    inflate = _INFLATERS.get(codec)
    assert inflate is not None, "validate_batch admits no other codec"
    return inflate(section)


def _decompress_lz4(section: memoryview) -> bytes:
    bound_bytes = limits.DECOMPRESSED_BATCH_BYTES_MAX
    decompressor = lz4.frame.LZ4FrameDecompressor()
    chunks: list[bytes] = []
    total_bytes = 0
    chunk_bytes = _first_chunk_bytes(section)
    pending: Buffer = section
    for _round in range(_LZ4_ROUNDS_MAX):
        try:
            chunk = decompressor.decompress(pending, max_length=chunk_bytes)
        except RuntimeError as error:
            raise _corrupt(f"the LZ4 frame does not decode: {error}") from error
        pending = b""
        total_bytes += len(chunk)
        if total_bytes > bound_bytes:
            raise _too_large()
        chunks.append(chunk)
        if decompressor.eof:
            if decompressor.unused_data:
                raise _corrupt("bytes follow the end of the LZ4 frame")
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if decompressor.needs_input:
            raise _corrupt("the LZ4 frame is truncated")
        chunk_bytes = min(2 * chunk_bytes, bound_bytes + 1 - total_bytes)
    raise _corrupt(f"the LZ4 frame did not end within {_LZ4_ROUNDS_MAX} rounds")


def _first_chunk_bytes(section: memoryview) -> int:
    return min(limits.DECOMPRESSED_BATCH_BYTES_MAX + 1,
               max(_CHUNK_BYTES_MIN, 4 * section.nbytes))


def _decompress_gzip(section: memoryview) -> bytes:
    """One gzip member or more (a concatenation is one stream to gzip's readers), bounded."""
    bound_bytes = limits.DECOMPRESSED_BATCH_BYTES_MAX
    chunks: list[bytes] = []
    total_bytes = 0
    pending: bytes = bytes(section)
    while pending:
        inflater = zlib.decompressobj(_GZIP_OR_ZLIB_WBITS)
        try:
            chunk = inflater.decompress(pending, bound_bytes + 1 - total_bytes)
        except zlib.error as error:
            raise _corrupt(f"the gzip stream does not decode: {error}") from error
        total_bytes += len(chunk)
        if total_bytes > bound_bytes or inflater.unconsumed_tail:
            raise _too_large()
        if not inflater.eof:
            raise _corrupt("the gzip stream is truncated")
        chunks.append(chunk)
        pending = inflater.unused_data
    if not chunks:
        raise _corrupt("the gzip stream is empty")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _decompress_snappy(section: memoryview) -> bytes:
    """Raw snappy, or xerial's framing of raw blocks (what Java producers write)."""
    if bytes(section[: len(XERIAL_MAGIC)]) == XERIAL_MAGIC:
        return _xerial_decompress(section)
    return _snappy_block(section, limits.DECOMPRESSED_BATCH_BYTES_MAX)


def _snappy_block(block: memoryview, bound_bytes: int) -> bytes:
    """One raw snappy block; its header states its length, checked before inflating."""
    try:
        size_bytes = cramjam.snappy.decompress_raw_len(block)
    except cramjam.DecompressionError as error:
        raise _corrupt(f"the snappy block does not decode: {error}") from error
    if size_bytes > bound_bytes:
        raise _too_large()
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as error:
        raise _corrupt(f"the snappy block does not decode: {error}") from error


def _xerial_decompress(section: memoryview) -> bytes:
    if section.nbytes < _XERIAL_HEADER.size:
        raise _corrupt("the xerial snappy header is truncated")
    bound_bytes = limits.DECOMPRESSED_BATCH_BYTES_MAX
    blocks: list[bytes] = []
    total_bytes = 0
    pos = _XERIAL_HEADER.size
    while pos < section.nbytes:
        if section.nbytes - pos < _XERIAL_BLOCK_LENGTH.size:
            raise _corrupt(f"a xerial snappy block length is truncated at byte {pos}")
        (length,) = _XERIAL_BLOCK_LENGTH.unpack_from(section, pos)
        pos += _XERIAL_BLOCK_LENGTH.size
        if length < 0 or length > section.nbytes - pos:
            raise _corrupt(f"a xerial snappy block claims {length} bytes, "
                           f"{section.nbytes - pos} remain")
        block = _snappy_block(section[pos: pos + length], bound_bytes - total_bytes)
        total_bytes += len(block)
        blocks.append(block)
        pos += length
    return b"".join(blocks)


def _xerial_compress(records: memoryview) -> bytes:
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_VERSION)]
    for start in range(0, records.nbytes, _XERIAL_BLOCK_BYTES):
        block = bytes(cramjam.snappy.compress_raw(records[start: start + _XERIAL_BLOCK_BYTES]))
        parts += (_XERIAL_BLOCK_LENGTH.pack(len(block)), block)
    return b"".join(parts)


def _decompress_zstd(section: memoryview) -> bytes:
    """Inflated into a buffer that doubles while it is too small, up to the bound."""
    bound_bytes = limits.DECOMPRESSED_BATCH_BYTES_MAX
    out_bytes = _first_chunk_bytes(section)
    while True:
        out = bytearray(out_bytes)
        try:
            written = cramjam.zstd.decompress_into(section, out)
        except cramjam.DecompressionError as error:
            if "whole buffer" not in str(error):
                raise _corrupt(f"the zstd frame does not decode: {error}") from error
            if out_bytes > bound_bytes:
                raise _too_large() from error
            out_bytes = min(2 * out_bytes, bound_bytes + 1)
            continue
        if written > bound_bytes:
            raise _too_large()
        return bytes(memoryview(out)[:written])


_INFLATERS: Final[dict[int, Callable[[memoryview], bytes]]] = {
    Compression.GZIP: _decompress_gzip,
    Compression.SNAPPY: _decompress_snappy,
    Compression.LZ4: _decompress_lz4,
    Compression.ZSTD: _decompress_zstd,
}


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
