"""Which `__consumer_offsets` partition, and so which coordinator, owns a group.

Every broker and every client must compute the same answer in every process, so the hash is
defined here byte for byte and never uses Python's `hash()` (salted per process by
PYTHONHASHSEED). zlog keeps Kafka's choice, Java's `String.hashCode`, so a group id lands on the
partition Kafka would pick for it: tools written for Kafka that compute the coordinator
themselves agree with zlog.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

from zlog.errors import ErrorCode, ZlogError

OFFSETS_TOPIC: Final = "__consumer_offsets"
OFFSETS_PARTITIONS_DEFAULT: Final = 50
"""`offsets.topic.num.partitions`: fixed once the topic exists, since changing it moves every
group to another coordinator."""

OFFSETS_RING_BYTES: Final = 1 << 20
"""The shared-memory ring of each `__consumer_offsets` replica. A ring is memory taken at
open (the broker's default is 64 MiB), and a broker holds up to 50 offsets replicas, mostly
idle: 3.2 GiB of RAM for a topic of small commits. A batch larger than its ring is written
to the segment directly, so a small ring limits nothing."""

_INT32_MIN: Final = -(2**31)
GROUP_IDS_CACHED: Final = 4096
"""Group ids whose partition is remembered: a coordinator routes every commit by its group id,
and hashing the id again in Python cost more than the rest of the routing."""


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode`: h = 31*h + c over UTF-16 code units, wrapping as int32.

    Characters beyond the Basic Multilingual Plane count as their two surrogates, as in Java.
    """
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


@lru_cache(maxsize=GROUP_IDS_CACHED)
def partition_for(group_id: str, partition_count: int = OFFSETS_PARTITIONS_DEFAULT) -> int:
    """The offsets partition of `group_id`: |hash| mod the partition count.

    |INT32_MIN| is taken as 0, as Kafka's `Utils.abs` does, so the result is never negative.
    """
    if partition_count <= 0:
        raise ZlogError(
            ErrorCode.INVALID_PARTITIONS,
            f"the offsets topic needs at least one partition, not {partition_count}",
        )
    h = java_string_hash(group_id)
    return (0 if h == _INT32_MIN else abs(h)) % partition_count
