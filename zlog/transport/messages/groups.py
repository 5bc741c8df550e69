"""The consumer-group requests and their responses, as plain values: JSON bodies on the wire
(json_codec.py), but OffsetCommit's, which are structs (offset_commit_bodies.py).

Field names follow Kafka's request schemas and the api keys are Kafka's (OffsetCommit 8 to
ListGroups 16, DeleteGroups 42, ConsumerGroupHeartbeat 68 as `GroupHeartbeatRequestV0`). The
same values are what the pure coordinator (`zlog.groups`) takes and returns, so the worker
hands a decoded request to it as it is. Bytes (subscriptions, assignments) travel as base64
text, a partition as {"topic", "partition"}, an error as its Kafka number.

FindCoordinator (key 10) goes to any broker's control endpoint and names the data endpoint of
the worker that leads the group's `__consumer_offsets` partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, ClassVar, Final, NamedTuple, TypeAlias, get_args

from zlog.transport.api import ApiKey
from zlog.transport.wire import INT32_MAX
from zlog.transport.wire_types import (
    Absent,
    ErrorCode16,
    Int8,
    Int32,
    KnownErrorCode,
    Range,
)
from zlog.types import NO_GENERATION, NO_LEADER_EPOCH, TopicPartition

UNKNOWN_OFFSET: Final = -1


# --- classic protocol ---------------------------------------------------------------------


class JoinGroupProtocol(NamedTuple):
    """One assignor a member offers, with its subscription bytes."""

    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.JOIN_GROUP
    API_VERSION: ClassVar[int] = 0

    group_id: str
    member_id: Annotated[str, Absent("")]
    protocol_type: str
    protocols: tuple[JoinGroupProtocol, ...]
    """In the member's order of preference."""
    session_timeout_ms: Int32
    rebalance_timeout_ms: Int32
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True
    """JoinGroup v4+ (KIP-394): a new member first gets an id (MEMBER_ID_REQUIRED), then joins."""


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.JOIN_GROUP
    API_VERSION: ClassVar[int] = 0

    error_code: KnownErrorCode
    member_id: str = ""
    generation: Int32 = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    """KIP-814: the leader rejoined as a replacing static member and must not re-assign."""
    members: tuple[JoinGroupMember, ...] = ()


class MemberAssignment(NamedTuple):
    member_id: str
    assignment: bytes


@dataclass(frozen=True, slots=True)
class SyncGroupRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.SYNC_GROUP
    API_VERSION: ClassVar[int] = 0

    group_id: str
    generation: Int32
    member_id: str
    group_instance_id: str | None = None
    assignments: tuple[MemberAssignment, ...] = ()
    """Only the leader sends them."""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class SyncGroupResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.SYNC_GROUP
    API_VERSION: ClassVar[int] = 0

    error_code: KnownErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.HEARTBEAT
    API_VERSION: ClassVar[int] = 0

    group_id: str
    generation: Int32
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.HEARTBEAT
    API_VERSION: ClassVar[int] = 0

    error_code: KnownErrorCode


class LeavingMember(NamedTuple):
    """An empty member id with an instance id removes that static member (admin removal,
    LeaveGroup v3+)."""

    member_id: str
    group_instance_id: str | None


class LeftMember(NamedTuple):
    member_id: str
    group_instance_id: str | None
    error_code: KnownErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.LEAVE_GROUP
    API_VERSION: ClassVar[int] = 0

    group_id: str
    members: tuple[LeavingMember, ...]


@dataclass(frozen=True, slots=True)
class LeaveGroupResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.LEAVE_GROUP
    API_VERSION: ClassVar[int] = 0

    error_code: KnownErrorCode
    members: tuple[LeftMember, ...] = ()


# --- offsets ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    offset: int
    leader_epoch: Int32 = NO_LEADER_EPOCH
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class OffsetCommitRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.OFFSET_COMMIT
    API_VERSION: ClassVar[int] = 0

    group_id: str
    offsets: tuple[tuple[TopicPartition, PartitionCommit], ...]
    generation: Int32 = NO_GENERATION
    """The classic generation, or the member epoch for a server-side group; -1 = none."""
    member_id: str = ""
    group_instance_id: str | None = None
    retention_ms: int | None = None
    """OffsetCommit v2-v4's explicit retention; None = the broker's default."""


@dataclass(frozen=True, slots=True)
class OffsetCommitResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.OFFSET_COMMIT
    API_VERSION: ClassVar[int] = 0

    error_code: ErrorCode16
    """Top-level: NONE when the partitions carry their own codes."""
    partitions: tuple[tuple[TopicPartition, int], ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetFetchRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.OFFSET_FETCH
    API_VERSION: ClassVar[int] = 0

    group_id: str
    partitions: tuple[TopicPartition, ...] | None = None
    """None = every committed partition of the group."""


class FetchedOffset(NamedTuple):
    """One partition's committed offset; -1 and no epoch where the group committed none."""

    topic: str
    partition: Annotated[int, Range(0, INT32_MAX)]
    offset: int = UNKNOWN_OFFSET
    leader_epoch: Int32 = NO_LEADER_EPOCH
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class OffsetFetchResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.OFFSET_FETCH
    API_VERSION: ClassVar[int] = 0

    error_code: KnownErrorCode
    offsets: tuple[FetchedOffset, ...] = ()


# --- server-side protocol (ConsumerGroupHeartbeat shape) ---------------------------------

DEFAULT_SERVER_ASSIGNOR: Final = "uniform"
"""The assignor a server-side group uses unless configured otherwise (Kafka's name for it, as
a member's `group.remote.assignor` gives it)."""
JOIN_EPOCH: Final = 0
LEAVE_EPOCH: Final = -1
STATIC_LEAVE_EPOCH: Final = -2


@dataclass(frozen=True, slots=True)
class GroupHeartbeatRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.CONSUMER_GROUP_HEARTBEAT
    API_VERSION: ClassVar[int] = 0

    group_id: str
    member_id: Annotated[str, Absent("")]
    member_epoch: Int32
    """0 = join (or rejoin after fencing), > 0 = heartbeat, -1 = leave, -2 = static leave."""
    group_instance_id: str | None = None
    rebalance_timeout_ms: Int32 | None = None
    subscribed_topics: tuple[str, ...] | None = None
    """None = unchanged since the last heartbeat."""
    owned: tuple[TopicPartition, ...] | None = None
    """The partitions the member still holds; None = unchanged."""
    client_id: str = ""
    client_host: str = ""
    max_wait_ms: Annotated[int, Range(0, INT32_MAX)] = 0
    """How long the coordinator may hold the answer while nothing changes for the member (a
    long poll, docs/groups.md §7); 0 = answer at once, as Kafka's coordinator does."""


@dataclass(frozen=True, slots=True)
class GroupHeartbeatResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.CONSUMER_GROUP_HEARTBEAT
    API_VERSION: ClassVar[int] = 0

    error_code: KnownErrorCode
    message: str = ""
    member_id: str = ""
    member_epoch: Int32 = 0
    heartbeat_interval_ms: Int32 = 0
    session_timeout_ms: Int32 = 0
    assignment: tuple[TopicPartition, ...] | None = None
    """The member's full assignment when it changed (or on a join); None = unchanged."""


# --- admin --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DescribeGroupsRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_GROUPS
    API_VERSION: ClassVar[int] = 0

    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes = b""
    assignment: bytes = b""
    member_epoch: Int32 = NO_GENERATION


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    error_code: KnownErrorCode
    state: str
    protocol_type: str = ""
    protocol_name: str = ""
    group_type: str = "classic"
    epoch: Int32 = NO_GENERATION
    """Generation (classic) or group epoch (server-side)."""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeGroupsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_GROUPS
    API_VERSION: ClassVar[int] = 0

    groups: tuple[GroupDescription, ...]


@dataclass(frozen=True, slots=True)
class ListGroupsRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.LIST_GROUPS
    API_VERSION: ClassVar[int] = 0

    states: frozenset[str] = field(default_factory=frozenset)
    """Empty = every state (KIP-518)."""
    types: frozenset[str] = field(default_factory=frozenset)
    """"classic" / "consumer"; empty = both."""


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str


@dataclass(frozen=True, slots=True)
class ListGroupsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.LIST_GROUPS
    API_VERSION: ClassVar[int] = 0

    error_code: KnownErrorCode
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteGroupsRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DELETE_GROUPS
    API_VERSION: ClassVar[int] = 0

    group_ids: tuple[str, ...]


class DeletedGroup(NamedTuple):
    group_id: str
    error_code: KnownErrorCode


@dataclass(frozen=True, slots=True)
class DeleteGroupsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DELETE_GROUPS
    API_VERSION: ClassVar[int] = 0

    results: tuple[DeletedGroup, ...]


# --- discovery ----------------------------------------------------------------------------

GROUP_KEY_TYPE: Final = 0
"""FindCoordinator's key type for a consumer group (Kafka's 1, transactions, is not served)."""


@dataclass(frozen=True, slots=True)
class FindCoordinatorRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.FIND_COORDINATOR
    API_VERSION: ClassVar[int] = 0

    key: str
    key_type: Int8 = GROUP_KEY_TYPE


@dataclass(frozen=True, slots=True)
class FindCoordinatorResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.FIND_COORDINATOR
    API_VERSION: ClassVar[int] = 0

    error_code: ErrorCode16
    error_message: str = ""
    node_id: Int32 = -1
    endpoint: str = ""
    """The data endpoint of the worker leading the group's offsets partition."""


GroupRequest: TypeAlias = (
    JoinGroupRequestV0 | SyncGroupRequestV0 | HeartbeatRequestV0 | LeaveGroupRequestV0
    | OffsetCommitRequestV0 | OffsetFetchRequestV0 | GroupHeartbeatRequestV0
    | DescribeGroupsRequestV0 | ListGroupsRequestV0 | DeleteGroupsRequestV0
)
"""What a coordinator answers: the requests a worker leading an offsets partition serves."""
GroupResponse: TypeAlias = (
    JoinGroupResponseV0 | SyncGroupResponseV0 | HeartbeatResponseV0 | LeaveGroupResponseV0
    | OffsetCommitResponseV0 | OffsetFetchResponseV0 | GroupHeartbeatResponseV0
    | DescribeGroupsResponseV0 | ListGroupsResponseV0 | DeleteGroupsResponseV0
)
GROUP_REQUEST_TYPES: Final = get_args(GroupRequest)
GROUP_RESPONSE_TYPES: Final = get_args(GroupResponse)
