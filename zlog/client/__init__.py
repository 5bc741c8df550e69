"""The zlog client library: Producer, Consumer and Admin over zlog's ZeroMQ transport.

producer.py (+ accumulator.py, partitioner.py, sender.py and its partition_sends.py,
deferred_sends.py, wakeable_poll.py), consumer.py (+ fetch_buffer.py, local_ring.py; in a group
group_membership.py, group_member.py, group_settings.py), admin.py (+ admin_groups.py),
group_coordinator.py and group_offsets.py (the way to a group's coordinator, its offsets),
cluster.py (metadata and connections), records.py (the public records).
"""

from zlog.client.admin import Admin
from zlog.client.consumer import Consumer
from zlog.client.producer import Producer
from zlog.client.records import (
    BatchMetadata,
    ClusterDescription,
    ConfigEntry,
    ConsumerRecord,
    GroupDescription,
    GroupListing,
    GroupMemberDescription,
    NewTopic,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicDescription,
)
from zlog.types import EARLIEST_TIMESTAMP as EARLIEST
from zlog.types import LATEST_TIMESTAMP as LATEST
from zlog.types import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "Admin",
    "BatchMetadata",
    "ClusterDescription",
    "ConfigEntry",
    "Consumer",
    "ConsumerRecord",
    "GroupDescription",
    "GroupListing",
    "GroupMemberDescription",
    "NewTopic",
    "OffsetAndTimestamp",
    "Producer",
    "RecordMetadata",
    "TopicDescription",
    "TopicPartition",
]
