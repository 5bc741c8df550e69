"""Kafka's DeleteRecords (API key 21) on a partition worker's Kafka port.

Kafka clients send DeleteRecords to each partition's leader (their admin clients group the
partitions by the leader Metadata names), which for zlog is the worker's Kafka port: each topic
of the request becomes the data plane's own DeleteRecords (delete_records.py), so the rules and
the answer are the native path's, and the Kafka answer carries each partition's new log start
as its low watermark. The request's timeout is not waited on: the leader answers once its own
log start moved, and its followers follow with their next fetch.
"""

from __future__ import annotations

from typing import Any

from zlog.broker.data.data_plane import DataPlane
from zlog.kafka.requests import KafkaRequest
from zlog.kafka.responses import respond
from zlog.transport.api import ApiKey
from zlog.transport.messages.data import DeleteRecordsPartition, DeleteRecordsRequestV0


def delete_records_response(data_plane: DataPlane, request: KafkaRequest, now_ms: int) -> bytes:
    """The framed answer to a parsed Kafka DeleteRecords request."""
    topics: list[dict[str, Any]] = []
    for topic in request.body.topics:
        native = DeleteRecordsRequestV0(topic.name, tuple(
            DeleteRecordsPartition(int(wanted.partition_index), int(wanted.offset))
            for wanted in topic.partitions))
        answered = data_plane.delete_records(native, now_ms)
        topics.append({"name": topic.name, "partitions": [
            {"partition_index": result.partition, "low_watermark": result.low_watermark,
             "error_code": result.error_code}
            for result in answered.partitions]})
    return respond(ApiKey.DELETE_RECORDS, request.api_version, request.correlation_id,
                   {"throttle_time_ms": 0, "topics": topics})
