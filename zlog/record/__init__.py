"""RecordBatch v2, the one record format zlog uses from producer to segment, in one place.

header.py (the batch header: layout, validation, CRC-32C, stamping, scanning, building and the
general one-record-at-a-time codec), arrays.py (the numpy codec of the hot path), small.py (the
walk of small batches), varint.py (zigzag varints, scalar and array).
"""
