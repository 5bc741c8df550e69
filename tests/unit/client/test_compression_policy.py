"""The producer compresses while it pays (zlog/client/compression_policy.py)."""

from __future__ import annotations

import lz4.frame
import numpy as np

from zlog.client.compression_policy import PLAIN_BATCHES_AFTER_MISS, AdaptiveCompression
from zlog.record.header import Compression


def _lz4_size(data: bytes) -> int:
    return len(lz4.frame.compress(data, block_linked=False))


def test_data_that_compresses_stays_compressed() -> None:
    policy = AdaptiveCompression(Compression.LZ4)
    text = b'{"user": 42, "action": "click", "page": "/home"}\n' * 2000
    for _ in range(200):
        codec = policy.codec_for("events")
        assert codec == Compression.LZ4
        policy.note("events", codec, len(text), _lz4_size(text))


def test_data_that_does_not_compress_goes_plain_for_a_while_then_is_tried_again() -> None:
    policy = AdaptiveCompression(Compression.LZ4)
    noise = np.random.default_rng(7).integers(0, 256, 100_000, dtype=np.uint8).tobytes()
    codecs = []
    for _ in range(3 * (PLAIN_BATCHES_AFTER_MISS + 1)):
        codec = policy.codec_for("noise")
        codecs.append(codec)
        encoded = _lz4_size(noise) if codec == Compression.LZ4 else len(noise)
        policy.note("noise", codec, len(noise), encoded)
    tried = [index for index, codec in enumerate(codecs) if codec == Compression.LZ4]
    assert tried == [0, PLAIN_BATCHES_AFTER_MISS + 1, 2 * (PLAIN_BATCHES_AFTER_MISS + 1)]


def test_topics_are_judged_apart_and_none_means_none() -> None:
    policy = AdaptiveCompression(Compression.LZ4)
    policy.note("noise", Compression.LZ4, 1000, 1010)
    assert policy.codec_for("noise") == Compression.NONE
    assert policy.codec_for("text") == Compression.LZ4
    plain = AdaptiveCompression(Compression.NONE)
    assert plain.codec_for("text") == Compression.NONE
