"""The zlog client library: Producer, Consumer and Admin over zlog's ZeroMQ transport.

producer.py (+ accumulator.py, partitioner.py, sender.py and its partition_sends.py,
deferred_sends.py, wakeable_poll.py), consumer.py (+ fetch_buffer.py, local_reads.py,
local_ring.py, local_replicas.py), admin.py, cluster.py (metadata and connections), records.py
(the public records). group/ holds a group's member and what the Consumer and the Admin do
with groups: membership.py (the member's state and its heartbeat thread), poll_thread.py (what
the Consumer's poll does for the group), server_side_member.py and classic_member.py (one
member per protocol, pure, over member.py), settings.py, coordinator.py and offsets.py (the way
to a group's coordinator, its offsets), admin.py (the Admin's group calls).
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
