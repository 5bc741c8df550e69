"""The Kafka API keys and versions zlog serves: the one table both Kafka ports advertise.

The maxima are Kafka 3.0's, the last release before Fetch and Produce moved to topic ids, so a
client that infers a broker release from the table (kafka-python does) finds a real one. The
minima are Kafka 4.0's, the oldest versions kio parses, except where older clients need a
lower one advertised:

- Produce from 0, although versions 0 to 2 (the message formats before RecordBatch v2) are
  answered with UNSUPPORTED_VERSION: librdkafka before 2.11.1, Debian's kcat among them, stops
  compressing when Produce 0 is missing from the range (KAFKA-18659).
- The group APIs and FindCoordinator from 0: librdkafka before 2.11 turns a feature off unless
  the range holds the exact version it checks for.
- ApiVersions itself: a request above our maximum is answered at version 0 with
  UNSUPPORTED_VERSION and the whole table (KIP-511), so the client retries at a version we
  have; that answer's header is always version 0.

Two rows go past Kafka 3.0, for librdkafka's KIP-848 consumer (`group.protocol=consumer`):
ConsumerGroupHeartbeat 0-1 (Kafka 4.0; librdkafka sends version 1 only), and Metadata 12
(Kafka 3.1), since that consumer looks an assigned topic's name up by topic id at version 12
or later only. No client infers a release from either, so the table still reads as 3.0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from zlog.transport.api import ApiKey
from zlog.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP


@dataclass(frozen=True, slots=True)
class ApiRange:
    """One row of the ApiVersions answer: versions min_version to max_version, inclusive."""

    api_key: int  # an ApiKey, or a SASL key (Kafka's only: zlog's own protocol has none)
    min_version: int
    max_version: int


ADVERTISED: Final = (
    ApiRange(ApiKey.PRODUCE, 0, 9),
    ApiRange(ApiKey.FETCH, 4, 12),
    ApiRange(ApiKey.LIST_OFFSETS, 1, 7),
    ApiRange(ApiKey.METADATA, 0, 12),
    ApiRange(ApiKey.OFFSET_COMMIT, 2, 8),
    ApiRange(ApiKey.OFFSET_FETCH, 1, 8),
    ApiRange(ApiKey.FIND_COORDINATOR, 0, 4),
    ApiRange(ApiKey.JOIN_GROUP, 0, 7),
    ApiRange(ApiKey.HEARTBEAT, 0, 4),
    ApiRange(ApiKey.LEAVE_GROUP, 0, 4),
    ApiRange(ApiKey.SYNC_GROUP, 0, 5),
    ApiRange(ApiKey.DESCRIBE_GROUPS, 0, 5),
    ApiRange(ApiKey.LIST_GROUPS, 0, 4),
    ApiRange(ApiKey.API_VERSIONS, 0, 3),
    ApiRange(ApiKey.CREATE_TOPICS, 2, 7),
    ApiRange(ApiKey.DELETE_TOPICS, 1, 6),
    ApiRange(ApiKey.DELETE_RECORDS, 0, 2),
    ApiRange(ApiKey.INIT_PRODUCER_ID, 0, 4),
    ApiRange(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4),
    ApiRange(ApiKey.DESCRIBE_CONFIGS, 1, 4),
    ApiRange(ApiKey.CREATE_PARTITIONS, 0, 3),
    ApiRange(ApiKey.DELETE_GROUPS, 0, 2),
    ApiRange(ApiKey.ELECT_LEADERS, 0, 2),
    ApiRange(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1),
    ApiRange(ApiKey.DESCRIBE_CLUSTER, 0, 0),
    ApiRange(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1),
)
"""What ApiVersions answers, in key order."""

SASL_HANDSHAKE: Final = 17
SASL_AUTHENTICATE: Final = 36
SASL_ADVERTISED: Final = (
    ApiRange(SASL_HANDSHAKE, 0, 1),
    ApiRange(SASL_AUTHENTICATE, 0, 2),
)
"""Added to the table by a listener that asks for a login (docs/security.md). SaslHandshake
from 0 because librdkafka offers SASL only to a broker whose range holds version 0; v0 itself,
after which the SASL tokens travel bare instead of in SaslAuthenticate requests, is answered
UNSUPPORTED_VERSION (every client since Kafka 1.0 sends v1 when v1 is advertised)."""

ADVERTISED_BUT_REFUSED_BELOW: Final[dict[int, int]] = {ApiKey.PRODUCE: 3, SASL_HANDSHAKE: 1}
"""Versions advertised for old clients' sake but answered with UNSUPPORTED_VERSION: Produce
before 3 carries message formats v0 and v1, which zlog does not store; SaslHandshake 0 is
the bare-token login."""

LIST_OFFSETS_SENTINELS_FROM: Final[dict[int, int]] = {
    LATEST_TIMESTAMP: 1, EARLIEST_TIMESTAMP: 1, MAX_TIMESTAMP: 7}
"""The ListOffsets version from which each negative timestamp names an offset (Kafka's
`ReplicaManager`): -3, the max timestamp, came with version 7 (KIP-734). Any other negative
timestamp, or one older than its version, is UNSUPPORTED_VERSION for its partition, as in
Kafka."""


def list_offsets_timestamp_served(timestamp: int, api_version: int) -> bool:
    """Whether a ListOffsets partition's `timestamp` means something at `api_version`."""
    return timestamp >= 0 or api_version >= LIST_OFFSETS_SENTINELS_FROM.get(timestamp,
                                                                            api_version + 1)


_RANGES: Final[dict[int, ApiRange]] = {int(row.api_key): row
                                        for row in (*ADVERTISED, *SASL_ADVERTISED)}


def advertised(api_key: int, api_version: int) -> bool:
    """Whether the table names this version of this key."""
    row = _RANGES.get(api_key)
    return row is not None and row.min_version <= api_version <= row.max_version


def served(api_key: int, api_version: int) -> bool:
    """Whether a request of this key and version gets a real answer, not UNSUPPORTED_VERSION."""
    return (advertised(api_key, api_version)
            and api_version >= ADVERTISED_BUT_REFUSED_BELOW.get(api_key, 0))


def max_version(api_key: int) -> int:
    return _RANGES[api_key].max_version
