"""What the brokers hold now: each partition's log start offset and high watermark.

The driver asks this once per batch read and once per micro-batch; tasks never do, they read
the ranges the driver planned. An unknown topic fails here, on the driver, with Kafka's
UNKNOWN_TOPIC_OR_PARTITION and the topic's name, before any task starts.
"""

from __future__ import annotations

from collections.abc import Sequence

from zlog.client import EARLIEST, LATEST, Admin, TopicPartition
from zlog.errors import ErrorCode, ZlogError
from zlog.spark.offsets import PartitionBounds


def topic_partitions(admin: Admin, topics: Sequence[str], bootstrap: str) -> (
    list[TopicPartition]
):
    """Every partition of `topics`; UNKNOWN_TOPIC_OR_PARTITION naming a topic that is missing."""
    partitions: list[TopicPartition] = []
    for topic in topics:
        try:
            (description,) = admin.describe_topics([topic])
        except ZlogError as error:
            if error.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise ZlogError(error.code, f"topic {topic!r} does not exist at {bootstrap} "
                                            f"(create it first, e.g. `zlog topic create "
                                            f"{topic}`)") from None
            raise
        partitions.extend(TopicPartition(topic, p.partition) for p in description.partitions)
    return partitions


def partition_bounds(admin: Admin, topics: Sequence[str], bootstrap: str) -> (
    dict[TopicPartition, PartitionBounds]
):
    """(topic, partition) -> bounds for every partition of `topics`."""
    partitions = topic_partitions(admin, topics, bootstrap)
    if not partitions:
        return {}
    starts = admin.list_offsets(dict.fromkeys(partitions, EARLIEST))
    ends = admin.list_offsets(dict.fromkeys(partitions, LATEST))
    return {tp: PartitionBounds(starts[tp].offset, ends[tp].offset) for tp in partitions}
