"""Every bound zlog enforces, in one place, with its unit in its name.

Anything read from the wire or from disk is checked against these before memory is
allocated for it, so a corrupt length can produce an error but never an allocation storm.
"""

from __future__ import annotations

# Record batches.
BATCH_SIZE_BYTES_MAX = 64 * 1024 * 1024  # the largest batch we accept at all
BATCH_RECORDS_MAX = 16 * 1024 * 1024  # a batch of 1-byte records still fits BATCH_SIZE_BYTES_MAX
RECORD_SIZE_BYTES_MAX = BATCH_SIZE_BYTES_MAX
HEADERS_PER_RECORD_MAX = 65_536
DECOMPRESSED_BATCH_BYTES_MAX = 256 * 1024 * 1024  # cap on LZ4 expansion of one batch

# Shared-memory ring.
RING_SIZE_BYTES_DEFAULT = 64 * 1024 * 1024
RING_SIZE_BYTES_MIN = 64 * 1024

# Segments and indexes.
SEGMENT_BYTES_DEFAULT = 1024 * 1024 * 1024
SEGMENT_BYTES_MIN = 14  # Kafka's own lower bound for segment.bytes
INDEX_INTERVAL_BYTES_DEFAULT = 4096
SEGMENT_MS_DEFAULT = 7 * 24 * 3600 * 1000

# Retention.
RETENTION_MS_DEFAULT = 7 * 24 * 3600 * 1000
DELETE_RETENTION_MS_DEFAULT = 24 * 3600 * 1000

# Topics.
TOPIC_NAME_CHARS_MAX = 249

assert BATCH_SIZE_BYTES_MAX <= 2**31 - 1, "batchLength is an int32 on the wire"
assert RING_SIZE_BYTES_DEFAULT >= RING_SIZE_BYTES_MIN
assert DECOMPRESSED_BATCH_BYTES_MAX >= BATCH_SIZE_BYTES_MAX
