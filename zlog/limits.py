"""Every bound zlog enforces, in one place, with its unit in its name.

Anything read from the wire or from disk is checked against these before memory is
allocated for it, so a corrupt length can produce an error but never an allocation storm.
"""

from __future__ import annotations

# Record batches.
batch_size_bytes_max = 64 * 1024 * 1024  # the largest batch we accept at all
batch_records_max = 16 * 1024 * 1024  # a batch of 1-byte records still fits batch_size_bytes_max
record_size_bytes_max = batch_size_bytes_max
headers_per_record_max = 65_536
decompressed_batch_bytes_max = 256 * 1024 * 1024  # cap on LZ4 expansion of one batch

# Shared-memory ring.
ring_size_bytes_default = 64 * 1024 * 1024
ring_size_bytes_min = 64 * 1024

# Segments and indexes.
segment_bytes_default = 1024 * 1024 * 1024
segment_bytes_min = 14  # Kafka's own lower bound for segment.bytes
index_interval_bytes_default = 4096
segment_ms_default = 7 * 24 * 3600 * 1000

# Retention.
retention_ms_default = 7 * 24 * 3600 * 1000
delete_retention_ms_default = 24 * 3600 * 1000

# Topics.
topic_name_chars_max = 249

assert batch_size_bytes_max <= 2**31 - 1, "batchLength is an int32 on the wire"
assert ring_size_bytes_default >= ring_size_bytes_min
assert decompressed_batch_bytes_max >= batch_size_bytes_max
