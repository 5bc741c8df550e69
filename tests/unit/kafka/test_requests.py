"""Requests parsed with kio, and every request zlog cannot serve answered well-formed.

The requests are encoded by kafka-python's protocol layer and the answers decoded by it: an
encoder and decoder independent of kio.
"""

from __future__ import annotations

import struct
import uuid

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse, HeartbeatResponse
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
)
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from zlog.errors import ErrorCode
from zlog.kafka.api_versions import ADVERTISED, list_offsets_timestamp_served, served
from zlog.kafka.requests import BadRequest, parse_request
from zlog.kafka.responses import error_response
from zlog.transport.api import ApiKey


def _request(message: object, version: int, correlation_id: int = 7) -> bytes:
    message.with_header(correlation_id=correlation_id, client_id="test")  # type: ignore[attr-defined]
    return bytes(message.encode(version=version, header=True))  # type: ignore[attr-defined]


def _error_answer(frame: bytes) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        parse_request(frame)
    return caught.value


def test_a_request_parses_to_its_header_and_body_and_trailing_bytes_are_ignored() -> None:
    frame = _request(MetadataRequest(topics=None, allow_auto_topic_creation=False), 9)
    for data in (frame, frame + b"\0\0\0"):
        request = parse_request(data)
        assert (request.api_key, request.api_version, request.correlation_id,
                request.client_id) == (ApiKey.METADATA, 9, 7, "test")
        assert request.body.topics is None
        assert request.body.allow_auto_topic_creation is False


def test_api_versions_past_ours_gets_error_35_and_the_table_in_a_version_0_body() -> None:
    """KIP-511: a v5 request (no schema anywhere yet) and a v4 one (kio's, not ours)."""
    for version in (4, 5, 32_767):
        frame = struct.pack(">hhih", ApiKey.API_VERSIONS, version, 11, -1) + b"\0" * 4
        bad = _error_answer(frame)
        assert bad.error == ErrorCode.UNSUPPORTED_VERSION
        answer = error_response(bad.api_key, bad.api_version, bad.correlation_id, bad.error)
        decoded = ApiVersionsResponse.decode(answer, version=version % 4, header=True,
                                             framed=True)
        assert decoded._header.correlation_id == 11
        assert decoded.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [(key.api_key, key.min_version, key.max_version) for key in decoded.api_keys] \
            == [(row.api_key, row.min_version, row.max_version) for row in ADVERTISED]


def test_produce_before_version_3_is_advertised_yet_refused_with_a_produce_answer() -> None:
    """librdkafka needs Produce 0 in the range to compress; message formats v0/v1 are
    not stored."""
    assert not served(ApiKey.PRODUCE, 2) and served(ApiKey.PRODUCE, 3)
    frame = _request(ProduceRequest(acks=1, timeout_ms=100, topic_data=[]), 2)
    bad = _error_answer(frame)
    assert bad.error == ErrorCode.UNSUPPORTED_VERSION
    answer = error_response(bad.api_key, bad.api_version, bad.correlation_id, bad.error)
    assert struct.unpack_from(">iih", answer) == (len(answer) - 4, 7, 35)


def test_an_unserved_version_kio_reads_is_answered_at_that_version_partition_by_partition(
        ) -> None:
    """Fetch 13 is kio's but not ours: the answer lists the asked partition with error 35."""
    partition = FetchRequest.FetchTopic.FetchPartition(
        partition=3, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=100)
    fetch = FetchRequest(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1000,
                         isolation_level=0, session_id=0, session_epoch=-1,
                         topics=[FetchRequest.FetchTopic(topic_id=uuid.UUID(int=1),
                                                         partitions=[partition])],
                         forgotten_topics_data=[], rack_id="")
    bad = _error_answer(_request(fetch, 13))
    assert bad.body is not None
    answer = error_response(bad.api_key, bad.api_version, bad.correlation_id, bad.error,
                            request=bad.body)
    decoded = FetchResponse.decode(answer, version=13, header=True, framed=True)
    assert decoded.error_code == 35
    [topic] = decoded.responses
    [answered] = topic.partitions
    assert topic.topic_id == uuid.UUID(int=1)
    assert (answered.partition_index, answered.error_code, answered.records) == (3, 35, b"")


def test_an_unknown_key_gets_its_correlation_id_and_error_35_not_a_closed_connection() -> None:
    frame = struct.pack(">hhih", 1000, 0, 99, -1)
    bad = _error_answer(frame)
    answer = error_response(bad.api_key, bad.api_version, bad.correlation_id, bad.error)
    assert answer == struct.pack(">iih", 6, 99, 35)


@pytest.mark.parametrize("cut", [10, 14, 20, 30, 40])
def test_a_truncated_request_is_invalid_and_answered_at_its_own_version(cut: int) -> None:
    topic = ProduceRequest.TopicProduceData
    frame = _request(ProduceRequest(acks=1, timeout_ms=100, topic_data=[topic(
        name="t", partition_data=[topic.PartitionProduceData(index=0, records=b"x" * 20)])]),
        7)
    bad = _error_answer(frame[:cut])
    assert (bad.error, bad.correlation_id) == (ErrorCode.INVALID_REQUEST, 7)
    answer = error_response(bad.api_key, bad.api_version, bad.correlation_id, bad.error)
    decoded = ProduceResponse.decode(answer, version=7, header=True, framed=True)
    assert decoded.responses == []


def test_an_error_answer_carries_the_error_where_the_version_has_one() -> None:
    answer = error_response(ApiKey.HEARTBEAT, 3, 5, ErrorCode.UNKNOWN_MEMBER_ID)
    decoded = HeartbeatResponse.decode(answer, version=3, header=True, framed=True)
    assert (decoded._header.correlation_id, decoded.error_code) == (5, 25)


def test_api_versions_at_a_served_version_parses() -> None:
    frame = _request(ApiVersionsRequest(client_software_name="x",
                                        client_software_version="1"), 3)
    request = parse_request(frame)
    assert request.body.client_software_name == "x"


def test_list_offsets_max_timestamp_is_served_from_version_7_like_kafka() -> None:
    """-3 (KIP-734) came with ListOffsets 7; before it, and any negative timestamp Kafka does
    not name, is UNSUPPORTED_VERSION for the partition, as Kafka's broker answers."""
    assert list_offsets_timestamp_served(-3, 7)
    assert not list_offsets_timestamp_served(-3, 6)
    assert list_offsets_timestamp_served(-1, 1) and list_offsets_timestamp_served(-2, 1)
    assert list_offsets_timestamp_served(0, 1) and list_offsets_timestamp_served(1234, 7)
    assert not any(list_offsets_timestamp_served(t, 7) for t in (-4, -5, -1000))
