"""The small public records of the client API, named as Kafka's clients name them.

TopicPartition, the key of most of them, is shared with the broker: it lives in zlog.types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from zlog.types import TopicPartition


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where an acknowledged record landed. offset is -1 for acks=0 (nobody told us)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Where an acknowledged batch from `Producer.send_many` landed: records base_offset.."""

    topic: str
    partition: int
    base_offset: int  # -1 for acks=0
    record_count: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create. configs are topic-level keys such as retention.ms (strings)."""

    name: str
    partitions: int
    replication_factor: int = 1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int  # node id, -1 while there is none
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    endpoint: str  # data endpoint of the leading worker


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A partition moving to new replicas, as `Admin.list_partition_reassignments` shows it."""

    replicas: tuple[int, ...]  # the target (preferred leader first), then the replicas leaving
    adding: tuple[int, ...]  # new replicas, catching up
    removing: tuple[int, ...]  # replicas that stop once the target is in sync


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    partitions: tuple[PartitionDescription, ...]
    configs: Mapping[str, str] = field(default_factory=dict)
    topic_id: str = ""  # made at creation: the same name created again has another


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One topic config as `Admin.describe_configs` reports it.

    source: "topic" (set on the topic), "broker" (the broker's topic_defaults) or "default"
    (zlog's built-in default), as `kafka-configs --describe --all` tells them apart.
    """

    name: str
    value: str | None
    source: str


@dataclass(frozen=True, slots=True)
class BrokerDescription:
    node_id: int
    host: str
    control_endpoint: str
    state: str = "live"  # live, fenced (silent past its session) or draining (shutting down,
    # or being removed)
    broker_epoch: int = -1
    rack: str = ""


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int
    brokers: tuple[BrokerDescription, ...]
    raft_leader: int | None
    raft_term: int
    raft_commit: tuple[int, int]  # (term, height) of the last committed metadata block
    voter_lag_blocks: dict[int, int] | None = None  # voter -> blocks behind the leader's head;
    # None when the answer came from a node that does not lead the metadata log


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    """An answer of `Admin.list_offsets`: offset -1 when no record is that recent."""

    offset: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str
    group_type: str  # "consumer" (server-side protocol) or "classic"
    protocol_type: str


@dataclass(frozen=True, slots=True)
class GroupMemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]  # empty while the group is rebalancing (classic)


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str  # "Dead" for a group that does not exist (Kafka's answer)
    group_type: str
    protocol_type: str
    protocol: str  # the assignor
    epoch: int  # generation (classic) or group epoch (server-side)
    members: tuple[GroupMemberDescription, ...]
