"""Responses built from plain values at any version, and the ApiVersions answer."""

from __future__ import annotations

import pytest
from kafka.protocol.metadata import ApiVersionsResponse, MetadataResponse

from zlog.kafka.api_versions import ADVERTISED, advertised, served
from zlog.kafka.responses import api_versions_response, respond
from zlog.transport.api import ApiKey

BROKERS = [{"node_id": 1, "host": "h", "port": 9092, "rack": None}]
TOPICS = [{"name": "t", "error_code": 0, "topic_id": "0123456789abcdef0123456789abcdef",
           "partitions": [{"partition_index": 0, "leader_id": 1, "leader_epoch": 4,
                           "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}]}]


@pytest.mark.parametrize("version", range(12))
def test_one_set_of_values_answers_every_metadata_version(version: int) -> None:
    answer = respond(ApiKey.METADATA, version, 3, {
        "throttle_time_ms": 0, "brokers": BROKERS, "cluster_id": "c", "controller_id": 1,
        "topics": TOPICS})
    decoded = MetadataResponse.decode(answer, version=version, header=True, framed=True)
    assert decoded._header.correlation_id == 3
    assert [(b.node_id, b.host, b.port) for b in decoded.brokers] == [(1, "h", 9092)]
    [topic] = decoded.topics
    [partition] = topic.partitions
    assert (topic.name, partition.leader_id) == ("t", 1)
    if version >= 7:
        assert partition.leader_epoch == 4
    if version >= 10:
        assert str(topic.topic_id).replace("-", "") == TOPICS[0]["topic_id"]


@pytest.mark.parametrize("version", range(4))
def test_api_versions_lists_the_table_at_each_version_with_a_version_0_header(
        version: int) -> None:
    decoded = ApiVersionsResponse.decode(api_versions_response(version, 8), version=version,
                                         header=True, framed=True)
    assert decoded.error_code == 0
    assert {(key.api_key, key.min_version, key.max_version) for key in decoded.api_keys} == {
        (row.api_key, row.min_version, row.max_version) for row in ADVERTISED}


def test_the_table_serves_produce_min_0_and_the_group_apis_from_0() -> None:
    for key in (ApiKey.PRODUCE, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT,
                ApiKey.LEAVE_GROUP, ApiKey.FIND_COORDINATOR):
        assert advertised(key, 0)
    assert advertised(ApiKey.OFFSET_COMMIT, 2) and advertised(ApiKey.OFFSET_FETCH, 1)
    # ConsumerGroupHeartbeat (KIP-848): v0, and v1 (KIP-1082), the only one librdkafka sends
    assert advertised(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0)
    assert served(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1)
    assert not advertised(ApiKey.CONSUMER_GROUP_HEARTBEAT, 2)
    assert served(ApiKey.METADATA, 12)  # librdkafka's KIP-848 consumer asks by topic id
    assert served(ApiKey.FETCH, 12) and not served(ApiKey.FETCH, 13)  # topic ids in Fetch
