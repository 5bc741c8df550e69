"""The group -> offsets partition hash: Java's String.hashCode, pinned to values a JVM gives."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import zlog
from zlog.errors import ErrorCode, ZlogError
from zlog.groups.partitioning import java_string_hash, partition_for

JVM_VECTORS = [
    ("", 0, 0),
    ("my-group", -1906497762, 12),
    ("group-1", 293427299, 49),
    ("orders", -1008770331, 31),
    ("polygenelubricants", -(2**31), 0),
    ("grüppe", -1233264812, 12),
    ("\U0001f600", 1772899, 49),
    ("payments-9", 1612905881, 31),
]


@pytest.mark.parametrize(("group_id", "hash_code", "partition"), JVM_VECTORS)
def test_hash_and_partition_match_the_jvm(group_id: str, hash_code: int, partition: int) -> None:
    assert java_string_hash(group_id) == hash_code
    assert partition_for(group_id) == partition


def test_partition_is_stable_across_processes_with_different_hash_seeds() -> None:
    code = "from zlog.groups.partitioning import partition_for; print(partition_for('orders', 7))"
    answers = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True,
            env={"PYTHONHASHSEED": seed, "PYTHONPATH": str(Path(zlog.__file__).parents[1])},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert answers == {str(partition_for("orders", 7))}


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ZlogError) as caught:
        partition_for("g", 0)
    assert caught.value.code == ErrorCode.INVALID_PARTITIONS
