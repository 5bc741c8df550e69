"""The producer compresses while it pays (zlog/client/compression_policy.py)."""

from __future__ import annotations

import lz4.frame
import numpy as np

from zlog.client.compression_policy import (
    PLAIN_BATCHES_AFTER_MISS,
    SMALL_BATCH_BYTES_MAX,
    AdaptiveCompression,
)
from zlog.record.header import Compression


def _lz4_size(data: bytes) -> int:
    return len(lz4.frame.compress(data, block_linked=False))


def test_data_that_compresses_stays_compressed() -> None:
    policy = AdaptiveCompression(Compression.LZ4)
    text = b'{"user": 42, "action": "click", "page": "/home"}\n' * 2000
    for _ in range(200):
        codec = policy.codec_for("events", len(text))
        assert codec == Compression.LZ4
        policy.note("events", codec, len(text), _lz4_size(text))


def test_data_that_does_not_compress_goes_plain_for_a_while_then_is_tried_again() -> None:
    policy = AdaptiveCompression(Compression.LZ4)
    noise = np.random.default_rng(7).integers(0, 256, 100_000, dtype=np.uint8).tobytes()
    codecs = []
    for _ in range(3 * (PLAIN_BATCHES_AFTER_MISS + 1)):
        codec = policy.codec_for("noise", len(noise))
        codecs.append(codec)
        encoded = _lz4_size(noise) if codec == Compression.LZ4 else len(noise)
        policy.note("noise", codec, len(noise), encoded)
    tried = [index for index, codec in enumerate(codecs) if codec == Compression.LZ4]
    assert tried == [0, PLAIN_BATCHES_AFTER_MISS + 1, 2 * (PLAIN_BATCHES_AFTER_MISS + 1)]


def test_topics_are_judged_apart_and_none_means_none() -> None:
    policy = AdaptiveCompression(Compression.LZ4)
    policy.note("noise", Compression.LZ4, 1000, 1010)
    assert policy.codec_for("noise", 1000) == Compression.NONE
    assert policy.codec_for("text", 1000) == Compression.LZ4
    plain = AdaptiveCompression(Compression.NONE)
    assert plain.codec_for("text", 1000) == Compression.NONE


def test_small_batches_go_plain_without_using_up_a_miss_countdown() -> None:
    policy = AdaptiveCompression(Compression.LZ4)
    assert policy.codec_for("events", SMALL_BATCH_BYTES_MAX - 1) == Compression.NONE
    assert policy.codec_for("events", SMALL_BATCH_BYTES_MAX) == Compression.LZ4
    policy.note("noise", Compression.LZ4, 1000, 1010)
    for _ in range(10):
        assert policy.codec_for("noise", 100) == Compression.NONE
    plain_after_miss = [policy.codec_for("noise", 1000) for _ in range(PLAIN_BATCHES_AFTER_MISS)]
    assert plain_after_miss == [Compression.NONE] * PLAIN_BATCHES_AFTER_MISS
    assert policy.codec_for("noise", 1000) == Compression.LZ4
