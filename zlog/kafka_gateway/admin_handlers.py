"""Metadata, topics, configs, the cluster and producer ids: Kafka's requests as native calls.

Each native control request has Kafka's shape already (zlog's topic configs, error codes and
config sources are Kafka's), so a handler renames fields and fills what Kafka's version asks
for. What zlog cannot do is answered as such, per item: a manual replica assignment, an
unclean election, a transactional producer.
"""

from __future__ import annotations

from typing import Any, Final

from zlog.broker.authorizer import refusal
from zlog.errors import ErrorCode, ZlogError
from zlog.kafka_gateway.calls import Call, Gateway, milliseconds
from zlog.kafka_gateway.topology import metadata_values, refused_topic
from zlog.transport.messages.admin import (
    AlterableConfig,
    AlterConfigsResource,
    ConfigSource,
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
    ElectLeadersRequestV0,
    ElectLeadersResponseV0,
    IncrementalAlterConfigsRequestV0,
    IncrementalAlterConfigsResponseV0,
    InitProducerIdRequestV0,
    InitProducerIdResponseV0,
    MetadataRequestV0,
    MetadataResponseV0,
    PartitionsSpec,
    TopicResult,
    TopicSpec,
)
from zlog.transport.messages.security import CLUSTER_RESOURCE

NO_TRANSACTIONS: Final = "zlog does not support transactions (a transactional.id)"
UNCLEAN_ELECTION: Final = 1
TOPIC_NAME_NULLABLE_FROM: Final = 12
"""Metadata's version from which a topic's name may be null (a topic asked for by id)."""


def metadata(gateway: Gateway, call: Call) -> dict[str, Any]:
    """With security on, as the native listener answers: a topic the principal may not
    describe is left out of an answer about every topic and answered
    TOPIC_AUTHORIZATION_FAILED when named, and a missing topic is created only for a
    principal that may create it (the native call is the broker's own, which may)."""
    native = gateway.native
    requested = call.field("topics")
    names: tuple[str, ...] | None = None
    topic_ids: frozenset[str] | None = None
    if requested is not None and not (call.version == 0 and not requested):
        if any(topic.name is None for topic in requested):  # named by id (v10+)
            topic_ids = frozenset(topic.topic_id.hex for topic in requested)
        else:
            names = tuple(topic.name for topic in requested)
    # Every node, whatever the topics asked: librdkafka decommissions a broker that a Metadata
    # answer leaves out, and with it the requests it was serving (a ListOffsets, a fetch).
    cluster = native.control(MetadataRequestV0(None), MetadataResponseV0)
    refused: list[dict[str, Any]] = []
    if names is not None and native.authorizer is not None:
        existing = {topic.name for topic in cluster.topics}
        may_create_any = native.may("create", "cluster", CLUSTER_RESOURCE)
        allowed: list[str] = []
        for name in names:
            if not native.may("describe", "topic", name):
                denied = refusal(native.principal, "describe", "topic", name)
                refused.append(refused_topic(name, denied.code))
            elif name in existing or may_create_any or native.may("create", "topic", name):
                allowed.append(name)
            else:
                refused.append(refused_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        names = tuple(allowed)
    answered = (cluster if names is None
                else native.control(MetadataRequestV0(names), MetadataResponseV0))
    values = metadata_values(answered, gateway.node, topic_ids, cluster=cluster)
    if names is None and native.authorizer is not None:
        values["topics"] = [topic for topic in values["topics"]
                            if native.may("describe", "topic", topic["name"])]
    values["topics"] += refused
    if topic_ids is not None:  # ids no topic has: Kafka names none (null from version 12)
        found = {topic["topic_id"] for topic in values["topics"]}
        values["topics"] += [
            refused_topic(None if call.version >= TOPIC_NAME_NULLABLE_FROM else "",
                          ErrorCode.UNKNOWN_TOPIC_ID) | {"topic_id": topic_id}
            for topic_id in sorted(topic_ids - found)]
    return values


def _results(results: tuple[TopicResult, ...]) -> dict[str, TopicResult]:
    return {result.name: result for result in results}


def _result_values(result: TopicResult | None, name: str) -> dict[str, Any]:
    if result is None:
        return {"name": name, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR,
                "error_message": "no answer for this topic"}
    return {"name": name, "error_code": result.error_code,
            "error_message": result.error_message or None}


def create_topics(gateway: Gateway, call: Call) -> dict[str, Any]:
    settings = gateway.settings
    answers: dict[str, dict[str, Any]] = {}
    specs: list[TopicSpec] = []
    for topic in call.body.topics:
        partitions = (topic.num_partitions if topic.num_partitions > 0
                      else settings.default_partitions)
        factor = (topic.replication_factor if topic.replication_factor > 0
                  else settings.default_replication_factor)
        answers[topic.name] = {"num_partitions": partitions, "replication_factor": factor}
        if topic.assignments:
            answers[topic.name] |= {
                "error_code": ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "error_message": "zlog places a topic's replicas itself; create it with "
                                 "num_partitions and replication_factor"}
            continue
        configs = {config.name: config.value for config in topic.configs
                   if config.value is not None}
        specs.append(TopicSpec(topic.name, partitions, factor, configs))
    if specs:
        response = gateway.native.control(
            CreateTopicsRequestV0(tuple(specs), validate_only=bool(call.field("validate_only"))),
            CreateTopicsResponseV0, milliseconds(call.field("timeout"), 0) or None)
        results = _results(response.topics)
        for spec in specs:
            answers[spec.name] |= _result_values(results.get(spec.name), spec.name)
    return {"throttle_time_ms": 0,
            "topics": [{"name": name, **values} for name, values in answers.items()]}


def delete_topics(gateway: Gateway, call: Call) -> dict[str, Any]:
    names: list[str] = list(call.field("topic_names", default=()) or ())
    by_id: dict[str, str] = {}
    for topic in call.field("topics", default=()) or ():
        if topic.name is not None:
            names.append(topic.name)
        else:
            by_id[topic.topic_id.hex] = ""
    if by_id:
        known = gateway.native.control(MetadataRequestV0(None), MetadataResponseV0)
        for topic in known.topics:
            if topic.topic_id in by_id:
                by_id[topic.topic_id] = topic.name
        names += [name for name in by_id.values() if name]
    results: dict[str, TopicResult] = {}
    if names:
        response = gateway.native.control(DeleteTopicsRequestV0(tuple(names)),
                                          DeleteTopicsResponseV0,
                                          milliseconds(call.field("timeout"), 0) or None)
        results = _results(response.topics)
    answers = [_result_values(results.get(name), name) for name in names]
    answers += [{"name": None, "topic_id": topic_id,
                 "error_code": ErrorCode.UNKNOWN_TOPIC_ID}
                for topic_id, name in by_id.items() if not name]
    return {"throttle_time_ms": 0, "responses": answers}


def create_partitions(gateway: Gateway, call: Call) -> dict[str, Any]:
    answers: dict[str, dict[str, Any]] = {}
    specs: list[PartitionsSpec] = []
    for topic in call.body.topics:
        if topic.assignments:
            answers[topic.name] = {
                "error_code": ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "error_message": "zlog places new partitions' replicas itself"}
        else:
            specs.append(PartitionsSpec(topic.name, topic.count))
    if specs:
        response = gateway.native.control(
            CreatePartitionsRequestV0(tuple(specs), validate_only=bool(call.body.validate_only)),
            CreatePartitionsResponseV0, milliseconds(call.field("timeout"), 0) or None)
        results = _results(response.topics)
        for spec in specs:
            answers[spec.name] = _result_values(results.get(spec.name), spec.name)
    return {"throttle_time_ms": 0,
            "results": [{**values, "name": name} for name, values in answers.items()]}


def describe_configs(gateway: Gateway, call: Call) -> dict[str, Any]:
    resources = tuple(
        DescribeConfigsResource(resource.resource_type, resource.resource_name,
                                None if resource.configuration_keys is None
                                else tuple(resource.configuration_keys))
        for resource in call.body.resources)
    response = gateway.native.control(DescribeConfigsRequestV0(resources),
                                      DescribeConfigsResponseV0)
    return {"throttle_time_ms": 0, "results": [{
        "error_code": result.error_code, "error_message": result.error_message or None,
        "resource_type": result.resource_type, "resource_name": result.resource_name,
        "configs": [{"name": config.name, "value": config.value, "read_only": False,
                     "is_default": config.config_source == ConfigSource.DEFAULT,
                     "config_source": config.config_source, "is_sensitive": False}
                    for config in result.configs]} for result in response.results]}


def incremental_alter_configs(gateway: Gateway, call: Call) -> dict[str, Any]:
    resources = tuple(
        AlterConfigsResource(resource.resource_type, resource.resource_name, tuple(
            AlterableConfig(config.name, config.config_operation, config.value)
            for config in resource.configs))
        for resource in call.body.resources)
    response = gateway.native.control(
        IncrementalAlterConfigsRequestV0(resources, validate_only=bool(call.body.validate_only)),
        IncrementalAlterConfigsResponseV0)
    return {"throttle_time_ms": 0, "responses": [{
        "error_code": result.error_code, "error_message": result.error_message or None,
        "resource_type": result.resource_type, "resource_name": result.resource_name}
        for result in response.responses]}


def elect_leaders(gateway: Gateway, call: Call) -> dict[str, Any]:
    """zlog elects preferred leaders cluster-wide: each listed partition is answered with
    the outcome of that one election."""
    wanted = call.field("topic_partitions") or ()
    if call.field("election_type", default=0) == UNCLEAN_ELECTION:
        code, message = (ErrorCode.INVALID_REQUEST,
                         "zlog never elects a replica outside the ISR (unclean election)")
    else:
        response = gateway.native.control(ElectLeadersRequestV0(), ElectLeadersResponseV0,
                                          milliseconds(call.field("timeout"), 0) or None)
        code, message = ErrorCode(response.error_code), response.error_message
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "replica_election_results": [
        {"topic": topic.topic, "partition_result": [
            {"partition_id": partition, "error_code": code, "error_message": message or None}
            for partition in topic.partitions]} for topic in wanted]}


def describe_cluster(gateway: Gateway, call: Call) -> dict[str, Any]:
    response = gateway.native.control(DescribeClusterRequestV0(), DescribeClusterResponseV0)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "cluster_id": response.cluster_id,
            "controller_id": gateway.node.node_id, "brokers": [gateway.node.as_values()],
            "cluster_authorized_operations": -2147483648}


def init_producer_id(gateway: Gateway, call: Call) -> dict[str, Any]:
    """A fresh producer id for an idempotent producer, also when it asks to bump its epoch
    (KIP-360): a new id starts every partition's sequence afresh, as a new epoch would."""
    if call.field("transactional_id"):
        raise ZlogError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, NO_TRANSACTIONS)
    response = gateway.native.control(InitProducerIdRequestV0(), InitProducerIdResponseV0)
    return {"throttle_time_ms": 0, "error_code": response.error_code,
            "producer_id": response.producer_id, "producer_epoch": response.producer_epoch}
