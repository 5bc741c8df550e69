"""A sample of every JSON message zlog writes, by name: the values whose bytes
`wire_golden.json` holds as an earlier build wrote them (test_wire_golden.py).

Each message appears in a full form (every field away from its default, non-ASCII text,
nulls where a field may be null) and, where it has defaults, a bare one, so both the fields a
message always writes and the ones it leaves out when unset are pinned. The kinds are the
four JSON codecs: a request or response body, a supervisor-worker message, a metadata-log
command and a command's result.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from zlog.broker import worker_protocol as wp
from zlog.broker.control.metadata import commands as mc
from zlog.broker.control.placement import InitialPartition
from zlog.errors import ErrorCode
from zlog.transport.messages.admin import (
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
    MetadataRequestV0,
    MetadataResponseV0,
    PartitionMetadata,
    PartitionsSpec,
    RaftStatus,
    TopicMetadata,
    TopicResult,
    TopicSpec,
    VoterStatus,
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
    EpochAnswer,
    EpochQuery,
    OffsetForLeaderEpochRequestV0,
    OffsetForLeaderEpochResponseV0,
)
from zlog.transport.messages.data import (
    DeleteRecordsEntry,
    DeleteRecordsRequestV0,
    DeleteRecordsResponseV0,
    DeleteRecordsResult,
    ListOffsetsPartition,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
    ListOffsetsResult,
)
from zlog.transport.messages.groups import (
    DeletedGroup,
    DeleteGroupsRequestV0,
    DeleteGroupsResponseV0,
    DescribedMember,
    DescribeGroupsRequestV0,
    DescribeGroupsResponseV0,
    FetchedOffset,
    FindCoordinatorRequestV0,
    FindCoordinatorResponseV0,
    GroupDescription,
    GroupHeartbeatRequestV0,
    GroupHeartbeatResponseV0,
    HeartbeatRequestV0,
    HeartbeatResponseV0,
    JoinGroupMember,
    JoinGroupProtocol,
    JoinGroupRequestV0,
    JoinGroupResponseV0,
    LeaveGroupRequestV0,
    LeaveGroupResponseV0,
    LeavingMember,
    LeftMember,
    ListedGroup,
    ListGroupsRequestV0,
    ListGroupsResponseV0,
    MemberAssignment,
    OffsetFetchRequestV0,
    OffsetFetchResponseV0,
    SyncGroupRequestV0,
    SyncGroupResponseV0,
)
from zlog.transport.messages.reassignment import (
    AlterPartitionReassignmentsRequestV0,
    AlterPartitionReassignmentsResponseV0,
    ListPartitionReassignmentsRequestV0,
    ListPartitionReassignmentsResponseV0,
    OngoingReassignment,
    ReassignmentSpec,
    UnregisterBrokerRequestV0,
    UnregisterBrokerResponseV0,
)
from zlog.transport.messages.security import (
    AclEntry,
    AlterSecurityRequestV0,
    AlterSecurityResponseV0,
    DescribeSecurityRequestV0,
    DescribeSecurityResponseV0,
    QuotaEntry,
    ScramUser,
    UserListing,
)
from zlog.types import TopicPartition

Kind: TypeAlias = Literal["request", "response", "worker", "command", "result"]

TOPIC_ID = "0123456789abcdef0123456789abcdef"
BYTES = bytes(range(256))
TP = TopicPartition("ørders", 3)


def _api() -> dict[str, tuple[Kind, object]]:
    broker = BrokerMetadata(1, "hôst", "tcp://127.0.0.1:7400", rack="r1", ring_dir="/rings")
    partition = PartitionMetadata(2, 1, 7, (1, 2, 3), (1, 2), "tcp://127.0.0.1:7401",
                                    error_code=0, ring_path="/rings/t-2")
    topic = TopicMetadata("t", 0, "", {"retention.ms": "1000"}, (partition,), TOPIC_ID)
    return {
        "ListOffsetsRequestV0": ("request", ListOffsetsRequestV0(
            "t", (ListOffsetsPartition(0, -1), ListOffsetsPartition(1, 1_700_000_000_000)))),
        "ListOffsetsResponseV0": ("response", ListOffsetsResponseV0(
            "t", (ListOffsetsResult(0, 0, "", 42, -1), ListOffsetsResult(1, 6, "nö", -1, -1)))),
        "DeleteRecordsRequestV0": ("request", DeleteRecordsRequestV0(
            1000, (DeleteRecordsEntry("t", 0, -1), DeleteRecordsEntry("t", 1, 42)))),
        "DeleteRecordsResponseV0": ("response", DeleteRecordsResponseV0((
            DeleteRecordsResult("t", 0, 0, "", 42), DeleteRecordsResult("t", 1, 1, "nö", -1)))),
        "MetadataRequestV0": ("request", MetadataRequestV0(("a", "b"))),
        "MetadataRequestV0/all": ("request", MetadataRequestV0(None)),
        "MetadataResponseV0": ("response", MetadataResponseV0(
            "cluster", 1, (broker, BrokerMetadata(2, "h2", "tcp://h2:1")),
            (topic, TopicMetadata("gone", 3, "unknown topic")))),
        "ApiVersionsRequestV0": ("request", ApiVersionsRequestV0()),
        "ApiVersionsResponseV0": ("response", ApiVersionsResponseV0(
            (ApiVersionRange(0, 0, 0), ApiVersionRange(1, 0, 1)), "zlog 1.0")),
        "CreateTopicsRequestV0": ("request", CreateTopicsRequestV0(
            (TopicSpec("t", 3, 2, {"cleanup.policy": "compact"}), TopicSpec("u", 1)),
            validate_only=True)),
        "CreateTopicsResponseV0": ("response", CreateTopicsResponseV0(
            (TopicResult("t", 0), TopicResult("u", 36, "exists")))),
        "CreatePartitionsRequestV0": ("request", CreatePartitionsRequestV0(
            (PartitionsSpec("t", 6),), validate_only=False)),
        "CreatePartitionsResponseV0": ("response", CreatePartitionsResponseV0(
            (TopicResult("t", 37, "fewer"),))),
        "DeleteTopicsRequestV0": ("request", DeleteTopicsRequestV0(("t", "ü"))),
        "DeleteTopicsResponseV0": ("response", DeleteTopicsResponseV0(
            (TopicResult("t", 0),))),
        "ElectLeadersRequestV0": ("request", ElectLeadersRequestV0()),
        "ElectLeadersResponseV0": ("response", ElectLeadersResponseV0(0, "", 4)),
        "InitProducerIdRequestV0": ("request", InitProducerIdRequestV0()),
        "InitProducerIdRequestV0/tx": ("request", InitProducerIdRequestV0("tx-1")),
        "InitProducerIdResponseV0": ("response", InitProducerIdResponseV0(0, 2**40, 3)),
        "DescribeConfigsRequestV0": ("request", DescribeConfigsRequestV0((
            DescribeConfigsResource(2, "t"),
            DescribeConfigsResource(2, "u", ("retention.ms",))))),
        "DescribeConfigsResponseV0": ("response", DescribeConfigsResponseV0((
            DescribeConfigsResult(0, "", 2, "t", (
                DescribedConfig("retention.ms", "1000", 1),
                DescribedConfig("x", None, 5))),
            DescribeConfigsResult(3, "no such topic", 2, "u")))),
        "IncrementalAlterConfigsRequestV0": ("request", IncrementalAlterConfigsRequestV0((
            AlterConfigsResource(2, "t", (
                AlterableConfig("retention.ms", 0, "5"), AlterableConfig("x", 1))),),
            validate_only=True)),
        "IncrementalAlterConfigsResponseV0": ("response", IncrementalAlterConfigsResponseV0(
            (AlterConfigsResourceResult(40, "bad", 2, "t"),))),
        "DescribeClusterRequestV0": ("request", DescribeClusterRequestV0()),
        "DescribeClusterResponseV0": ("response", DescribeClusterResponseV0(
            "cluster", 1, (broker,), RaftStatus(1, 4, (4, 100)),
            (BrokerState(1, 9, "live", "r1"),), (VoterStatus(1, 100, 0),))),
        "DescribeClusterResponseV0/bare": ("response", DescribeClusterResponseV0(
            "cluster", -1, (), RaftStatus(None, 0, (0, 0)))),
    }


def _cluster() -> dict[str, tuple[Kind, object]]:
    return {
        "OffsetForLeaderEpochRequestV0": ("request", OffsetForLeaderEpochRequestV0(
            2, (EpochQuery("t", 0, 5, 4),))),
        "OffsetForLeaderEpochResponseV0": ("response", OffsetForLeaderEpochResponseV0(
            (EpochAnswer("t", 0, 0, 4, 100), EpochAnswer("t", 1, 74, -1, -1, "fenced")))),
        "BrokerRegistrationRequestV0": ("request", BrokerRegistrationRequestV0(
            1, "inc", "cluster", "hôst", "tcp://h:1", 2, "r1", TOPIC_ID)),
        "BrokerRegistrationResponseV0": ("response", BrokerRegistrationResponseV0(
            0, "", "cluster", 7, 1)),
        "BrokerHeartbeatRequestV0": ("request", BrokerHeartbeatRequestV0(
            1, 7, ("tcp://h:2", ""), want_shutdown=True)),
        "BrokerHeartbeatResponseV0": ("response", BrokerHeartbeatResponseV0(
            0, "", False, True, 1)),
        "AlterPartitionRequestV0": ("request", AlterPartitionRequestV0(
            1, 7, "t", 0, 3, 9, (1, 2), {2: 8, 1: 7})),
        "AlterPartitionResponseV0": ("response", AlterPartitionResponseV0(41, "not", 2)),
        "AddRaftLearnerRequestV0": ("request", AddRaftLearnerRequestV0(
            4, TOPIC_ID, "tcp://h:9")),
        "AddRaftLearnerResponseV0": ("response", AddRaftLearnerResponseV0(
            0, "", 1, ("1@tcp://h:9", "2@tcp://h:10"))),
    }


def _reassignment() -> dict[str, tuple[Kind, object]]:
    return {
        "AlterPartitionReassignmentsRequestV0": ("request",
            AlterPartitionReassignmentsRequestV0((
                ReassignmentSpec("t", 0, (2, 3)), ReassignmentSpec("t", 1, None)))),
        "AlterPartitionReassignmentsResponseV0": ("response",
            AlterPartitionReassignmentsResponseV0(39, "bad")),
        "ListPartitionReassignmentsRequestV0": ("request",
            ListPartitionReassignmentsRequestV0()),
        "ListPartitionReassignmentsResponseV0": ("response",
            ListPartitionReassignmentsResponseV0(0, "", (
                OngoingReassignment("t", 0, (2, 3, 1), (2, 3), (1,)),))),
        "UnregisterBrokerRequestV0": ("request", UnregisterBrokerRequestV0(3)),
        "UnregisterBrokerResponseV0": ("response", UnregisterBrokerResponseV0(0, "", 5)),
    }


def _groups() -> dict[str, tuple[Kind, object]]:
    member = DescribedMember("m-1", "i-1", "client", "/10.0.0.1", BYTES, b"\x00\x01", 3)
    return {
        "JoinGroupRequest": ("request", JoinGroupRequestV0(
            "g", "m-1", "consumer",
            (JoinGroupProtocol("range", BYTES), JoinGroupProtocol("roundrobin", b"")),
            10_000, 30_000, "i-1", "client", "/10.0.0.1", False)),
        "JoinGroupRequest/bare": ("request", JoinGroupRequestV0(
            "g", "", "consumer", (), 10_000, 30_000)),
        "JoinGroupResponse": ("response", JoinGroupResponseV0(
            ErrorCode.NONE, "m-1", 3, "consumer", "range", "m-1", True,
            (JoinGroupMember("m-1", "i-1", BYTES), JoinGroupMember("m-2", None, b"")))),
        "JoinGroupResponse/bare": ("response", JoinGroupResponseV0(
            ErrorCode.MEMBER_ID_REQUIRED)),
        "SyncGroupRequest": ("request", SyncGroupRequestV0(
            "g", 3, "m-1", "i-1",
            (MemberAssignment("m-1", BYTES), MemberAssignment("m-2", b"")), "consumer", "range")),
        "SyncGroupRequest/bare": ("request", SyncGroupRequestV0("g", 3, "m-1")),
        "SyncGroupResponse": ("response", SyncGroupResponseV0(
            ErrorCode.NONE, BYTES, "consumer", "range")),
        "HeartbeatRequest": ("request", HeartbeatRequestV0("g", 3, "m-1", "i-1")),
        "HeartbeatResponse": ("response", HeartbeatResponseV0(
            ErrorCode.REBALANCE_IN_PROGRESS)),
        "LeaveGroupRequest": ("request", LeaveGroupRequestV0(
            "g", (LeavingMember("m-1", None), LeavingMember("", "i-2")))),
        "LeaveGroupResponse": ("response", LeaveGroupResponseV0(
            ErrorCode.NONE, (LeftMember("m-1", None, ErrorCode.NONE),
                             LeftMember("", "i-2", ErrorCode.UNKNOWN_MEMBER_ID)))),
        "OffsetFetchRequest": ("request", OffsetFetchRequestV0("g", (TP,))),
        "OffsetFetchRequest/all": ("request", OffsetFetchRequestV0("g")),
        "OffsetFetchResponse": ("response", OffsetFetchResponseV0(
            ErrorCode.NONE, (FetchedOffset(*TP, 42, 3, "mé"), FetchedOffset("t", 0)))),
        "GroupHeartbeatRequest": ("request", GroupHeartbeatRequestV0(
            "g", "m-1", 4, "i-1", 30_000, ("t", "ü"), (TP,), "client", "/h", 5_000)),
        "GroupHeartbeatRequest/bare": ("request", GroupHeartbeatRequestV0("g", "", 0)),
        "GroupHeartbeatResponse": ("response", GroupHeartbeatResponseV0(
            ErrorCode.NONE, "", "m-1", 4, 3_000, 45_000, (TP,))),
        "GroupHeartbeatResponse/bare": ("response", GroupHeartbeatResponseV0(
            ErrorCode.FENCED_MEMBER_EPOCH, "fenced")),
        "DescribeGroupsRequest": ("request", DescribeGroupsRequestV0(("g", "h"))),
        "DescribeGroupsResponse": ("response", DescribeGroupsResponseV0((
            GroupDescription("g", ErrorCode.NONE, "Stable", "consumer", "range",
                                "classic", 3, (member,)),
            GroupDescription("h", ErrorCode.GROUP_ID_NOT_FOUND, "Dead")))),
        "ListGroupsRequest": ("request", ListGroupsRequestV0(
            frozenset({"Stable", "Empty"}), frozenset({"consumer"}))),
        "ListGroupsRequest/bare": ("request", ListGroupsRequestV0()),
        "ListGroupsResponse": ("response", ListGroupsResponseV0(
            ErrorCode.NONE, (ListedGroup("g", "consumer", "Stable", "classic"),))),
        "DeleteGroupsRequest": ("request", DeleteGroupsRequestV0(("g",))),
        "DeleteGroupsResponse": ("response", DeleteGroupsResponseV0(
            (DeletedGroup("g", ErrorCode.NONE), DeletedGroup("h", ErrorCode.NON_EMPTY_GROUP)))),
        "FindCoordinatorRequestV0": ("request", FindCoordinatorRequestV0("g")),
        "FindCoordinatorResponseV0": ("response", FindCoordinatorResponseV0(
            0, "", 2, "tcp://h:3")),
    }


def _worker() -> dict[str, tuple[Kind, object]]:
    return {
        "hello": ("worker", wp.Hello(3, 4242, "tcp://127.0.0.1:7401")),
        "heartbeat": ("worker", wp.Heartbeat(3)),
        "assign": ("worker", wp.Assign(
            7, "t", 2, {"retention.ms": "1000"}, 4, False, 1, 9, 2, 5, (2, 1, 3), (2, 1),
            "tcp://h:2", 1 << 30, TOPIC_ID, (3,))),
        "assign/bare": ("worker", wp.Assign(8, "t", 0)),
        "unassign": ("worker", wp.Unassign(9, "t", 2, True)),
        "stop": ("worker", wp.Stop()),
        "lease": ("worker", wp.Lease(123_456)),
        "group-settings": ("worker", wp.GroupSettings(
            {"t": 3, "__consumer_offsets": 50}, 3_000, 6_000, 45_000, 5_000, 86_400_000, 600_000)),
        "assigned": ("worker", wp.Assigned(7, 0, "")),
        "unassigned": ("worker", wp.Unassigned(9, 3, "gone")),
        "alter_isr": ("worker", wp.AlterIsr(10, "t", 2, 4, 5, (2, 1), {2: 9, 1: 8})),
        "alter_isr_answer": ("worker", wp.AlterIsrAnswer(10, 0, "")),
    }


def _commands() -> dict[str, tuple[Kind, object]]:
    return {
        "RegisterBroker": ("command", mc.RegisterBroker(
            1, "hôst", "tcp://h:1", "cluster", "inc", 2, "r1", TOPIC_ID)),
        "RegisterBroker/bare": ("command", mc.RegisterBroker(1, "h", "tcp://h:1")),
        "CreateTopic": ("command", mc.CreateTopic(
            "t", 2, 2, {"retention.ms": "1000"}, ((1, 2), (2, 1)), topic_id=TOPIC_ID)),
        "CreateTopic/no-id": ("command", mc.CreateTopic("t", 1, 1, {}, ((1,),))),
        "AlterTopicConfigs": ("command", mc.AlterTopicConfigs(
            "t", {"retention.ms": "5"}, frozenset({"cleanup.policy", "segment.bytes"}))),
        "AddPartitions": ("command", mc.AddPartitions("t", 2, ((1, 2), (2, 3)))),
        "DeleteTopic": ("command", mc.DeleteTopic("t")),
        "TopicDeleted": ("command", mc.TopicDeleted("t")),
        "SetPartitionState": ("command", mc.SetPartitionState("t", 0, -1, 3, (1, 2))),
        "ClusterChange": ("command", mc.ClusterChange(
            (mc.BrokerChange(1, 7, True, False, ("tcp://h:2",), False),
             mc.BrokerChange(2, 8, unregister=True), mc.BrokerChange(3, 9)),
            (mc.PartitionChange("t", 0, 4, 2, 5, (2, 1), (2, 1)),
             mc.PartitionChange("t", 1, 4, -1, 5, ())))),
        "ClusterChange/bare": ("command", mc.ClusterChange()),
        "ReassignPartitions": ("command", mc.ReassignPartitions(
            (mc.Reassignment("t", 0, (2, 3)), mc.Reassignment("t", 1, None)), drain=1)),
        "ReassignPartitions/bare": ("command", mc.ReassignPartitions(())),
        "AllocateProducerIds": ("command", mc.AllocateProducerIds(100)),
        "Applied": ("result", mc.Applied()),
        "BrokerRegistered": ("result", mc.BrokerRegistered("cluster", 7)),
        "TopicCreated": ("result", mc.TopicCreated(12)),
        "PartitionStateSet": ("result", mc.PartitionStateSet(5)),
        "ProducerIdsAllocated": ("result", mc.ProducerIdsAllocated(1000, 100)),
    }


LEGACY_CREATE_TOPIC = (
    b'{"assignment":[{"isr":[1,2],"leader":1,"leader_epoch":0,"partition":0,"replicas":[1,2]}],'
    b'"configs":{},"name":"t","partitions":1,"replication_factor":2,"type":"CreateTopic"}'
)
"""A CreateTopic as the metadata log held it before commands named only replica lists."""
LEGACY_CREATE_TOPIC_DECODED = mc.CreateTopic(
    "t", 1, 2, {}, ((1, 2),), (InitialPartition(0, (1, 2), 1, 0, (1, 2)),))


ACL = AclEntry("alice", "topic", "orders-", "write", "prefixed", "deny")
ACL_BARE = AclEntry("*", "cluster", "kafka-cluster", "describe")
USER = ScramUser("bob", "SCRAM-SHA-512", 4096, "c2FsdA==", "c3RvcmVk", "c2VydmVy")
QUOTA = QuotaEntry("client_id", "ingest", 1_000_000, 2_000_000, 100)
QUOTA_BARE = QuotaEntry("principal", "*")


def _security() -> dict[str, tuple[Kind, object]]:
    return {
        "AlterSecurityRequestV0": ("request", AlterSecurityRequestV0(
            (ACL,), (ACL_BARE,), (USER,), ("carol",), (QUOTA, QUOTA_BARE))),
        "AlterSecurityRequestV0/bare": ("request", AlterSecurityRequestV0()),
        "AlterSecurityResponseV0": ("response", AlterSecurityResponseV0(31, "no")),
        "DescribeSecurityRequestV0": ("request", DescribeSecurityRequestV0()),
        "DescribeSecurityResponseV0": ("response", DescribeSecurityResponseV0(
            (ACL, ACL_BARE), (UserListing("bob", ("SCRAM-SHA-256", "SCRAM-SHA-512")),),
            (QUOTA,))),
        "security-settings": ("worker", wp.SecuritySettings((ACL,), ("admin",), (QUOTA,))),
        "AlterSecurity": ("command", mc.AlterSecurity(
            (ACL,), (ACL_BARE,), (USER,), ("carol",), (QUOTA_BARE,))),
        "AlterSecurity/bare": ("command", mc.AlterSecurity()),
    }


def samples() -> dict[str, tuple[Kind, object]]:
    return {**_api(), **_cluster(), **_reassignment(), **_groups(), **_worker(), **_commands(),
            **_security()}
