"""Tests edit batches byte by byte; resealing afterwards leaves the edit the only fault."""

from __future__ import annotations

import struct

import crc32c

from zlog.record.header import LOG_OVERHEAD_BYTES

BATCH_LENGTH_AT = 8
CRC_AT = 17
CRC_COVERS_FROM = 21  # the attributes field


def reseal(batch: bytearray) -> bytes:
    """Fix batchLength and the CRC after a test edits a batch, so that only the edit is wrong."""
    struct.pack_into(">i", batch, BATCH_LENGTH_AT, len(batch) - LOG_OVERHEAD_BYTES)
    struct.pack_into(">I", batch, CRC_AT, crc32c.crc32c(bytes(batch[CRC_COVERS_FROM:])))
    return bytes(batch)
