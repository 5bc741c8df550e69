"""The admin and discovery messages a client sends to any broker's control endpoint: Metadata,
ApiVersions, CreateTopics, CreatePartitions, DeleteTopics, InitProducerId, DescribeConfigs,
IncrementalAlterConfigs, DescribeCluster and ElectLeaders, all v0 with JSON bodies
(json_codec.py; docs/protocol.md, "Control plane"). Kafka's api keys, field names and, for
configs, Kafka's numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Annotated, ClassVar

from zlog.transport.api import ApiKey
from zlog.transport.wire import INT64_MAX
from zlog.transport.wire_types import (
    Absent,
    AtLeast,
    ErrorCode16,
    Int8,
    Int16,
    Int32,
    Int64,
    Range,
    Sentence,
    Sparse,
)

# ---------------------------------------------------------------------------------------------
# Metadata v0.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """One broker in a Metadata response: where a client reaches its supervisor."""

    node_id: Int32
    host: str
    control_endpoint: str  # where this broker's supervisor answers, e.g. tcp://10.0.0.1:7400
    rack: str = ""  # the broker's rack ("" for none), as in Kafka's Metadata v1
    # Where this broker keeps its partitions' rings (absolute, on its host). Only the broker
    # answering fills in its own ("" for the others): a consumer on that host learns from it
    # which rings there belong to which broker (zlog.client.local_replicas).
    ring_dir: str = ""


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: Int32
    leader: Int32  # node id, -1 when there is none
    leader_epoch: Int32
    replicas: tuple[Int32, ...]
    isr: tuple[Int32, ...]
    endpoint: str  # the data endpoint of the worker that leads this partition
    error_code: ErrorCode16 = 0
    # The leader's shared-memory ring file (absolute path on the leader's host), "" if unknown;
    # a consumer on that host may read it directly (zlog.client.local_ring).
    ring_path: str = ""
    # The Kafka port of the worker that leads it, host:port ("" when that worker has none or it
    # is not known here): the Kafka gateway advertises each one as a Kafka node.
    kafka_endpoint: Annotated[str, Sparse] = ""


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    error_code: ErrorCode16
    error_message: Annotated[str, Absent("")]
    configs: Mapping[str, str] = field(default_factory=dict)
    partitions: tuple[PartitionMetadata, ...] = ()
    topic_id: str = ""  # KIP-516 (Kafka's Metadata v10+): "" from a broker without ids


@dataclass(frozen=True, slots=True)
class MetadataRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.METADATA
    API_VERSION: ClassVar[int] = 0

    topics: tuple[str, ...] | None  # None: every topic


@dataclass(frozen=True, slots=True)
class MetadataResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.METADATA
    API_VERSION: ClassVar[int] = 0

    cluster_id: str
    controller_id: Int32
    brokers: tuple[BrokerMetadata, ...]
    topics: tuple[TopicMetadata, ...]


# ---------------------------------------------------------------------------------------------
# ApiVersions v0.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApiVersionRange:
    api_key: Int16
    min_version: Int16
    max_version: Int16


@dataclass(frozen=True, slots=True)
class ApiVersionsRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.API_VERSIONS
    API_VERSION: ClassVar[int] = 0


@dataclass(frozen=True, slots=True)
class ApiVersionsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.API_VERSIONS
    API_VERSION: ClassVar[int] = 0

    api_versions: tuple[ApiVersionRange, ...]
    server: Annotated[str, Absent("")]  # "zlog <version>"


# ---------------------------------------------------------------------------------------------
# CreateTopics / CreatePartitions / DeleteTopics v0.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: Int32
    replication_factor: Int16 = 1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicResult:
    name: str
    error_code: ErrorCode16
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class CreateTopicsRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.CREATE_TOPICS
    API_VERSION: ClassVar[int] = 0

    topics: tuple[TopicSpec, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class CreateTopicsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.CREATE_TOPICS
    API_VERSION: ClassVar[int] = 0

    topics: tuple[TopicResult, ...]


@dataclass(frozen=True, slots=True)
class PartitionsSpec:
    """A topic grown to `count` partitions in all (Kafka's CreatePartitions: never fewer)."""

    name: str
    count: Int32


@dataclass(frozen=True, slots=True)
class CreatePartitionsRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.CREATE_PARTITIONS
    API_VERSION: ClassVar[int] = 0

    topics: tuple[PartitionsSpec, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class CreatePartitionsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.CREATE_PARTITIONS
    API_VERSION: ClassVar[int] = 0

    topics: tuple[TopicResult, ...]


@dataclass(frozen=True, slots=True)
class DeleteTopicsRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DELETE_TOPICS
    API_VERSION: ClassVar[int] = 0

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteTopicsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DELETE_TOPICS
    API_VERSION: ClassVar[int] = 0

    topics: tuple[TopicResult, ...]


# ---------------------------------------------------------------------------------------------
# InitProducerId v0.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InitProducerIdRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.INIT_PRODUCER_ID
    API_VERSION: ClassVar[int] = 0

    transactional_id: str | None = None  # transactions come later; always None for now


@dataclass(frozen=True, slots=True)
class InitProducerIdResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.INIT_PRODUCER_ID
    API_VERSION: ClassVar[int] = 0

    error_code: ErrorCode16
    producer_id: Int64  # never reused: it comes from the metadata log
    producer_epoch: Int16


# ---------------------------------------------------------------------------------------------
# DescribeConfigs / IncrementalAlterConfigs v0 (Kafka's shapes and numbers).
# ---------------------------------------------------------------------------------------------


class ConfigResourceType(IntEnum):
    """Kafka's resource types; zlog keeps configs for topics only."""

    TOPIC = 2
    BROKER = 4


class ConfigSource(IntEnum):
    """Where a described config's value comes from, with Kafka's numbers."""

    TOPIC = 1  # TOPIC_CONFIG: set on the topic
    BROKER = 4  # STATIC_BROKER_CONFIG: the broker's topic_defaults (file, environment, flags)
    DEFAULT = 5  # DEFAULT_CONFIG: zlog's built-in default


class AlterConfigOp(IntEnum):
    """IncrementalAlterConfigs' per-config operation."""

    SET = 0
    DELETE = 1  # back to the default
    APPEND = 2  # list configs only; zlog has none that take it
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class DescribeConfigsResource:
    resource_type: Int8  # ConfigResourceType
    resource_name: str
    configuration_keys: tuple[str, ...] | None = None  # None: every config


@dataclass(frozen=True, slots=True)
class DescribeConfigsRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_CONFIGS
    API_VERSION: ClassVar[int] = 0

    resources: tuple[DescribeConfigsResource, ...]


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    name: str
    value: str | None
    config_source: Int8  # ConfigSource


@dataclass(frozen=True, slots=True)
class DescribeConfigsResult:
    error_code: ErrorCode16
    error_message: Annotated[str, Absent("")]
    resource_type: Int8
    resource_name: str
    configs: tuple[DescribedConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeConfigsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_CONFIGS
    API_VERSION: ClassVar[int] = 0

    results: tuple[DescribeConfigsResult, ...]


@dataclass(frozen=True, slots=True)
class AlterableConfig:
    name: str
    config_operation: Int8  # AlterConfigOp
    value: str | None = None  # None for DELETE


@dataclass(frozen=True, slots=True)
class AlterConfigsResource:
    resource_type: Int8  # ConfigResourceType
    resource_name: str
    configs: tuple[AlterableConfig, ...]


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.INCREMENTAL_ALTER_CONFIGS
    API_VERSION: ClassVar[int] = 0

    resources: tuple[AlterConfigsResource, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class AlterConfigsResourceResult:
    error_code: ErrorCode16
    error_message: Annotated[str, Absent("")]
    resource_type: Int8
    resource_name: str


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.INCREMENTAL_ALTER_CONFIGS
    API_VERSION: ClassVar[int] = 0

    responses: tuple[AlterConfigsResourceResult, ...]


# ---------------------------------------------------------------------------------------------
# DescribeCluster / ElectLeaders v0.
# ---------------------------------------------------------------------------------------------

Height = Annotated[int, Range(-1, INT64_MAX)]
"""A metadata-log height (or a count of blocks), -1 when unknown."""


@dataclass(frozen=True, slots=True)
class RaftStatus:
    leader: Int32 | None  # node id of the metadata-log leader, None while there is none
    term: int
    # (term, height) of the last committed block
    commit: Annotated[tuple[Int64, Int64], Sentence("{field} must be [term, height]")]


@dataclass(frozen=True, slots=True)
class BrokerState:
    """A broker as the controller sees it (DescribeCluster)."""

    node_id: Int32
    broker_epoch: Height
    state: str  # live, fenced (no heartbeat within its session) or draining (shutting down)
    rack: str = ""


@dataclass(frozen=True, slots=True)
class VoterStatus:
    """A metadata-log voter as its leader sees it: how far its copy of the log reaches."""

    node_id: Int32
    match_height: Height  # -1 when the answering node does not lead the log (so cannot know),
    # or when the voter answers from a new data directory not yet swapped in (docs/raft.md)
    lag_blocks: Height  # the leader's head height minus match_height; -1 when unknown


@dataclass(frozen=True, slots=True)
class ElectLeadersRequestV0:
    """A preferred-leader election over every partition (Kafka's ElectLeaders with
    election_type 0 and all partitions): each led by another replica while its first
    replica is usable and in sync gets the first one back as leader."""

    API_KEY: ClassVar[ApiKey] = ApiKey.ELECT_LEADERS
    API_VERSION: ClassVar[int] = 0


@dataclass(frozen=True, slots=True)
class ElectLeadersResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.ELECT_LEADERS
    API_VERSION: ClassVar[int] = 0

    error_code: ErrorCode16
    error_message: str = ""
    moved: Annotated[int, AtLeast(0)] = 0  # leaderships given back to their preferred replica


@dataclass(frozen=True, slots=True)
class DescribeClusterRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_CLUSTER
    API_VERSION: ClassVar[int] = 0


@dataclass(frozen=True, slots=True)
class DescribeClusterResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_CLUSTER
    API_VERSION: ClassVar[int] = 0

    cluster_id: str
    controller_id: Int32
    brokers: tuple[BrokerMetadata, ...]
    raft: RaftStatus
    broker_states: tuple[BrokerState, ...] = ()  # added fields: absent from older answers
    voters: tuple[VoterStatus, ...] = ()
