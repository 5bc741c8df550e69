"""What each request of zlog's protocol needs the ACLs to allow, as Kafka's brokers ask it.

    Produce                      write topic             Fetch (consumer)     read topic
    Fetch, OffsetForLeaderEpoch  cluster_action cluster  (from a follower: brokers only)
    ListOffsets, OffsetForLeaderEpoch (consumer)         describe topic
    Metadata                     describe topic: topics not allowed are left out of the
                                 answer (or, named, answered TOPIC_AUTHORIZATION_FAILED)
    CreateTopics                 create topic (or create cluster)
    DeleteTopics, DeleteRecords  delete topic           CreatePartitions    alter topic
    DescribeConfigs              describe_configs topic (broker: cluster)
    IncrementalAlterConfigs      alter_configs topic    (broker: cluster)
    group requests, OffsetCommit read group (a commit also read topic); OffsetFetch
                                 describe group; DescribeGroups describe group; DeleteGroups
                                 delete group; FindCoordinator describe group
    ListGroups, DescribeCluster  describe cluster
    ElectLeaders, reassignments, UnregisterBroker, AlterSecurity       alter cluster
    DescribeSecurity             describe cluster (with the users' credentials:
                                 cluster_action cluster, brokers only)
    the brokers' own requests    cluster_action cluster
    ApiVersions, InitProducerId  anyone connected (a producer id grants nothing by itself)

`check_request` raises the first refusal; a request is refused whole (its answer carries the
authorization error), except Metadata, which the control plane filters topic by topic.
"""

from __future__ import annotations

from collections.abc import Iterator

from zlog.broker.authorizer import Authorizer
from zlog.transport.messages import Request
from zlog.transport.messages.admin import (
    ConfigResourceType,
    CreatePartitionsRequestV0,
    CreateTopicsRequestV0,
    DeleteTopicsRequestV0,
    DescribeClusterRequestV0,
    DescribeConfigsRequestV0,
    ElectLeadersRequestV0,
    IncrementalAlterConfigsRequestV0,
)
from zlog.transport.messages.cluster import (
    AddRaftLearnerRequestV0,
    AlterPartitionRequestV0,
    BrokerHeartbeatRequestV0,
    BrokerRegistrationRequestV0,
    OffsetForLeaderEpochRequestV0,
)
from zlog.transport.messages.data import (
    DeleteRecordsRequestV0,
    FetchRequestV0,
    FetchRequestV1,
    ListOffsetsRequestV0,
    ProduceRequestV0,
)
from zlog.transport.messages.groups import (
    DeleteGroupsRequestV0,
    DescribeGroupsRequestV0,
    FindCoordinatorRequestV0,
    GroupHeartbeatRequestV0,
    HeartbeatRequestV0,
    JoinGroupRequestV0,
    LeaveGroupRequestV0,
    ListGroupsRequestV0,
    OffsetCommitRequestV0,
    OffsetFetchRequestV0,
    SyncGroupRequestV0,
)
from zlog.transport.messages.reassignment import (
    AlterPartitionReassignmentsRequestV0,
    ListPartitionReassignmentsRequestV0,
    UnregisterBrokerRequestV0,
)
from zlog.transport.messages.security import (
    CLUSTER_RESOURCE,
    AlterSecurityRequestV0,
    DescribeSecurityRequestV0,
)

Need = tuple[str, str, str]
"""(operation, resource type, resource name)."""

_CLUSTER_ALTERS = (ElectLeadersRequestV0, AlterPartitionReassignmentsRequestV0,
                   ListPartitionReassignmentsRequestV0, UnregisterBrokerRequestV0,
                   AlterSecurityRequestV0)
_BROKER_REQUESTS = (BrokerRegistrationRequestV0, BrokerHeartbeatRequestV0,
                    AlterPartitionRequestV0, AddRaftLearnerRequestV0, FetchRequestV1)
_GROUP_READS = (JoinGroupRequestV0, SyncGroupRequestV0, HeartbeatRequestV0,
                LeaveGroupRequestV0, GroupHeartbeatRequestV0)


def _config_resource(resource_type: int, name: str) -> tuple[str, str]:
    if resource_type == ConfigResourceType.TOPIC:
        return "topic", name
    return "cluster", CLUSTER_RESOURCE


def needs(request: Request) -> Iterator[Need]:
    """Every permission `request` needs; nothing for the requests anyone connected may make
    (and Metadata, filtered by the control plane)."""
    cluster = CLUSTER_RESOURCE
    if isinstance(request, _BROKER_REQUESTS) or (
            isinstance(request, DescribeSecurityRequestV0) and request.credentials):
        yield "cluster_action", "cluster", cluster
    elif isinstance(request, ProduceRequestV0):
        for topic in dict.fromkeys(entry.topic for entry in request.entries):
            yield "write", "topic", topic
    elif isinstance(request, FetchRequestV0):
        for topic in dict.fromkeys(entry.topic for entry in request.entries):
            yield "read", "topic", topic
    elif isinstance(request, OffsetForLeaderEpochRequestV0):
        if request.replica_id >= 0:
            yield "cluster_action", "cluster", cluster
        else:
            for topic in dict.fromkeys(query.topic for query in request.queries):
                yield "describe", "topic", topic
    elif isinstance(request, ListOffsetsRequestV0):
        yield "describe", "topic", request.topic
    elif isinstance(request, DeleteRecordsRequestV0):
        for topic in dict.fromkeys(entry.topic for entry in request.entries):
            yield "delete", "topic", topic
    elif isinstance(request, CreateTopicsRequestV0):
        for spec in request.topics:
            yield "create", "topic", spec.name
    elif isinstance(request, DeleteTopicsRequestV0):
        for topic in request.topics:
            yield "delete", "topic", topic
    elif isinstance(request, CreatePartitionsRequestV0):
        for partitions in request.topics:
            yield "alter", "topic", partitions.name
    elif isinstance(request, DescribeConfigsRequestV0):
        for described in request.resources:
            yield ("describe_configs",
                   *_config_resource(described.resource_type, described.resource_name))
    elif isinstance(request, IncrementalAlterConfigsRequestV0):
        for altered in request.resources:
            yield "alter_configs", *_config_resource(altered.resource_type, altered.resource_name)
    elif isinstance(request, _GROUP_READS):
        yield "read", "group", request.group_id
    elif isinstance(request, OffsetCommitRequestV0):
        yield "read", "group", request.group_id
        for topic in dict.fromkeys(tp.topic for tp, _commit in request.offsets):
            yield "read", "topic", topic
    elif isinstance(request, OffsetFetchRequestV0):
        yield "describe", "group", request.group_id
    elif isinstance(request, DescribeGroupsRequestV0):
        for group in request.group_ids:
            yield "describe", "group", group
    elif isinstance(request, DeleteGroupsRequestV0):
        for group in request.group_ids:
            yield "delete", "group", group
    elif isinstance(request, FindCoordinatorRequestV0):
        yield "describe", "group", request.key
    elif isinstance(request, (ListGroupsRequestV0, DescribeClusterRequestV0,
                              DescribeSecurityRequestV0)):
        yield "describe", "cluster", cluster
    elif isinstance(request, _CLUSTER_ALTERS):
        yield "alter", "cluster", cluster


def check_request(authorizer: Authorizer, principal: str, request: Request) -> None:
    """Raise the authorization error of the first permission `principal` lacks."""
    if principal in authorizer.super_users:
        return
    for operation, resource_type, name in needs(request):
        if resource_type == "topic" and operation == "create" and authorizer.allowed(
                principal, "create", "cluster", CLUSTER_RESOURCE):
            continue  # Kafka: create on the cluster creates any topic
        authorizer.check(principal, operation, resource_type, name)
