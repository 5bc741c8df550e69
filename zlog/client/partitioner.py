"""Which partition a record goes to: Kafka's default partitioner, exactly.

A keyed record goes to `toPositive(murmur2(key)) % partition_count`, bit for bit what the Java
client computes (org.apache.kafka.common.utils.Utils.murmur2), so zlog and Kafka producers
agree on where a key lives and a topic can be migrated between them without reshuffling keys.

A record without a key goes to the topic's *sticky* partition (KIP-480): one partition is
used until a batch for it fills up, then another is chosen at random. That fills batches
faster than round-robin at low rates, which is what keeps latency low.

`murmur2_many` hashes many keys with a fixed number of numpy passes per distinct key length
(not per key), for `Producer.send_many`. The module is pure: randomness is passed in.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_R: Final = 24
_MASK32: Final = 0xFFFFFFFF
_POSITIVE_MASK: Final = 0x7FFFFFFF
# Shift counts as uint64 scalars, so numpy keeps the arrays unsigned.
_8: Final = np.uint64(8)
_16: Final = np.uint64(16)
_24: Final = np.uint64(24)


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's murmur2 of `data` as an unsigned 32-bit value (Java's int, reinterpreted)."""
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    length = len(view)
    h = (_SEED ^ length) & _MASK32
    words_end = length & ~3
    for i in range(0, words_end, 4):
        k = view[i] | (view[i + 1] << 8) | (view[i + 2] << 16) | (view[i + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    extra_bytes = length & 3
    if extra_bytes >= 3:
        h ^= view[words_end + 2] << 16
    if extra_bytes >= 2:
        h ^= view[words_end + 1] << 8
    if extra_bytes >= 1:
        h ^= view[words_end]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    assert 0 <= h <= _MASK32
    return h


def partition_for_key(key: bytes | bytearray | memoryview, partition_count: int) -> int:
    """Kafka's `Utils.toPositive(Utils.murmur2(key)) % numPartitions`."""
    assert partition_count > 0, "a topic has at least one partition"
    return (murmur2(key) & _POSITIVE_MASK) % partition_count


def _mix(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """(x * m) mod 2^32 for values below 2^32; the product stays below 2^63, so no overflow."""
    return (values * np.uint64(_M)) & np.uint64(_MASK32)


def _murmur2_equal_length(rows: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """murmur2 of every row of a 2-D array of keys that all have the same length."""
    count, length = rows.shape
    h = np.full(count, (_SEED ^ length) & _MASK32, np.uint64)
    words_end = length & ~3
    wide = rows.astype(np.uint64)
    for i in range(0, words_end, 4):  # one pass per 4-byte word of the key, for all keys
        k = (wide[:, i] | (wide[:, i + 1] << _8) | (wide[:, i + 2] << _16)
             | (wide[:, i + 3] << _24))
        k = _mix(k)
        k ^= k >> np.uint64(_R)
        k = _mix(k)
        h = _mix(h) ^ k
    extra_bytes = length & 3
    if extra_bytes >= 3:
        h ^= wide[:, words_end + 2] << _16
    if extra_bytes >= 2:
        h ^= wide[:, words_end + 1] << _8
    if extra_bytes >= 1:
        h ^= wide[:, words_end]
        h = _mix(h)
    h ^= h >> np.uint64(13)
    h = _mix(h)
    h ^= h >> np.uint64(15)
    return h


def murmur2_many(keys: Sequence[bytes]) -> npt.NDArray[np.uint64]:
    """murmur2 of each key, grouped by key length so the work is numpy passes, not a loop."""
    count = len(keys)
    hashes = np.zeros(count, np.uint64)
    if count == 0:
        return hashes
    lengths = np.fromiter(map(len, keys), np.int64, count)
    joined = np.frombuffer(b"".join(keys), np.uint8)
    starts = np.zeros(count, np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    for length in np.unique(lengths).tolist():
        members = np.flatnonzero(lengths == length)
        columns = starts[members, None] + np.arange(length, dtype=np.int64)[None, :]
        rows = joined[columns] if length else np.zeros((members.size, 0), np.uint8)
        hashes[members] = _murmur2_equal_length(rows)
    return hashes


def partitions_for_keys(keys: Sequence[bytes], partition_count: int) -> npt.NDArray[np.int64]:
    """`partition_for_key` for many keys at once."""
    assert partition_count > 0, "a topic has at least one partition"
    positive = murmur2_many(keys) & np.uint64(_POSITIVE_MASK)
    return (positive % np.uint64(partition_count)).astype(np.int64)


class StickyPartitioner:
    """The partition for keyless records of each topic, changed only when a batch fills.

    Not thread-safe by itself: the producer calls it under its accumulator lock.
    """

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._sticky: dict[str, int] = {}

    def partition(self, topic: str, partition_count: int) -> int:
        assert partition_count > 0
        current = self._sticky.get(topic)
        if current is None or current >= partition_count:
            current = self._rng.randrange(partition_count)
            self._sticky[topic] = current
        return current

    def on_batch_full(self, topic: str, partition: int, partition_count: int) -> None:
        """A batch for `partition` filled: keyless records move to another partition."""
        if self._sticky.get(topic) != partition or partition_count <= 1:
            return
        choice = self._rng.randrange(partition_count - 1)
        self._sticky[topic] = choice if choice < partition else choice + 1
        assert self._sticky[topic] != partition
