"""The consumer-group messages on the wire: what a client sends is what the coordinator gets,
without the request id, and malformed bodies are refused with INVALID_REQUEST and a sentence
naming the field (their round trips are among test_codec.py's, which takes the cases below).

Spec: zlog/transport/messages/groups.py (Kafka's keys 8-16, 42, 68; JSON bodies but
OffsetCommit's, whose struct bodies test_offset_commit_bodies.py refuses when malformed).
"""

from __future__ import annotations

import json

import pytest

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.codec import (
    RequestBodyError,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from zlog.transport.messages import (
    Request,
    Response,
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
    OffsetCommitRequestV0,
    OffsetCommitResponseV0,
    OffsetFetchRequestV0,
    OffsetFetchResponseV0,
    PartitionCommit,
    SyncGroupRequestV0,
    SyncGroupResponseV0,
)
from zlog.types import TopicPartition

T0 = TopicPartition("orders", 0)
T5 = TopicPartition("orders", 5)
SUBSCRIPTION = bytes(range(256))  # every byte value survives the base64 text

GROUP_REQUESTS: list[Request] = [
    JoinGroupRequestV0("g", "", "consumer",
                     (JoinGroupProtocol("cooperative-sticky", SUBSCRIPTION),
                      JoinGroupProtocol("range", b"")), 10_000, 300_000,
                     "instance-1", "client-a", "10.0.0.1", require_known_member_id=False),
    SyncGroupRequestV0("g", 3, "m-1", None, (MemberAssignment("m-1", b"\x00\x01"),
                                         MemberAssignment("m-2", b"")),
                     "consumer", "range"),
    HeartbeatRequestV0("g", 3, "m-1", "instance-1"),
    LeaveGroupRequestV0("g", (LeavingMember("m-1", None), LeavingMember("", "instance-2"))),
    OffsetCommitRequestV0("g", (
        (T0, PartitionCommit(42, 7, "meta")), (T5, PartitionCommit(2**62))),
        3, "m-1", "instance-1", retention_ms=60_000),
    OffsetFetchRequestV0("g", (T0, T5)),
    GroupHeartbeatRequestV0("g", "m-1", 4, "instance-1", 300_000, ("orders", "x"),
                          (T0,), "client-a", "10.0.0.1", max_wait_ms=1_000),
    DescribeGroupsRequestV0(("g", "h")),
    ListGroupsRequestV0(frozenset({"Stable", "Empty"}), frozenset({"consumer"})),
    DeleteGroupsRequestV0(("g",)),
    FindCoordinatorRequestV0("g"),
]

GROUP_RESPONSES: list[Response] = [
    JoinGroupResponseV0(ErrorCode.NONE, "m-1", 3, "consumer", "range", "m-1", True, (
        JoinGroupMember("m-1", "instance-1", SUBSCRIPTION), JoinGroupMember("m-2", None, b""))),
    SyncGroupResponseV0(ErrorCode.REBALANCE_IN_PROGRESS, b"\xff", "consumer", None),
    HeartbeatResponseV0(ErrorCode.ILLEGAL_GENERATION),
    LeaveGroupResponseV0(ErrorCode.NONE, (
        LeftMember("m-1", None, ErrorCode.NONE),
        LeftMember("", "instance-2", ErrorCode.UNKNOWN_MEMBER_ID))),
    OffsetCommitResponseV0(ErrorCode.NONE, ((T0, ErrorCode.NONE),
                                          (T5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))),
    OffsetFetchResponseV0(ErrorCode.NONE, (FetchedOffset(*T0, 42, 7, "meta"),
                                           FetchedOffset(*T5))),
    GroupHeartbeatResponseV0(ErrorCode.NONE, "", "m-1", 5, 1_000, 10_000, (T0, T5)),
    DescribeGroupsResponseV0((
        GroupDescription("g", ErrorCode.NONE, "Stable", "consumer", "range", "classic", 3, (
            DescribedMember("m-1", None, "client-a", "10.0.0.1", b"sub", b"assign", 3),)),
        GroupDescription("h", ErrorCode.NONE, "Dead"))),
    ListGroupsResponseV0(ErrorCode.NONE, (ListedGroup("g", "consumer", "Stable", "consumer"),)),
    DeleteGroupsResponseV0((DeletedGroup("g", ErrorCode.NONE),
                            DeletedGroup("h", ErrorCode.GROUP_ID_NOT_FOUND))),
    FindCoordinatorResponseV0(0, "", 2, "tcp://127.0.0.1:7411"),
]


def _request_body(msg: Request) -> dict[str, object]:
    body: dict[str, object] = json.loads(bytes(encode_request(1, msg)[1]))
    return body


def _refusal(msg: Request, body: object) -> RequestBodyError:
    header = encode_request(1, msg)[0]
    with pytest.raises(RequestBodyError) as refused:
        decode_request([header, json.dumps(body).encode()])
    return refused.value


def test_the_request_id_is_the_receivers_own() -> None:
    """A request carries no handle for its reply: the worker picks its own beside the decoded
    request, so no peer can pick which parked request a reply goes to (one named in a body is
    ignored as any unknown field)."""
    sent = HeartbeatRequestV0("g", 1, "m")
    assert "request_id" not in _request_body(sent)
    header = encode_request(1, sent)[0]
    body = json.dumps({**_request_body(sent), "request_id": 99}).encode()
    assert decode_request([header, body])[1] == sent


def test_unset_optional_fields_stay_unset() -> None:
    """None means "unchanged" (owned, topics) or "every partition" (OffsetFetch): it must not
    come back as an empty list, which means something else."""
    for msg in (GroupHeartbeatRequestV0("g", "m", 5),
                OffsetFetchRequestV0("g")):
        _, decoded = decode_request(encode_request(1, msg))
        assert decoded == msg
    minimal = {"group_id": "g", "member_epoch": 0}
    _, decoded = decode_request([encode_request(1, GROUP_REQUESTS[6])[0],
                                 json.dumps(minimal).encode()])
    assert decoded == GroupHeartbeatRequestV0("g", "", 0)


@pytest.mark.parametrize(("msg", "change", "field"), [
    (GROUP_REQUESTS[0], {"session_timeout_ms": "10s"}, "session_timeout_ms"),
    (GROUP_REQUESTS[0], {"session_timeout_ms": 2**31}, "session_timeout_ms"),
    (GROUP_REQUESTS[0], {"protocols": [{"name": "range", "metadata": "not base64!"}]},
     "metadata"),
    (GROUP_REQUESTS[0], {"protocols": [{"name": "range"}]}, "metadata"),
    (GROUP_REQUESTS[0], {"group_id": None}, "group_id"),
    (GROUP_REQUESTS[1], {"generation": True}, "generation"),
    (GROUP_REQUESTS[1], {"assignments": {"m-1": ""}}, "assignments"),
    (GROUP_REQUESTS[2], {"member_id": 7}, "member_id"),
    (GROUP_REQUESTS[3], {"members": [["m-1", None]]}, "members"),
    (GROUP_REQUESTS[5], {"partitions": "all"}, "partitions"),
    (GROUP_REQUESTS[6], {"member_epoch": None}, "member_epoch"),
    (GROUP_REQUESTS[6], {"subscribed_topics": ["a", 1]}, "subscribed_topics"),
    (GROUP_REQUESTS[6], {"owned": [{"topic": "t"}]}, "partition"),
    (GROUP_REQUESTS[6], {"max_wait_ms": -1}, "max_wait_ms"),
    (GROUP_REQUESTS[7], {"group_ids": "g"}, "group_ids"),
    (GROUP_REQUESTS[8], {"states": [1]}, "states"),
    (GROUP_REQUESTS[9], {"group_ids": [None]}, "group_ids"),
    (GROUP_REQUESTS[10], {"key": 5}, "key"),
    (GROUP_REQUESTS[10], {"key_type": 1000}, "key_type"),
])
def test_a_malformed_group_request_is_refused(msg: Request, change: dict[str, object],
                                              field: str) -> None:
    refused = _refusal(msg, {**_request_body(msg), **change})
    assert refused.code == ErrorCode.INVALID_REQUEST
    assert field in refused.message, refused.message


JSON_GROUP_REQUESTS = [m for m in GROUP_REQUESTS if not isinstance(m, OffsetCommitRequestV0)]
"""OffsetCommit's body is a struct: test_offset_commit_bodies.py refuses its malformed ones."""


@pytest.mark.parametrize("body", [[], "g", 5, None])
def test_a_body_that_is_not_an_object_is_refused(body: object) -> None:
    for msg in JSON_GROUP_REQUESTS:
        assert _refusal(msg, body).code == ErrorCode.INVALID_REQUEST


def test_a_response_with_an_unknown_error_code_is_a_decode_error() -> None:
    """A client must not turn a number it does not know into a code it acts on."""
    frames = encode_response(RequestHeader(12, 0, 1), HeartbeatResponseV0(ErrorCode.NONE))
    with pytest.raises(ZlogError) as refused:
        decode_response([frames[0], b'{"error_code": 31999}'])
    assert "error_code" in refused.value.message
