"""The partitioner is Kafka's, bit for bit (org.apache.kafka.common.utils.Utils.murmur2).

Held to kafka-python's murmur2 (an independent port of the Java code) and to the values that
Kafka's own UtilsTest.testMurmur2 pins.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_murmur2

from zlog.client.partitioner import (
    StickyPartitioner,
    murmur2,
    murmur2_many,
    partition_for_key,
    partitions_for_keys,
)


def signed32(value: int) -> int:
    return value - 2**32 if value >= 2**31 else value


# Kafka's UtilsTest.testMurmur2: key -> Java int.
KAFKA_KNOWN = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), list(KAFKA_KNOWN.items()))
def test_murmur2_matches_kafkas_own_test_values(key: bytes, expected: int) -> None:
    assert signed32(murmur2(key)) == expected


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(key: bytes) -> None:
    assert murmur2(key) == kafka_murmur2(key)


def test_partition_matches_kafka_python_default_partitioner() -> None:
    rng = random.Random(7)
    for _ in range(500):
        key = rng.randbytes(rng.randrange(0, 40))
        count = rng.randrange(1, 64)
        assert partition_for_key(key, count) == (kafka_murmur2(key) & 0x7FFFFFFF) % count


def test_murmur2_many_equals_one_at_a_time() -> None:
    rng = random.Random(3)
    keys = [rng.randbytes(rng.choice([0, 1, 2, 3, 4, 5, 8, 13, 36])) for _ in range(2000)]
    assert murmur2_many(keys).tolist() == [murmur2(k) for k in keys]
    assert partitions_for_keys(keys, 12).tolist() == [partition_for_key(k, 12) for k in keys]
    assert murmur2_many([]).size == 0


def test_numpy_key_hash_raises_no_overflow_warning() -> None:
    keys = [b"\xff" * 16] * 10  # pytest turns any numpy overflow warning into a failure
    assert np.all(murmur2_many(keys) == murmur2(keys[0]))


def test_sticky_partition_holds_until_a_batch_fills_then_moves() -> None:
    sticky = StickyPartitioner(random.Random(1))
    first = sticky.partition("t", 6)
    assert all(sticky.partition("t", 6) == first for _ in range(10))
    sticky.on_batch_full("t", first, 6)
    second = sticky.partition("t", 6)
    assert second != first
    sticky.on_batch_full("t", first, 6)  # a stale notice changes nothing
    assert sticky.partition("t", 6) == second
    single = StickyPartitioner(random.Random(1))
    assert single.partition("u", 1) == 0
    single.on_batch_full("u", 0, 1)
    assert single.partition("u", 1) == 0
