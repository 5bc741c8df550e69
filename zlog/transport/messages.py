"""One frozen dataclass per (api, version): the typed form of every body in docs/protocol.md.

Field names are the wire's names, so a reader can hold this file next to the protocol page.
Record batches stay buffers (memoryviews of received frames): nothing here copies them.
Encoding and decoding live in `codec.py` (frames and headers), `struct_bodies.py` (Produce
and Fetch) and `json_bodies.py` (everything else); this module only says what a message is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import ClassVar, TypeAlias

from zlog.transport.api import SUPPORTED_VERSIONS, ApiKey
from zlog.transport.cluster_messages import (
    AddRaftLearnerRequestV0,
    AddRaftLearnerResponseV0,
    AlterPartitionRequestV0,
    AlterPartitionResponseV0,
    BrokerHeartbeatRequestV0,
    BrokerHeartbeatResponseV0,
    BrokerRegistrationRequestV0,
    BrokerRegistrationResponseV0,
    FetchRequestV1,
    FetchResponseV1,
    OffsetForLeaderEpochRequestV0,
    OffsetForLeaderEpochResponseV0,
)
from zlog.transport.group_messages import (
    GROUP_REQUEST_TYPES,
    GROUP_RESPONSE_TYPES,
    FindCoordinatorRequestV0,
    FindCoordinatorResponseV0,
    GroupRequest,
    GroupResponse,
)
from zlog.transport.reassignment_messages import (
    AlterPartitionReassignmentsRequestV0,
    AlterPartitionReassignmentsResponseV0,
    ListPartitionReassignmentsRequestV0,
    ListPartitionReassignmentsResponseV0,
    UnregisterBrokerRequestV0,
    UnregisterBrokerResponseV0,
)
from zlog.transport.wire import Buffer

# ---------------------------------------------------------------------------------------------
# Produce v0 (struct body; batches as frames).
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProduceEntry:
    """The batches for one partition; each buffer is exactly one RecordBatch v2."""

    topic: str
    partition: int  # int32
    batches: tuple[Buffer, ...]


@dataclass(frozen=True, slots=True)
class ProduceRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.PRODUCE
    API_VERSION: ClassVar[int] = 0

    acks: int  # int16: 0 (no reply), 1 (leader), -1 (all in-sync replicas)
    timeout_ms: int  # int32: how long acks=-1 may wait for replication
    entries: tuple[ProduceEntry, ...]


@dataclass(frozen=True, slots=True)
class ProduceResult:
    topic: str
    partition: int  # int32
    error_code: int  # int16
    base_offset: int  # int64: the first batch's offset, -1 on error
    log_append_time_ms: int = -1  # int64: -1 when records keep their CreateTime
    log_start_offset: int = -1  # int64
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class ProduceResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.PRODUCE
    API_VERSION: ClassVar[int] = 0

    entries: tuple[ProduceResult, ...]


# ---------------------------------------------------------------------------------------------
# Fetch v0 (struct body; record data as frames).
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchEntry:
    topic: str
    partition: int  # int32
    fetch_offset: int  # int64: the first offset wanted
    partition_max_bytes: int  # int32: soft cap for this partition (one whole batch always fits)


@dataclass(frozen=True, slots=True)
class FetchRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.FETCH
    API_VERSION: ClassVar[int] = 0

    replica_id: int  # int32: -1 for consumers, the broker id for followers
    max_wait_ms: int  # int32: long-poll bound
    min_bytes: int  # int32: answer as soon as this much data is ready
    max_bytes: int  # int32: soft cap over all partitions
    entries: tuple[FetchEntry, ...]


@dataclass(frozen=True, slots=True)
class FetchResult:
    topic: str
    partition: int  # int32
    error_code: int  # int16
    high_watermark: int  # int64
    last_stable_offset: int  # int64 (= high watermark: no transactions yet)
    log_start_offset: int  # int64
    chunks: tuple[Buffer, ...] = ()  # frames, each one or more whole batches as stored
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class FetchResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.FETCH
    API_VERSION: ClassVar[int] = 0

    entries: tuple[FetchResult, ...]


# ---------------------------------------------------------------------------------------------
# ListOffsets v0 (JSON; one topic per request).
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListOffsetsPartition:
    partition: int
    timestamp: int  # -1 latest, -2 earliest, else a record time in ms


@dataclass(frozen=True, slots=True)
class ListOffsetsRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.LIST_OFFSETS
    API_VERSION: ClassVar[int] = 0

    topic: str
    partitions: tuple[ListOffsetsPartition, ...]


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    partition: int
    error_code: int
    error_message: str
    offset: int  # -1 when no record is that recent
    timestamp: int  # the found record's timestamp, -1 for the sentinels


@dataclass(frozen=True, slots=True)
class ListOffsetsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.LIST_OFFSETS
    API_VERSION: ClassVar[int] = 0

    topic: str
    partitions: tuple[ListOffsetsResult, ...]


# ---------------------------------------------------------------------------------------------
# Metadata v0 (JSON).
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """One broker in a Metadata response: where a client reaches its supervisor."""

    node_id: int
    host: str
    control_endpoint: str  # where this broker's supervisor answers, e.g. tcp://10.0.0.1:7400
    rack: str = ""  # the broker's rack ("" for none), as in Kafka's Metadata v1
    # Where this broker keeps its partitions' rings (absolute, on its host). Only the broker
    # answering fills in its own ("" for the others): a consumer on that host learns from it
    # which rings there belong to which broker (zlog.client.local_replicas).
    ring_dir: str = ""


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    leader: int  # node id, -1 when there is none
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    endpoint: str  # the data endpoint of the worker that leads this partition
    error_code: int = 0
    # The leader's shared-memory ring file (absolute path on the leader's host), "" if unknown;
    # a consumer on that host may read it directly (zlog.client.local_ring).
    ring_path: str = ""


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    error_code: int
    error_message: str
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
    controller_id: int
    brokers: tuple[BrokerMetadata, ...]
    topics: tuple[TopicMetadata, ...]


# ---------------------------------------------------------------------------------------------
# ApiVersions v0 (JSON).
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApiVersionRange:
    api_key: int
    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True)
class ApiVersionsRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.API_VERSIONS
    API_VERSION: ClassVar[int] = 0


@dataclass(frozen=True, slots=True)
class ApiVersionsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.API_VERSIONS
    API_VERSION: ClassVar[int] = 0

    api_versions: tuple[ApiVersionRange, ...]
    server: str  # "zlog <version>"


# ---------------------------------------------------------------------------------------------
# CreateTopics / DeleteTopics v0 (JSON).
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int = 1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicResult:
    name: str
    error_code: int
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
    count: int


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
# InitProducerId v0 (JSON).
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

    error_code: int
    producer_id: int  # int64, never reused: it comes from the metadata log
    producer_epoch: int  # int16


# ---------------------------------------------------------------------------------------------
# DescribeConfigs / IncrementalAlterConfigs v0 (JSON; Kafka's shapes and numbers).
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
    resource_type: int  # int8, ConfigResourceType
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
    config_source: int  # ConfigSource


@dataclass(frozen=True, slots=True)
class DescribeConfigsResult:
    error_code: int
    error_message: str
    resource_type: int
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
    config_operation: int  # int8, AlterConfigOp
    value: str | None = None  # None for DELETE


@dataclass(frozen=True, slots=True)
class AlterConfigsResource:
    resource_type: int  # int8, ConfigResourceType
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
    error_code: int
    error_message: str
    resource_type: int
    resource_name: str


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.INCREMENTAL_ALTER_CONFIGS
    API_VERSION: ClassVar[int] = 0

    responses: tuple[AlterConfigsResourceResult, ...]


# ---------------------------------------------------------------------------------------------
# DescribeCluster v0 (JSON).
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RaftStatus:
    leader: int | None  # node id of the metadata-log leader, None while there is none
    term: int
    commit: tuple[int, int]  # (term, height) of the last committed block


@dataclass(frozen=True, slots=True)
class BrokerState:
    """A broker as the controller sees it (DescribeCluster)."""

    node_id: int
    broker_epoch: int
    state: str  # live, fenced (no heartbeat within its session) or draining (shutting down)
    rack: str = ""


@dataclass(frozen=True, slots=True)
class VoterStatus:
    """A metadata-log voter as its leader sees it: how far its copy of the log reaches."""

    node_id: int
    match_height: int  # -1 when the answering node does not lead the log (so cannot know), or
    # when the voter answers from a new data directory not yet swapped in (docs/raft.md §4.15)
    lag_blocks: int  # the leader's head height minus match_height; -1 when unknown


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

    error_code: int
    error_message: str = ""
    moved: int = 0  # leaderships given back to their preferred replica, committed


@dataclass(frozen=True, slots=True)
class DescribeClusterRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_CLUSTER
    API_VERSION: ClassVar[int] = 0


@dataclass(frozen=True, slots=True)
class DescribeClusterResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_CLUSTER
    API_VERSION: ClassVar[int] = 0

    cluster_id: str
    controller_id: int
    brokers: tuple[BrokerMetadata, ...]
    raft: RaftStatus
    broker_states: tuple[BrokerState, ...] = ()  # added fields: absent from older answers
    voters: tuple[VoterStatus, ...] = ()


# ---------------------------------------------------------------------------------------------
# Whole-request failures.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ErrorBody:
    """The body of a response whose header carries a non-zero error code."""

    error_code: int
    message: str


Request: TypeAlias = (
    ProduceRequestV0
    | FetchRequestV0
    | FetchRequestV1
    | OffsetForLeaderEpochRequestV0
    | BrokerRegistrationRequestV0
    | AddRaftLearnerRequestV0
    | BrokerHeartbeatRequestV0
    | AlterPartitionRequestV0
    | ListOffsetsRequestV0
    | MetadataRequestV0
    | ApiVersionsRequestV0
    | CreateTopicsRequestV0
    | DeleteTopicsRequestV0
    | CreatePartitionsRequestV0
    | ElectLeadersRequestV0
    | InitProducerIdRequestV0
    | DescribeConfigsRequestV0
    | IncrementalAlterConfigsRequestV0
    | DescribeClusterRequestV0
    | AlterPartitionReassignmentsRequestV0
    | ListPartitionReassignmentsRequestV0
    | UnregisterBrokerRequestV0
    | GroupRequest
    | FindCoordinatorRequestV0
)
Response: TypeAlias = (
    ProduceResponseV0
    | FetchResponseV0
    | FetchResponseV1
    | OffsetForLeaderEpochResponseV0
    | BrokerRegistrationResponseV0
    | AddRaftLearnerResponseV0
    | BrokerHeartbeatResponseV0
    | AlterPartitionResponseV0
    | ListOffsetsResponseV0
    | MetadataResponseV0
    | ApiVersionsResponseV0
    | CreateTopicsResponseV0
    | DeleteTopicsResponseV0
    | CreatePartitionsResponseV0
    | ElectLeadersResponseV0
    | InitProducerIdResponseV0
    | DescribeConfigsResponseV0
    | IncrementalAlterConfigsResponseV0
    | DescribeClusterResponseV0
    | AlterPartitionReassignmentsResponseV0
    | ListPartitionReassignmentsResponseV0
    | UnregisterBrokerResponseV0
    | GroupResponse
    | FindCoordinatorResponseV0
)

REQUEST_TYPES: dict[tuple[ApiKey, int], type[Request]] = {
    (cls.API_KEY, cls.API_VERSION): cls
    for cls in (
        ProduceRequestV0,
        FetchRequestV0,
        FetchRequestV1,
        OffsetForLeaderEpochRequestV0,
        BrokerRegistrationRequestV0,
        AddRaftLearnerRequestV0,
        BrokerHeartbeatRequestV0,
        AlterPartitionRequestV0,
        ListOffsetsRequestV0,
        MetadataRequestV0,
        ApiVersionsRequestV0,
        CreateTopicsRequestV0,
        DeleteTopicsRequestV0,
        CreatePartitionsRequestV0,
        ElectLeadersRequestV0,
        InitProducerIdRequestV0,
        DescribeConfigsRequestV0,
        IncrementalAlterConfigsRequestV0,
        DescribeClusterRequestV0,
        AlterPartitionReassignmentsRequestV0,
        ListPartitionReassignmentsRequestV0,
        UnregisterBrokerRequestV0,
        *GROUP_REQUEST_TYPES,
        FindCoordinatorRequestV0,
    )
}
RESPONSE_TYPES: dict[tuple[ApiKey, int], type[Response]] = {
    (cls.API_KEY, cls.API_VERSION): cls
    for cls in (
        ProduceResponseV0,
        FetchResponseV0,
        FetchResponseV1,
        OffsetForLeaderEpochResponseV0,
        BrokerRegistrationResponseV0,
        AddRaftLearnerResponseV0,
        BrokerHeartbeatResponseV0,
        AlterPartitionResponseV0,
        ListOffsetsResponseV0,
        MetadataResponseV0,
        ApiVersionsResponseV0,
        CreateTopicsResponseV0,
        DeleteTopicsResponseV0,
        CreatePartitionsResponseV0,
        ElectLeadersResponseV0,
        InitProducerIdResponseV0,
        DescribeConfigsResponseV0,
        IncrementalAlterConfigsResponseV0,
        DescribeClusterResponseV0,
        AlterPartitionReassignmentsResponseV0,
        ListPartitionReassignmentsResponseV0,
        UnregisterBrokerResponseV0,
        *GROUP_RESPONSE_TYPES,
        FindCoordinatorResponseV0,
    )
}

assert set(REQUEST_TYPES) == set(RESPONSE_TYPES), "every request has its response"
assert set(REQUEST_TYPES) == {
    (key, version) for key, (low, high) in SUPPORTED_VERSIONS.items()
    for version in range(low, high + 1)
}, "a message class for every supported (api key, version)"
