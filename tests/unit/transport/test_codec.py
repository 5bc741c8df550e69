"""Every message type survives encode -> decode unchanged, and the bytes are the protocol's.

docs/protocol.md is the contract; the byte-level tests below spell out its structs by hand so
a change to the codec that drifts from the page fails here, not in the broker.
"""

from __future__ import annotations

import struct

import pytest
import zmq

from tests.unit.transport.test_cluster_messages import CLUSTER_REQUESTS, CLUSTER_RESPONSES
from tests.unit.transport.test_group_messages import GROUP_REQUESTS, GROUP_RESPONSES
from tests.unit.transport.wire_samples import ACL, QUOTA
from zlog.errors import ErrorCode
from zlog.transport.api import SUPPORTED_VERSIONS, ApiKey
from zlog.transport.codec import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_error_response,
    encode_request,
    encode_response,
    expects_response,
)
from zlog.transport.messages import (
    REQUEST_TYPES,
    ErrorBody,
    Request,
    Response,
)
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
from zlog.transport.messages.data import (
    DeleteRecordsEntry,
    DeleteRecordsRequestV0,
    DeleteRecordsResponseV0,
    DeleteRecordsResult,
    FetchEntry,
    FetchRequestV0,
    FetchRequestV2,
    FetchResponseV0,
    FetchResponseV2,
    FetchResult,
    ListOffsetsPartition,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
    ListOffsetsResult,
    ProduceEntry,
    ProduceRequestV0,
    ProduceResponseV0,
    ProduceResult,
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
    AlterSecurityRequestV0,
    AlterSecurityResponseV0,
    DescribeSecurityRequestV0,
    DescribeSecurityResponseV0,
    UserListing,
)

BATCH_A = b"A" * 70
BATCH_B = b"B" * 90

SECURITY_REQUESTS: list[Request] = [
    AlterSecurityRequestV0(acls_add=(ACL,), users_remove=("carol",), quotas_set=(QUOTA,)),
    DescribeSecurityRequestV0(),
]
SECURITY_RESPONSES: list[Response] = [
    AlterSecurityResponseV0(31, "no"),
    DescribeSecurityResponseV0((ACL,), (UserListing("bob", ("SCRAM-SHA-256",)),), (QUOTA,)),
]

REQUESTS: list[Request] = [
    ProduceRequestV0(
        acks=-1,
        timeout_ms=1500,
        entries=(
            ProduceEntry("orders", 0, (BATCH_A, BATCH_B)),
            ProduceEntry("payments.eu-1", 7, (BATCH_B,)),
            ProduceEntry("empty", 2, ()),
        ),
    ),
    ProduceRequestV0(acks=0, timeout_ms=0, entries=()),
    FetchRequestV0(-1, 500, 1, 50 << 20, (FetchEntry("orders", 0, 12345678901, 1 << 20),)),
    FetchRequestV0(3, 0, 0, 0, ()),
    FetchRequestV2(-1, 500, 1, 50 << 20, (FetchEntry("orders", 0, 12345678901, 1 << 20),
                                          FetchEntry("payments", 3, 0, 4096))),
    FetchRequestV2(-1, 500, 1, 1 << 20, ()),
    ListOffsetsRequestV0("orders", (ListOffsetsPartition(0, -1), ListOffsetsPartition(1, -2),
                                    ListOffsetsPartition(2, 1_700_000_000_000))),
    DeleteRecordsRequestV0(30_000, (DeleteRecordsEntry("orders", 0, -1),
                                    DeleteRecordsEntry("payments", 1, 12345678901))),
    MetadataRequestV0(None),
    MetadataRequestV0(("orders", "ünïcode")),
    MetadataRequestV0(()),
    ApiVersionsRequestV0(),
    CreateTopicsRequestV0((TopicSpec("orders", 3, 1, {"retention.ms": "1000"}),
                           TopicSpec("b", 1)), validate_only=True),
    DeleteTopicsRequestV0(("orders", "b")),
    CreatePartitionsRequestV0((PartitionsSpec("orders", 12),), validate_only=True),
    ElectLeadersRequestV0(),
    AlterPartitionReassignmentsRequestV0((ReassignmentSpec("orders", 0, (2, 3, 1)),
                                          ReassignmentSpec("orders", 1, None))),
    ListPartitionReassignmentsRequestV0(),
    UnregisterBrokerRequestV0(3),
    InitProducerIdRequestV0(None),
    InitProducerIdRequestV0("tx-1"),
    DescribeClusterRequestV0(),
    DescribeConfigsRequestV0((DescribeConfigsResource(2, "orders"),
                              DescribeConfigsResource(2, "b", ("retention.ms",)))),
    IncrementalAlterConfigsRequestV0((AlterConfigsResource(2, "orders", (
        AlterableConfig("retention.ms", 0, "1000"), AlterableConfig("segment.ms", 1))),),
        validate_only=True),
    *CLUSTER_REQUESTS,
    *GROUP_REQUESTS,
    *SECURITY_REQUESTS,
]

BROKERS = (BrokerMetadata(1, "host-a", "tcp://10.0.0.1:7400"), BrokerMetadata(2, "host-b", "tcp://b:1"))

RESPONSES: list[Response] = [
    ProduceResponseV0((
        ProduceResult("orders", 0, 0, 42, -1, 0, ""),
        ProduceResult("orders", 1, 6, -1, -1, -1, "not the leader: é"),
    )),
    ProduceResponseV0(()),
    FetchResponseV0((
        FetchResult("orders", 0, 0, 100, 100, 0, (BATCH_A, BATCH_B + BATCH_A)),
        FetchResult("orders", 1, 1, 5, 5, 2, (), "offset 9 is out of range"),
        FetchResult("orders", 2, 0, 0, 0, 0, (BATCH_B,)),
    )),
    FetchResponseV2((FetchResult("orders", 0, 0, 100, 100, 0, (BATCH_A,)),), more=True),
    FetchResponseV2((FetchResult("orders", 1, 6, -1, -1, -1, (), "moved"),), more=False),
    ListOffsetsResponseV0("orders", (ListOffsetsResult(0, 0, "", 17, -1),
                                     ListOffsetsResult(9, 3, "no such partition", -1, -1))),
    DeleteRecordsResponseV0((DeleteRecordsResult("orders", 0, 0, "", 17),
                             DeleteRecordsResult("payments", 1, 1, "above the high watermark",
                                                 -1))),
    MetadataResponseV0(
        "cluster-x", 1, BROKERS,
        (TopicMetadata("orders", 0, "", {"cleanup.policy": "delete"}, (
            PartitionMetadata(0, 1, 3, (1, 2), (1,), "tcp://10.0.0.1:40001"),
            PartitionMetadata(1, -1, 0, (2,), (), "", 5),
        )), TopicMetadata("missing", 3, "unknown topic")),
    ),
    ApiVersionsResponseV0(
        tuple(ApiVersionRange(int(k), lo, hi) for k, (lo, hi) in SUPPORTED_VERSIONS.items()),
        "zlog 0.1.0",
    ),
    CreateTopicsResponseV0((TopicResult("orders", 0, ""), TopicResult("x/y", 17, "bad name"))),
    DeleteTopicsResponseV0((TopicResult("orders", 0),)),
    CreatePartitionsResponseV0((TopicResult("orders", 37, "it can only grow"),)),
    ElectLeadersResponseV0(0, "", 3),
    AlterPartitionReassignmentsResponseV0(39, "orders-0: [1, 1] names a broker twice"),
    ListPartitionReassignmentsResponseV0(0, "", (
        OngoingReassignment("orders", 0, (2, 3, 1), (3,), (1,)),)),
    UnregisterBrokerResponseV0(38, "removing it would lower the replication factor"),
    UnregisterBrokerResponseV0(0, "", 4),
    InitProducerIdResponseV0(0, 4000, 0),
    DescribeClusterResponseV0("cluster-x", 1, BROKERS, RaftStatus(1, 7, (7, 1234))),
    DescribeClusterResponseV0("cluster-x", -1, (), RaftStatus(None, 0, (0, 0))),
    DescribeClusterResponseV0("cluster-x", 2, BROKERS, RaftStatus(2, 3, (3, 40)),
                              (BrokerState(1, 4, "fenced", "rack-a"), BrokerState(2, 5, "live")),
                              (VoterStatus(1, 38, 2), VoterStatus(2, 40, 0))),
    DescribeConfigsResponseV0((
        DescribeConfigsResult(0, "", 2, "orders", (DescribedConfig("retention.ms", "1000", 1),
                                                    DescribedConfig("segment.ms", None, 5))),
        DescribeConfigsResult(3, "no topic 'x'", 2, "x"),
    )),
    IncrementalAlterConfigsResponseV0((AlterConfigsResourceResult(0, "", 2, "orders"),
                                       AlterConfigsResourceResult(40, "bad", 2, "b"))),
    *CLUSTER_RESPONSES,
    *GROUP_RESPONSES,
    *SECURITY_RESPONSES,
]


def normalized(value: object) -> object:
    """Messages with their buffers as bytes, so a decoded message compares with the original."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, tuple):
        return tuple(normalized(item) for item in value)
    if hasattr(value, "__dataclass_fields__"):
        fields = value.__dataclass_fields__
        return (type(value).__name__, *((n, normalized(getattr(value, n))) for n in fields))
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items()}
    return value


def test_every_api_has_a_round_trip_case() -> None:
    assert {type(r) for r in REQUESTS} == set(REQUEST_TYPES.values())
    assert {type(r).API_KEY for r in RESPONSES} == set(ApiKey)


@pytest.mark.parametrize("msg", REQUESTS, ids=lambda m: type(m).__name__)
def test_request_round_trip(msg: Request) -> None:
    frames = encode_request(123, msg)
    header, decoded = decode_request(frames)
    assert header == RequestHeader(msg.API_KEY, msg.API_VERSION, 123, 0)
    assert normalized(decoded) == normalized(msg)


@pytest.mark.parametrize("msg", RESPONSES, ids=lambda m: type(m).__name__)
def test_response_round_trip(msg: Response) -> None:
    request_header = RequestHeader(msg.API_KEY, msg.API_VERSION, -77)
    header, decoded = decode_response(encode_response(request_header, msg))
    assert (header.api_key, header.api_version, header.correlation_id) == (
        msg.API_KEY, msg.API_VERSION, -77)
    assert header.error_code == 0
    assert normalized(decoded) == normalized(msg)


def test_zmq_frames_are_accepted_and_batches_stay_views() -> None:
    """Received zmq.Frames decode without a copy: a batch is a view of the frame's memory."""
    msg = ProduceRequestV0(1, 100, (ProduceEntry("t", 0, (BATCH_A * 1000,)),))
    frames = [zmq.Frame(bytes(f)) for f in encode_request(5, msg)]
    _, decoded = decode_request(frames)
    assert isinstance(decoded, ProduceRequestV0)
    batch = decoded.entries[0].batches[0]
    assert isinstance(batch, memoryview)
    assert batch.obj is frames[2].buffer.obj  # the same memory, no copy
    assert bytes(batch) == BATCH_A * 1000


def test_encoded_batches_are_the_callers_buffers() -> None:
    batch = memoryview(bytearray(BATCH_A))
    frames = encode_request(1, ProduceRequestV0(1, 0, (ProduceEntry("t", 0, (batch,)),)))
    assert frames[2] is batch


def test_produce_request_bytes_match_the_protocol_page() -> None:
    msg = ProduceRequestV0(-1, 1500, (ProduceEntry("ab", 3, (BATCH_A, BATCH_B)),))
    frames = encode_request(9, msg)
    assert bytes(frames[0]) == struct.pack(">hhiH", 0, 0, 9, 0)
    entry = struct.pack(">iIH", 3, 2, 2) + b"ab"
    assert bytes(frames[1]) == struct.pack(">hiI", -1, 1500, 1) + entry
    assert [bytes(f) for f in frames[2:]] == [BATCH_A, BATCH_B]


def test_produce_response_bytes_match_the_protocol_page() -> None:
    msg = ProduceResponseV0((ProduceResult("ab", 3, 6, -1, -1, 10, "no"),))
    frames = encode_response(RequestHeader(0, 0, 9), msg)
    assert bytes(frames[0]) == struct.pack(">hhih", 0, 0, 9, 0)
    assert bytes(frames[1]) == (
        struct.pack(">I", 1) + struct.pack(">ihqqqH", 3, 6, -1, -1, 10, 2) + b"no"
        + struct.pack(">H", 2) + b"ab"
    )
    assert len(frames) == 2


def test_fetch_bytes_match_the_protocol_page() -> None:
    request = FetchRequestV0(-1, 500, 1, 1000, (FetchEntry("ab", 2, 77, 100),))
    frames = encode_request(1, request)
    assert bytes(frames[1]) == struct.pack(">iiiiI", -1, 500, 1, 1000, 1) + struct.pack(
        ">iqiH", 2, 77, 100, 2) + b"ab"
    response = FetchResponseV0((FetchResult("ab", 2, 0, 90, 90, 5, (BATCH_A,), ""),))
    frames = encode_response(RequestHeader(1, 0, 1), response)
    assert bytes(frames[1]) == (
        struct.pack(">I", 1) + struct.pack(">ihqqqIH", 2, 0, 90, 90, 5, 1, 0)
        + struct.pack(">H", 2) + b"ab"
    )
    assert bytes(frames[2]) == BATCH_A


def test_json_body_uses_the_protocol_field_names() -> None:
    frames = encode_request(1, CreateTopicsRequestV0((TopicSpec("t", 2),)))
    assert bytes(frames[1]) == (
        b'{"topics":[{"name":"t","partitions":2,"replication_factor":1,"configs":{}}],'
        b'"validate_only":false}'
    )
    assert bytes(encode_request(1, MetadataRequestV0(None))[1]) == b'{"topics":null}'
    assert bytes(encode_request(1, ApiVersionsRequestV0())[1]) == b"{}"


def test_json_decoding_ignores_unknown_fields_and_fills_defaults() -> None:
    header = struct.pack(">hhiH", ApiKey.CREATE_TOPICS, 0, 4, 0)
    body = b'{"topics":[{"name":"t","partitions":2,"future":1}],"extra":[1,2]}'
    _, decoded = decode_request([header, body])
    assert decoded == CreateTopicsRequestV0((TopicSpec("t", 2, 1, {}),), False)
    header = struct.pack(">hhiH", ApiKey.METADATA, 0, 4, 0)
    assert decode_request([header, b"{}"])[1] == MetadataRequestV0(None)


def test_error_response_round_trip() -> None:
    frames = encode_error_response(
        RequestHeader(99, 3, 12), ErrorCode.UNSUPPORTED_VERSION, "no such api")
    assert bytes(frames[0]) == struct.pack(">hhih", 99, 3, 12, 35)
    assert bytes(frames[1]) == struct.pack(">H", 11) + b"no such api"
    header, body = decode_response(frames)
    assert header.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert body == ErrorBody(35, "no such api")


def test_error_messages_are_clipped_to_the_length_field() -> None:
    frames = encode_error_response(RequestHeader(3, 0, 1), ErrorCode.INVALID_REQUEST, "é" * 40000)
    _, body = decode_response(frames)
    assert isinstance(body, ErrorBody)
    assert len(body.message.encode()) <= 0xFFFF
    assert set(body.message) == {"é"}


def test_acks_zero_expects_no_response() -> None:
    assert not expects_response(ProduceRequestV0(0, 0, ()))
    assert expects_response(ProduceRequestV0(1, 0, ()))
    assert expects_response(MetadataRequestV0(None))
