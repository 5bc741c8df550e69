"""The JSON bodies: ListOffsets and the control plane (docs/protocol.md, "Control plane").

Control-plane calls are rare and their shapes change more often than the data path's, so they
travel as one UTF-8 JSON object each. Unknown fields are ignored (a newer peer may add some);
a missing required field or a value of the wrong type is the caller's error code
(INVALID_REQUEST for requests). `json.loads` is wrapped so that no ValueError,
RecursionError or UnicodeDecodeError escapes: only `ZlogError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.cluster_bodies import CLUSTER_PARSERS, cluster_body
from zlog.transport.cluster_messages import (
    AddRaftLearnerRequestV0,
    AddRaftLearnerResponseV0,
    AlterPartitionRequestV0,
    AlterPartitionResponseV0,
    BrokerHeartbeatRequestV0,
    BrokerHeartbeatResponseV0,
    BrokerRegistrationRequestV0,
    BrokerRegistrationResponseV0,
    OffsetForLeaderEpochRequestV0,
    OffsetForLeaderEpochResponseV0,
)
from zlog.transport.group_bodies import GROUP_PARSERS, group_body
from zlog.transport.group_messages import (
    GROUP_REQUEST_TYPES,
    GROUP_RESPONSE_TYPES,
    FindCoordinatorRequestV0,
    FindCoordinatorResponseV0,
)
from zlog.transport.json_fields import Fields, parse_json_object
from zlog.transport.messages import (
    AlterableConfig,
    AlterConfigsResource,
    AlterConfigsResourceResult,
    ApiVersionRange,
    ApiVersionsRequestV0,
    ApiVersionsResponseV0,
    BrokerMetadata,
    BrokerState,
    CreatePartitionsRequestV0,
    CreatePartitionsResponseV0,
    CreateTopicsRequestV0,
    CreateTopicsResponseV0,
    DeleteTopicsRequestV0,
    DeleteTopicsResponseV0,
    DescribeClusterRequestV0,
    DescribeClusterResponseV0,
    DescribeConfigsRequestV0,
    DescribeConfigsResource,
    DescribeConfigsResponseV0,
    DescribeConfigsResult,
    DescribedConfig,
    ElectLeadersRequestV0,
    ElectLeadersResponseV0,
    IncrementalAlterConfigsRequestV0,
    IncrementalAlterConfigsResponseV0,
    InitProducerIdRequestV0,
    InitProducerIdResponseV0,
    ListOffsetsPartition,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
    ListOffsetsResult,
    MetadataRequestV0,
    MetadataResponseV0,
    PartitionMetadata,
    PartitionsSpec,
    RaftStatus,
    Request,
    Response,
    TopicMetadata,
    TopicResult,
    TopicSpec,
    VoterStatus,
)
from zlog.transport.reassignment_bodies import REASSIGNMENT_PARSERS, reassignment_body
from zlog.transport.reassignment_messages import (
    AlterPartitionReassignmentsRequestV0,
    AlterPartitionReassignmentsResponseV0,
    ListPartitionReassignmentsRequestV0,
    ListPartitionReassignmentsResponseV0,
    UnregisterBrokerRequestV0,
    UnregisterBrokerResponseV0,
)
from zlog.transport.wire import (
    INT8_MAX,
    INT8_MIN,
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
)
from zlog.types import EARLIEST_TIMESTAMP

T = TypeVar("T")

# ---------------------------------------------------------------------------------------------
# Encoding: message -> JSON-ready dict.
# ---------------------------------------------------------------------------------------------


def _broker(broker: BrokerMetadata) -> dict[str, Any]:
    return {
        "node_id": broker.node_id,
        "host": broker.host,
        "control_endpoint": broker.control_endpoint,
        "rack": broker.rack,
        "ring_dir": broker.ring_dir,
    }


def _partition_metadata(partition: PartitionMetadata) -> dict[str, Any]:
    return {
        "partition": partition.partition,
        "leader": partition.leader,
        "leader_epoch": partition.leader_epoch,
        "replicas": list(partition.replicas),
        "isr": list(partition.isr),
        "endpoint": partition.endpoint,
        "error_code": partition.error_code,
        "ring_path": partition.ring_path,
    }


def _topic_metadata(topic: TopicMetadata) -> dict[str, Any]:
    return {
        "name": topic.name,
        "error_code": topic.error_code,
        "error_message": topic.error_message,
        "configs": dict(topic.configs),
        "partitions": [_partition_metadata(p) for p in topic.partitions],
        "topic_id": topic.topic_id,
    }


def _topic_result(result: TopicResult) -> dict[str, Any]:
    return {"name": result.name, "error_code": result.error_code,
            "error_message": result.error_message}


_GROUP_TYPES: Final = (*GROUP_REQUEST_TYPES, *GROUP_RESPONSE_TYPES, FindCoordinatorRequestV0,
                       FindCoordinatorResponseV0)


def _as_dict(msg: Request | Response) -> dict[str, Any]:
    if isinstance(msg, _GROUP_TYPES):
        return group_body(msg)
    match msg:
        case ListOffsetsRequestV0():
            return {"topic": msg.topic, "partitions": [
                {"partition": p.partition, "timestamp": p.timestamp} for p in msg.partitions]}
        case ListOffsetsResponseV0():
            return {"topic": msg.topic, "partitions": [
                {"partition": p.partition, "error_code": p.error_code,
                 "error_message": p.error_message, "offset": p.offset, "timestamp": p.timestamp}
                for p in msg.partitions]}
        case MetadataRequestV0():
            return {"topics": None if msg.topics is None else list(msg.topics)}
        case MetadataResponseV0():
            return {"cluster_id": msg.cluster_id, "controller_id": msg.controller_id,
                    "brokers": [_broker(b) for b in msg.brokers],
                    "topics": [_topic_metadata(t) for t in msg.topics]}
        case ElectLeadersResponseV0():
            return {"error_code": msg.error_code, "error_message": msg.error_message,
                    "moved": msg.moved}
        case ApiVersionsRequestV0() | DescribeClusterRequestV0() | ElectLeadersRequestV0():
            return {}
        case ApiVersionsResponseV0():
            return {"api_versions": [
                {"api_key": v.api_key, "min_version": v.min_version, "max_version": v.max_version}
                for v in msg.api_versions], "server": msg.server}
        case CreateTopicsRequestV0():
            return {"topics": [
                {"name": t.name, "partitions": t.partitions,
                 "replication_factor": t.replication_factor, "configs": dict(t.configs)}
                for t in msg.topics], "validate_only": msg.validate_only}
        case CreatePartitionsRequestV0():
            return {"topics": [{"name": t.name, "count": t.count} for t in msg.topics],
                    "validate_only": msg.validate_only}
        case CreateTopicsResponseV0() | DeleteTopicsResponseV0() | CreatePartitionsResponseV0():
            return {"topics": [_topic_result(t) for t in msg.topics]}
        case DeleteTopicsRequestV0():
            return {"topics": list(msg.topics)}
        case InitProducerIdRequestV0():
            return {"transactional_id": msg.transactional_id}
        case InitProducerIdResponseV0():
            return {"error_code": msg.error_code, "producer_id": msg.producer_id,
                    "producer_epoch": msg.producer_epoch}
        case DescribeConfigsRequestV0():
            return {"resources": [
                {"resource_type": r.resource_type, "resource_name": r.resource_name,
                 "configuration_keys": None if r.configuration_keys is None
                 else list(r.configuration_keys)}
                for r in msg.resources]}
        case DescribeConfigsResponseV0():
            return {"results": [
                {"error_code": r.error_code, "error_message": r.error_message,
                 "resource_type": r.resource_type, "resource_name": r.resource_name,
                 "configs": [{"name": c.name, "value": c.value, "config_source": c.config_source}
                             for c in r.configs]}
                for r in msg.results]}
        case IncrementalAlterConfigsRequestV0():
            return {"resources": [
                {"resource_type": r.resource_type, "resource_name": r.resource_name,
                 "configs": [{"name": c.name, "config_operation": c.config_operation,
                              "value": c.value} for c in r.configs]}
                for r in msg.resources], "validate_only": msg.validate_only}
        case IncrementalAlterConfigsResponseV0():
            return {"responses": [
                {"error_code": r.error_code, "error_message": r.error_message,
                 "resource_type": r.resource_type, "resource_name": r.resource_name}
                for r in msg.responses]}
        case (OffsetForLeaderEpochRequestV0() | OffsetForLeaderEpochResponseV0()
              | BrokerRegistrationRequestV0() | BrokerRegistrationResponseV0()
              | BrokerHeartbeatRequestV0() | BrokerHeartbeatResponseV0()
              | AlterPartitionRequestV0() | AlterPartitionResponseV0()
              | AddRaftLearnerRequestV0() | AddRaftLearnerResponseV0()):
            return cluster_body(msg)
        case (AlterPartitionReassignmentsRequestV0() | AlterPartitionReassignmentsResponseV0()
              | ListPartitionReassignmentsRequestV0() | ListPartitionReassignmentsResponseV0()
              | UnregisterBrokerRequestV0() | UnregisterBrokerResponseV0()):
            return reassignment_body(msg)
        case DescribeClusterResponseV0():
            return {"cluster_id": msg.cluster_id, "controller_id": msg.controller_id,
                    "brokers": [_broker(b) for b in msg.brokers],
                    "raft": {"leader": msg.raft.leader, "term": msg.raft.term,
                             "commit": list(msg.raft.commit)},
                    "broker_states": [{"node_id": b.node_id, "broker_epoch": b.broker_epoch,
                                       "state": b.state, "rack": b.rack}
                                      for b in msg.broker_states],
                    "voters": [{"node_id": v.node_id, "match_height": v.match_height,
                                "lag_blocks": v.lag_blocks} for v in msg.voters]}
    raise AssertionError(f"{type(msg).__name__} has no JSON body")


def encode_json_body(msg: Request | Response) -> bytes:
    """Compact UTF-8 JSON; NaN and infinities are refused since JSON has no such numbers."""
    try:
        return json.dumps(_as_dict(msg), separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode("utf-8")
    except (ValueError, TypeError) as error:
        raise ZlogError(ErrorCode.INVALID_REQUEST, f"unencodable message: {error}") from None


# ---------------------------------------------------------------------------------------------
# Decoding: Fields -> message.
# ---------------------------------------------------------------------------------------------


def _parse_broker(f: Fields) -> BrokerMetadata:
    return BrokerMetadata(f.integer("node_id", low=INT32_MIN, high=INT32_MAX), f.text("host"),
                          f.text("control_endpoint"), rack=f.text("rack", default=""),
                          ring_dir=f.text("ring_dir", default=""))


def _parse_partition_metadata(f: Fields) -> PartitionMetadata:
    return PartitionMetadata(
        partition=f.integer("partition", low=INT32_MIN, high=INT32_MAX),
        leader=f.integer("leader", low=INT32_MIN, high=INT32_MAX),
        leader_epoch=f.integer("leader_epoch", low=INT32_MIN, high=INT32_MAX),
        replicas=f.integers("replicas"),
        isr=f.integers("isr"),
        endpoint=f.text("endpoint"),
        error_code=f.integer("error_code", low=INT16_MIN, high=INT16_MAX, default=0),
        ring_path=f.text("ring_path", default=""),
    )


def _parse_topic_metadata(f: Fields) -> TopicMetadata:
    return TopicMetadata(
        name=f.text("name"),
        error_code=f.integer("error_code", low=INT16_MIN, high=INT16_MAX),
        error_message=f.text("error_message", default=""),
        configs=f.text_map("configs"),
        partitions=f.nested_list("partitions", _parse_partition_metadata, default=[]),
        topic_id=f.text("topic_id", default=""),
    )


def _parse_topic_result(f: Fields) -> TopicResult:
    return TopicResult(f.text("name"), f.integer("error_code", low=INT16_MIN, high=INT16_MAX),
                       f.text("error_message", default=""))


def _parse_topic_spec(f: Fields) -> TopicSpec:
    return TopicSpec(
        name=f.text("name"),
        partitions=f.integer("partitions", low=INT32_MIN, high=INT32_MAX),
        replication_factor=f.integer(
            "replication_factor", low=INT16_MIN, high=INT16_MAX, default=1
        ),
        configs=f.text_map("configs"),
    )


def _parse_list_offsets_partition(f: Fields) -> ListOffsetsPartition:
    # Below -2 is no sentinel and no time: the protocol makes it INVALID_REQUEST.
    timestamp = f.integer("timestamp", low=EARLIEST_TIMESTAMP)
    return ListOffsetsPartition(f.integer("partition", low=INT32_MIN, high=INT32_MAX), timestamp)


def _parse_list_offsets_result(f: Fields) -> ListOffsetsResult:
    return ListOffsetsResult(
        partition=f.integer("partition", low=INT32_MIN, high=INT32_MAX),
        error_code=f.integer("error_code", low=INT16_MIN, high=INT16_MAX),
        error_message=f.text("error_message", default=""),
        offset=f.integer("offset"),
        timestamp=f.integer("timestamp"),
    )


def _parse_describe_configs_resource(f: Fields) -> DescribeConfigsResource:
    return DescribeConfigsResource(
        f.integer("resource_type", low=INT8_MIN, high=INT8_MAX), f.text("resource_name"),
        f.optional_texts("configuration_keys"))


def _parse_described_config(f: Fields) -> DescribedConfig:
    return DescribedConfig(f.text("name"), f.optional_text("value"),
                           f.integer("config_source", low=INT8_MIN, high=INT8_MAX))


def _parse_describe_configs_result(f: Fields) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        f.integer("error_code", low=INT16_MIN, high=INT16_MAX),
        f.text("error_message", default=""),
        f.integer("resource_type", low=INT8_MIN, high=INT8_MAX), f.text("resource_name"),
        f.nested_list("configs", _parse_described_config, default=[]))


def _parse_alterable_config(f: Fields) -> AlterableConfig:
    return AlterableConfig(f.text("name"),
                           f.integer("config_operation", low=INT8_MIN, high=INT8_MAX),
                           f.optional_text("value"))


def _parse_alter_configs_resource(f: Fields) -> AlterConfigsResource:
    return AlterConfigsResource(
        f.integer("resource_type", low=INT8_MIN, high=INT8_MAX), f.text("resource_name"),
        f.nested_list("configs", _parse_alterable_config))


def _parse_alter_configs_result(f: Fields) -> AlterConfigsResourceResult:
    return AlterConfigsResourceResult(
        f.integer("error_code", low=INT16_MIN, high=INT16_MAX),
        f.text("error_message", default=""),
        f.integer("resource_type", low=INT8_MIN, high=INT8_MAX), f.text("resource_name"))


def _parse_broker_state(f: Fields) -> BrokerState:
    return BrokerState(f.integer("node_id", low=INT32_MIN, high=INT32_MAX),
                       f.integer("broker_epoch", low=-1, high=INT64_MAX), f.text("state"),
                       f.text("rack", default=""))


def _parse_voter(f: Fields) -> VoterStatus:
    return VoterStatus(f.integer("node_id", low=INT32_MIN, high=INT32_MAX),
                       f.integer("match_height", low=-1, high=INT64_MAX),
                       f.integer("lag_blocks", low=-1, high=INT64_MAX))


def _parse_raft(f: Fields) -> RaftStatus:
    commit = f.integers("commit", low=INT64_MIN, high=INT64_MAX)
    if len(commit) != 2:
        raise f.fail("commit must be [term, height]")
    leader = f.optional_integer("leader", low=INT32_MIN, high=INT32_MAX)
    return RaftStatus(leader, f.integer("term"), (commit[0], commit[1]))


_PARSERS: Final[Mapping[type, Callable[[Fields], Request | Response]]] = {
    ListOffsetsRequestV0: lambda f: ListOffsetsRequestV0(
        f.text("topic"), f.nested_list("partitions", _parse_list_offsets_partition)),
    ListOffsetsResponseV0: lambda f: ListOffsetsResponseV0(
        f.text("topic"), f.nested_list("partitions", _parse_list_offsets_result)),
    MetadataRequestV0: lambda f: MetadataRequestV0(f.optional_texts("topics")),
    MetadataResponseV0: lambda f: MetadataResponseV0(
        f.text("cluster_id"), f.integer("controller_id", low=INT32_MIN, high=INT32_MAX),
        f.nested_list("brokers", _parse_broker), f.nested_list("topics", _parse_topic_metadata)),
    ApiVersionsRequestV0: lambda f: ApiVersionsRequestV0(),
    ApiVersionsResponseV0: lambda f: ApiVersionsResponseV0(
        f.nested_list("api_versions", lambda v: ApiVersionRange(
            v.integer("api_key", low=INT16_MIN, high=INT16_MAX),
            v.integer("min_version", low=INT16_MIN, high=INT16_MAX),
            v.integer("max_version", low=INT16_MIN, high=INT16_MAX))),
        f.text("server", default="")),
    CreateTopicsRequestV0: lambda f: CreateTopicsRequestV0(
        f.nested_list("topics", _parse_topic_spec), f.boolean("validate_only", default=False)),
    CreateTopicsResponseV0: lambda f: CreateTopicsResponseV0(
        f.nested_list("topics", _parse_topic_result)),
    DeleteTopicsRequestV0: lambda f: DeleteTopicsRequestV0(f.texts("topics")),
    CreatePartitionsRequestV0: lambda f: CreatePartitionsRequestV0(
        f.nested_list("topics", lambda t: PartitionsSpec(
            t.text("name"), t.integer("count", low=INT32_MIN, high=INT32_MAX))),
        f.boolean("validate_only", default=False)),
    CreatePartitionsResponseV0: lambda f: CreatePartitionsResponseV0(
        f.nested_list("topics", _parse_topic_result)),
    DeleteTopicsResponseV0: lambda f: DeleteTopicsResponseV0(
        f.nested_list("topics", _parse_topic_result)),
    InitProducerIdRequestV0: lambda f: InitProducerIdRequestV0(f.optional_text("transactional_id")),
    InitProducerIdResponseV0: lambda f: InitProducerIdResponseV0(
        f.integer("error_code", low=INT16_MIN, high=INT16_MAX), f.integer("producer_id"),
        f.integer("producer_epoch", low=INT16_MIN, high=INT16_MAX)),
    DescribeConfigsRequestV0: lambda f: DescribeConfigsRequestV0(
        f.nested_list("resources", _parse_describe_configs_resource)),
    DescribeConfigsResponseV0: lambda f: DescribeConfigsResponseV0(
        f.nested_list("results", _parse_describe_configs_result)),
    IncrementalAlterConfigsRequestV0: lambda f: IncrementalAlterConfigsRequestV0(
        f.nested_list("resources", _parse_alter_configs_resource),
        f.boolean("validate_only", default=False)),
    IncrementalAlterConfigsResponseV0: lambda f: IncrementalAlterConfigsResponseV0(
        f.nested_list("responses", _parse_alter_configs_result)),
    DescribeClusterRequestV0: lambda f: DescribeClusterRequestV0(),
    ElectLeadersRequestV0: lambda f: ElectLeadersRequestV0(),
    ElectLeadersResponseV0: lambda f: ElectLeadersResponseV0(
        f.integer("error_code", low=INT16_MIN, high=INT16_MAX),
        f.text("error_message", default=""), f.integer("moved", low=0, default=0)),
    DescribeClusterResponseV0: lambda f: DescribeClusterResponseV0(
        f.text("cluster_id"), f.integer("controller_id", low=INT32_MIN, high=INT32_MAX),
        f.nested_list("brokers", _parse_broker), _parse_raft(f.nested("raft")),
        f.nested_list("broker_states", _parse_broker_state, default=[]),
        f.nested_list("voters", _parse_voter, default=[])),
    **CLUSTER_PARSERS,
    **REASSIGNMENT_PARSERS,
    **GROUP_PARSERS,
}


def decode_json_body(cls: type[T], body: memoryview, code: ErrorCode) -> T:
    """Parse `body` as the JSON form of `cls`; `code` for anything malformed."""
    parse = _PARSERS[cls]
    fields = parse_json_object(body, code, f"{cls.__name__}")
    message = parse(fields)
    assert isinstance(message, cls)
    return message
