"""The inter-broker messages: malformed ones are refused (their round trips are among
test_codec.py's, which takes the cases below).

Spec: zlog/transport/messages/cluster.py and data.py (Fetch v1, OffsetForLeaderEpoch,
BrokerRegistration, BrokerHeartbeat, AlterPartition; Kafka's keys 1, 23, 62, 63, 56).
"""

from __future__ import annotations

import json

import pytest

from zlog.errors import ErrorCode
from zlog.transport.codec import (
    RequestBodyError,
    decode_request,
    encode_request,
)
from zlog.transport.messages import (
    Request,
    Response,
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
    FetchRequestV1,
    FetchResponseV1,
    ReplicaFetchEntry,
    ReplicaFetchResult,
)

CLUSTER_REQUESTS: list[Request] = [
    FetchRequestV1(2, 7, 250, 1, 1 << 20, (
        ReplicaFetchEntry("t", 0, 100, 3, 2, 0, 1 << 20, topic_id="0f" * 16),
        ReplicaFetchEntry("u", 5, 0, 0, -1, 0, 4096))),
    OffsetForLeaderEpochRequestV0(2, (EpochQuery("t", 0, 3, 2),)),
    BrokerRegistrationRequestV0(3, "inc-1", "cluster", "127.0.0.3", "tcp://127.0.0.3:7400", 2,
                                "rack-a", "dir-9"),
    BrokerHeartbeatRequestV0(3, 12, ("tcp://127.0.0.3:5000", ""), want_shutdown=True),
    AlterPartitionRequestV0(1, 4, "t", 0, 3, 9, (1, 2), {2: 6}),
    AddRaftLearnerRequestV0(4, "ab" * 16, "tcp://127.0.0.4:7401"),
]
CLUSTER_RESPONSES: list[Response] = [
    FetchResponseV1((
        ReplicaFetchResult("t", 0, 0, 3, 90, 0, 120, chunks=(b"batch-bytes",)),
        ReplicaFetchResult("u", 5, 0, 3, 0, 0, 40, diverging_epoch=1, diverging_end_offset=17),
        ReplicaFetchResult("v", 1, int(ErrorCode.FENCED_LEADER_EPOCH), 4, -1, -1, -1,
                           error_message="epoch 3 is old"))),
    OffsetForLeaderEpochResponseV0((EpochAnswer("t", 0, 0, 1, 5),)),
    BrokerRegistrationResponseV0(0, "", "cluster", 12, 1),
    BrokerHeartbeatResponseV0(0, "", False, True, 1),
    AlterPartitionResponseV0(int(ErrorCode.INVALID_UPDATE_VERSION), "moved on", 1),
    AddRaftLearnerResponseV0(0, "", 1, ("1@tcp://127.0.0.1:7401", "4@tcp://127.0.0.4:7401")),
]


def test_a_replica_fetch_with_a_negative_offset_is_refused() -> None:
    frames = encode_request(1, FetchRequestV1(2, 0, 0, 0, 0, (
        ReplicaFetchEntry("t", 0, 0, 0, 0, 0, 0),)))
    body = bytearray(frames[1])
    body[26:34] = (-5).to_bytes(8, "big", signed=True)  # the entry's fetch_offset
    with pytest.raises(RequestBodyError) as refused:
        decode_request([frames[0], bytes(body)])
    assert refused.value.code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("body", [
    {"node_id": -1, "broker_epoch": 0, "worker_endpoints": []},
    {"node_id": 1, "broker_epoch": 0, "worker_endpoints": "x"},
    {"node_id": 1, "worker_endpoints": []},
])
def test_a_malformed_heartbeat_is_refused(body: dict[str, object]) -> None:
    frames = encode_request(1, BrokerHeartbeatRequestV0(1, 0, ()))
    with pytest.raises(RequestBodyError) as refused:
        decode_request([frames[0], json.dumps(body).encode()])
    assert refused.value.code == ErrorCode.INVALID_REQUEST


def test_member_epochs_must_map_broker_ids() -> None:
    frames = encode_request(1, AlterPartitionRequestV0(1, 0, "t", 0, 0, 0, (1,)))
    body = json.loads(bytes(frames[1]))
    body["member_epochs"] = {"two": 3}
    with pytest.raises(RequestBodyError):
        decode_request([frames[0], json.dumps(body).encode()])
