"""Every message of the protocol, one frozen dataclass per (api, version), by family:

* `data`: Produce, Fetch (a consumer's v0, a follower's v1), ListOffsets and DeleteRecords;
* `admin`: Metadata, ApiVersions, topics, configs, producer ids, DescribeCluster,
  ElectLeaders;
* `cluster`: what brokers send each other and the controller (epochs, registration,
  heartbeats, ISR changes, joining the metadata log);
* `groups`: the consumer-group APIs and FindCoordinator;
* `reassignment`: moving replicas, draining a broker;
* `security`: ACLs, SASL users and quotas.

A field's annotation is its wire type (wire_types.py), so each message is declared once: the
JSON bodies are encoded and decoded from the classes themselves (json_codec.py), the data
path's structs by hand (struct_bodies.py, offset_commit_bodies.py). This module names the
whole set: the `Request` and `Response` unions and the class of each (api key, version).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from zlog.transport.api import SUPPORTED_VERSIONS, ApiKey
from zlog.transport.messages.admin import (
    ApiVersionsRequestV0,
    ApiVersionsResponseV0,
    CreatePartitionsRequestV0,
    CreatePartitionsResponseV0,
    CreateTopicsRequestV0,
    CreateTopicsResponseV0,
    DeleteTopicsRequestV0,
    DeleteTopicsResponseV0,
    DescribeClusterRequestV0,
    DescribeClusterResponseV0,
    DescribeConfigsRequestV0,
    DescribeConfigsResponseV0,
    ElectLeadersRequestV0,
    ElectLeadersResponseV0,
    IncrementalAlterConfigsRequestV0,
    IncrementalAlterConfigsResponseV0,
    InitProducerIdRequestV0,
    InitProducerIdResponseV0,
    MetadataRequestV0,
    MetadataResponseV0,
)
from zlog.transport.messages.cluster import (
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
from zlog.transport.messages.data import (
    DeleteRecordsRequestV0,
    DeleteRecordsResponseV0,
    FetchRequestV0,
    FetchRequestV1,
    FetchRequestV2,
    FetchResponseV0,
    FetchResponseV1,
    FetchResponseV2,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
    ProduceRequestV0,
    ProduceResponseV0,
)
from zlog.transport.messages.groups import (
    GROUP_REQUEST_TYPES,
    GROUP_RESPONSE_TYPES,
    FindCoordinatorRequestV0,
    FindCoordinatorResponseV0,
    GroupRequest,
    GroupResponse,
)
from zlog.transport.messages.reassignment import (
    AlterPartitionReassignmentsRequestV0,
    AlterPartitionReassignmentsResponseV0,
    ListPartitionReassignmentsRequestV0,
    ListPartitionReassignmentsResponseV0,
    UnregisterBrokerRequestV0,
    UnregisterBrokerResponseV0,
)
from zlog.transport.messages.security import (
    AlterSecurityRequestV0,
    AlterSecurityResponseV0,
    DescribeSecurityRequestV0,
    DescribeSecurityResponseV0,
)


@dataclass(frozen=True, slots=True)
class ErrorBody:
    """The body of a response whose header carries a non-zero error code."""

    error_code: int
    message: str


Request: TypeAlias = (
    ProduceRequestV0
    | FetchRequestV0
    | FetchRequestV1
    | FetchRequestV2
    | OffsetForLeaderEpochRequestV0
    | BrokerRegistrationRequestV0
    | AddRaftLearnerRequestV0
    | AlterSecurityRequestV0
    | DescribeSecurityRequestV0
    | BrokerHeartbeatRequestV0
    | AlterPartitionRequestV0
    | ListOffsetsRequestV0
    | DeleteRecordsRequestV0
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
    | FetchResponseV2
    | OffsetForLeaderEpochResponseV0
    | BrokerRegistrationResponseV0
    | AddRaftLearnerResponseV0
    | AlterSecurityResponseV0
    | DescribeSecurityResponseV0
    | BrokerHeartbeatResponseV0
    | AlterPartitionResponseV0
    | ListOffsetsResponseV0
    | DeleteRecordsResponseV0
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
        FetchRequestV2,
        OffsetForLeaderEpochRequestV0,
        BrokerRegistrationRequestV0,
        AddRaftLearnerRequestV0,
        AlterSecurityRequestV0,
        DescribeSecurityRequestV0,
        BrokerHeartbeatRequestV0,
        AlterPartitionRequestV0,
        ListOffsetsRequestV0,
        DeleteRecordsRequestV0,
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
        FetchResponseV2,
        OffsetForLeaderEpochResponseV0,
        BrokerRegistrationResponseV0,
        AddRaftLearnerResponseV0,
        AlterSecurityResponseV0,
        DescribeSecurityResponseV0,
        BrokerHeartbeatResponseV0,
        AlterPartitionResponseV0,
        ListOffsetsResponseV0,
        DeleteRecordsResponseV0,
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
