"""API keys and the versions of each that zlog speaks (docs/protocol.md, "API keys").

The numbers are Kafka's where Kafka has the API, so a Kafka-protocol listener can map requests
one to one. Every API starts at version 0; a request naming a version outside its range gets
UNSUPPORTED_VERSION, never a crash.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final


class ApiKey(IntEnum):
    """The int16 in the first two bytes of every request and response header."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_CONFIGS = 32
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    ALTER_PARTITION = 56
    DESCRIBE_CLUSTER = 60
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    CONSUMER_GROUP_HEARTBEAT = 68
    # zlog's own: Kafka has no request for this (its observers fetch without asking).
    ADD_RAFT_LEARNER = 1000
    # zlog's own: ACLs, SASL users and quotas in one change (Kafka spreads them over five).
    ALTER_SECURITY = 1001
    DESCRIBE_SECURITY = 1002


# (min_version, max_version), both inclusive.
SUPPORTED_VERSIONS: Final[dict[ApiKey, tuple[int, int]]] = {
    **dict.fromkeys(ApiKey, (0, 0)),
    # v1: a follower's fetch (replica id, broker epoch, leader epochs); v2: a consumer's
    # subscription, answered again as data arrives
    ApiKey.FETCH: (0, 2),
}

# The requests a group's coordinator answers: the worker leading the group's offsets partition.
GROUP_APIS: Final = frozenset(
    {ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.JOIN_GROUP, ApiKey.HEARTBEAT,
     ApiKey.LEAVE_GROUP, ApiKey.SYNC_GROUP, ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS,
     ApiKey.DELETE_GROUPS, ApiKey.CONSUMER_GROUP_HEARTBEAT}
)
# Which endpoint answers which API: partition workers serve the data path and the groups, the
# supervisor the control plane (FindCoordinator too); both answer ApiVersions so a client can
# probe either.
DATA_APIS: Final = frozenset(
    {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.API_VERSIONS,
     ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.DELETE_RECORDS} | GROUP_APIS
)
CONTROL_APIS: Final = frozenset(
    {
        ApiKey.METADATA,
        ApiKey.API_VERSIONS,
        ApiKey.CREATE_TOPICS,
        ApiKey.DELETE_TOPICS,
        ApiKey.CREATE_PARTITIONS,
        ApiKey.ELECT_LEADERS,
        ApiKey.INIT_PRODUCER_ID,
        ApiKey.DESCRIBE_CONFIGS,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        ApiKey.UNREGISTER_BROKER,
        ApiKey.DESCRIBE_CLUSTER,
        ApiKey.BROKER_REGISTRATION,
        ApiKey.BROKER_HEARTBEAT,
        ApiKey.ALTER_PARTITION,
        ApiKey.ADD_RAFT_LEARNER,
        ApiKey.FIND_COORDINATOR,
        ApiKey.ALTER_SECURITY,
        ApiKey.DESCRIBE_SECURITY,
    }
)


_SUPPORTED_PAIRS: Final = frozenset(
    (int(key), version)
    for key, (low, high) in SUPPORTED_VERSIONS.items()
    for version in range(low, high + 1)
)


def is_supported(api_key: int, api_version: int) -> bool:
    """Whether (api_key, api_version) names a request this build can decode.

    One set lookup: every request and every response asks this.
    """
    return (api_key, api_version) in _SUPPORTED_PAIRS


def supported_range_text(api_key: int) -> str:
    """The sentence an UNSUPPORTED_VERSION reply carries: what the caller may send instead."""
    try:
        key = ApiKey(api_key)
    except ValueError:
        known = ", ".join(f"{k.name}={int(k)}" for k in ApiKey)
        return f"unknown api key {api_key}; supported keys are {known}"
    low, high = SUPPORTED_VERSIONS[key]
    return f"{key.name} supports versions {low} to {high}"


assert all(low <= high for low, high in SUPPORTED_VERSIONS.values())
assert set(ApiKey) == DATA_APIS | CONTROL_APIS
