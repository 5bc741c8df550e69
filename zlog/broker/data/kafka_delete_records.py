"""Kafka's DeleteRecords (API key 21) on a partition worker's Kafka port.

Kafka clients send DeleteRecords to each partition's leader (their admin clients group the
partitions by the leader Metadata names), which for zlog is the worker's Kafka port. The request
becomes the data plane's own DeleteRecords (delete_records.py) under a `TranslatedHeader`, so
the rules, the wait for the in-sync followers (up to the request's timeout) and the answer are
the native path's, and the answer goes back in Kafka's form at the request's version.
"""

from __future__ import annotations

from typing import Any

from zlog.broker.data.data_plane import DataPlane
from zlog.broker.data.kafka_sockets import KafkaConnection
from zlog.errors import ErrorCode
from zlog.kafka.requests import KafkaRequest
from zlog.kafka.responses import error_response, respond
from zlog.transport.api import ApiKey
from zlog.transport.codec import TranslatedHeader
from zlog.transport.messages import Response
from zlog.transport.messages.data import (
    DeleteRecordsEntry,
    DeleteRecordsRequestV0,
    DeleteRecordsResponseV0,
)
from zlog.transport.server import Reply
from zlog.transport.wire import Buffer


def serve_delete_records(data_plane: DataPlane, conn: KafkaConnection, identity: bytes,
                         request: KafkaRequest, now_ms: int, *, principal: str) -> list[Reply]:
    """Hand a parsed Kafka DeleteRecords to the data plane, checked under the principal the
    connection logged in as; the connection reads no further request until its answer is
    delivered (now, or once the followers caught up)."""
    entries = tuple(
        DeleteRecordsEntry(topic.name, int(wanted.partition_index), int(wanted.offset))
        for topic in request.body.topics for wanted in topic.partitions)
    timeout_ms = max(int(request.body.timeout.total_seconds() * 1000), 0)

    def answer(response: Response) -> list[Buffer]:
        assert isinstance(response, DeleteRecordsResponseV0)
        topics: list[dict[str, Any]] = []
        for result in response.results:
            if not topics or topics[-1]["name"] != result.topic:
                topics.append({"name": result.topic, "partitions": []})
            topics[-1]["partitions"].append({
                "partition_index": result.partition, "low_watermark": result.low_watermark,
                "error_code": result.error_code})
        return [respond(ApiKey.DELETE_RECORDS, request.api_version, request.correlation_id,
                        {"throttle_time_ms": 0, "topics": topics})]

    def answer_error(code: ErrorCode, message: str) -> list[Buffer]:
        return [error_response(request.api_key, request.api_version, request.correlation_id,
                               code, request=request.body, message=message)]

    header = TranslatedHeader(int(ApiKey.DELETE_RECORDS), 0, request.correlation_id, 0,
                              answer, answer_error)
    conn.busy = True
    return data_plane.handle_translated(
        identity, header, DeleteRecordsRequestV0(timeout_ms, entries), now_ms, principal)
