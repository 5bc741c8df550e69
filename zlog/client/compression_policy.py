"""Which codec a producer batch is written in: the one asked for, unless it does not pay.

A producer set to LZ4 (the default) compresses every batch, and pays for it on both ends: the
producer's CPU to compress, every consumer's to inflate. For data that compresses (text, JSON,
repeated keys) that buys less network, ring and disk per record; for data that does not
(random, encrypted, already compressed), it buys nothing. So a topic whose LZ4 batch saves
less than a tenth of its size writes its next PLAIN_BATCHES_AFTER_MISS batches uncompressed,
then tries LZ4 again, and stays with it as long as it pays. Every batch says its codec in its
attributes, so consumers and the broker read either kind; a topic whose `compression.type`
names a codec still has the broker store every batch in it.

A batch smaller than SMALL_BATCH_BYTES_MAX always goes plain: an LZ4 frame's own header and
checksum take much of what a few hundred bytes could save, while its fixed cost (a frame built
by the producer, inflated again by the broker's validation and by every consumer) is paid per
batch. At low rates every batch is that small, and that cost is a large part of each record's.
"""

from __future__ import annotations

from typing import Final

from zlog.record.header import Compression

SAVING_FRACTION_MIN: Final = 0.1  # an LZ4 batch must be at least this much smaller to pay
PLAIN_BATCHES_AFTER_MISS: Final = 64  # batches of a topic written plain before LZ4 is tried again
SMALL_BATCH_BYTES_MAX: Final = 512  # an estimated batch size below which compression never pays


class AdaptiveCompression:
    """Per topic: compress while it pays; after a miss, plain for a while. One thread at a time
    (the producer's I/O lock)."""

    def __init__(self, compression: Compression) -> None:
        self.compression = compression
        self._plain_left: dict[str, int] = {}  # topic -> batches still to write plain

    def codec_for(self, topic: str, size_bytes: int) -> Compression:
        """The codec for a batch of about `size_bytes` (uncompressed, estimated) of `topic`."""
        if self.compression == Compression.NONE or size_bytes < SMALL_BATCH_BYTES_MAX:
            return Compression.NONE
        left = self._plain_left.get(topic, 0)
        if left > 0:
            self._plain_left[topic] = left - 1
            return Compression.NONE
        return self.compression

    def note(self, topic: str, codec: Compression, plain_bytes: int, encoded_bytes: int) -> None:
        """What a batch of `plain_bytes` (uncompressed, estimated) came to in `codec`."""
        assert plain_bytes > 0 and encoded_bytes > 0
        if codec == Compression.NONE:
            return
        if encoded_bytes > plain_bytes * (1 - SAVING_FRACTION_MIN):
            self._plain_left[topic] = PLAIN_BATCHES_AFTER_MISS
