"""RecordBatch v2, the one record format zlog uses from producer to segment, in one place.

Pure: no I/O, clocks or sockets (numpy, lz4 and crc32c only), so every path is tested on bytes.

header.py       the batch header: layout, validation, CRC-32C, stamping, scanning, sealing
compression.py  the records section's codecs: LZ4 frames, bounded inflation, recompress
records.py      the general record codec, one record at a time: any batch, the reference
arrays.py       the numpy codec of the hot path: build from value arrays, parse to a BatchView
starts.py       where each record starts, found by speculation and pointer doubling
pieces.py       keys and values copied between a packed payload and their places in a batch
small.py        small batches, one record at a time: the walk and the producer's plain encoder
varint.py       zigzag varints, one value at a time and a field of every record at once
"""
