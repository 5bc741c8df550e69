"""The consumer-group requests and their responses, as plain values (JSON bodies on the wire,
but OffsetCommit's, which are structs: offset_commit_bodies.py).

Field names follow Kafka's request schemas and the api keys are Kafka's (OffsetCommit 8 to
ListGroups 16, DeleteGroups 42, ConsumerGroupHeartbeat 68 as `GroupHeartbeatRequest`). The same
values are what the pure coordinator (`zlog.groups`) takes and returns, so the worker hands a
decoded request to it as it is. Every request carries `request_id`, the driver's handle for the
reply: a coordinator may park a request (JoinGroup, SyncGroup) and answer it in the output of a
later event. It is not on the wire; a decoded request has 0 until its worker sets its own.

FindCoordinator (key 10) goes to any broker's control endpoint and names the data endpoint of
the worker that leads the group's `__consumer_offsets` partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Final, TypeAlias, get_args

from zlog.errors import ErrorCode
from zlog.transport.api import ApiKey
from zlog.types import NO_GENERATION, NO_LEADER_EPOCH, TopicPartition

UNKNOWN_OFFSET: Final = -1
NO_REQUEST_ID: Final = 0
"""The request id of a request just decoded: its worker sets its own handle."""


# --- classic protocol ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.JOIN_GROUP
    API_VERSION: ClassVar[int] = 0

    request_id: int
    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    """(assignor name, subscription bytes) in the member's order of preference."""
    session_timeout_ms: int
    rebalance_timeout_ms: int
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
class JoinGroupResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.JOIN_GROUP
    API_VERSION: ClassVar[int] = 0

    error: ErrorCode
    member_id: str = ""
    generation: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    """KIP-814: the leader rejoined as a replacing static member and must not re-assign."""
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.SYNC_GROUP
    API_VERSION: ClassVar[int] = 0

    request_id: int
    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()
    """(member id, assignment bytes): only the leader sends them."""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.SYNC_GROUP
    API_VERSION: ClassVar[int] = 0

    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.HEARTBEAT
    API_VERSION: ClassVar[int] = 0

    request_id: int
    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.HEARTBEAT
    API_VERSION: ClassVar[int] = 0

    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.LEAVE_GROUP
    API_VERSION: ClassVar[int] = 0

    request_id: int
    group_id: str
    members: tuple[tuple[str, str | None], ...]
    """(member id, group instance id); an empty member id with an instance id removes that
    static member (admin removal, LeaveGroup v3+)."""


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.LEAVE_GROUP
    API_VERSION: ClassVar[int] = 0

    error: ErrorCode
    members: tuple[tuple[str, str | None, ErrorCode], ...] = ()


# --- offsets ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.OFFSET_COMMIT
    API_VERSION: ClassVar[int] = 0

    request_id: int
    group_id: str
    offsets: tuple[tuple[TopicPartition, PartitionCommit], ...]
    generation: int = NO_GENERATION
    """The classic generation, or the member epoch for a server-side group; -1 = none."""
    member_id: str = ""
    group_instance_id: str | None = None
    retention_ms: int | None = None
    """OffsetCommit v2-v4's explicit retention; None = the broker's default."""


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.OFFSET_COMMIT
    API_VERSION: ClassVar[int] = 0

    error: ErrorCode
    """Top-level: NONE when the partitions carry their own codes."""
    partitions: tuple[tuple[TopicPartition, ErrorCode], ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.OFFSET_FETCH
    API_VERSION: ClassVar[int] = 0

    request_id: int
    group_id: str
    partitions: tuple[TopicPartition, ...] | None = None
    """None = every committed partition of the group."""


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    offset: int = UNKNOWN_OFFSET
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.OFFSET_FETCH
    API_VERSION: ClassVar[int] = 0

    error: ErrorCode
    offsets: tuple[tuple[TopicPartition, FetchedOffset], ...] = ()


# --- server-side protocol (ConsumerGroupHeartbeat shape) ---------------------------------

JOIN_EPOCH: Final = 0
LEAVE_EPOCH: Final = -1
STATIC_LEAVE_EPOCH: Final = -2


@dataclass(frozen=True, slots=True)
class GroupHeartbeatRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.CONSUMER_GROUP_HEARTBEAT
    API_VERSION: ClassVar[int] = 0

    request_id: int
    group_id: str
    member_id: str
    member_epoch: int
    """0 = join (or rejoin after fencing), > 0 = heartbeat, -1 = leave, -2 = static leave."""
    group_instance_id: str | None = None
    rebalance_timeout_ms: int | None = None
    subscribed_topics: tuple[str, ...] | None = None
    """None = unchanged since the last heartbeat."""
    owned: tuple[TopicPartition, ...] | None = None
    """The partitions the member still holds; None = unchanged."""
    client_id: str = ""
    client_host: str = ""
    max_wait_ms: int = 0
    """How long the coordinator may hold the answer while nothing changes for the member (a
    long poll, docs/groups.md §7); 0 = answer at once, as Kafka's coordinator does."""


@dataclass(frozen=True, slots=True)
class GroupHeartbeatResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.CONSUMER_GROUP_HEARTBEAT
    API_VERSION: ClassVar[int] = 0

    error: ErrorCode
    message: str = ""
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    session_timeout_ms: int = 0
    assignment: tuple[TopicPartition, ...] | None = None
    """The member's full assignment when it changed (or on a join); None = unchanged."""


# --- admin --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DescribeGroupsRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_GROUPS
    API_VERSION: ClassVar[int] = 0

    request_id: int
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes = b""
    assignment: bytes = b""
    member_epoch: int = NO_GENERATION


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str = ""
    protocol_name: str = ""
    group_type: str = "classic"
    epoch: int = NO_GENERATION
    """Generation (classic) or group epoch (server-side)."""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeGroupsResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_GROUPS
    API_VERSION: ClassVar[int] = 0

    groups: tuple[GroupDescription, ...]


@dataclass(frozen=True, slots=True)
class ListGroupsRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.LIST_GROUPS
    API_VERSION: ClassVar[int] = 0

    request_id: int
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
class ListGroupsResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.LIST_GROUPS
    API_VERSION: ClassVar[int] = 0

    error: ErrorCode
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteGroupsRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.DELETE_GROUPS
    API_VERSION: ClassVar[int] = 0

    request_id: int
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteGroupsResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.DELETE_GROUPS
    API_VERSION: ClassVar[int] = 0

    results: tuple[tuple[str, ErrorCode], ...]


# --- discovery ----------------------------------------------------------------------------

GROUP_KEY_TYPE: Final = 0
"""FindCoordinator's key type for a consumer group (Kafka's 1, transactions, is not served)."""


@dataclass(frozen=True, slots=True)
class FindCoordinatorRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.FIND_COORDINATOR
    API_VERSION: ClassVar[int] = 0

    key: str
    key_type: int = GROUP_KEY_TYPE


@dataclass(frozen=True, slots=True)
class FindCoordinatorResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.FIND_COORDINATOR
    API_VERSION: ClassVar[int] = 0

    error_code: int
    error_message: str = ""
    node_id: int = -1
    endpoint: str = ""
    """The data endpoint of the worker leading the group's offsets partition."""


GroupRequest: TypeAlias = (
    JoinGroupRequest | SyncGroupRequest | HeartbeatRequest | LeaveGroupRequest
    | OffsetCommitRequest | OffsetFetchRequest | GroupHeartbeatRequest
    | DescribeGroupsRequest | ListGroupsRequest | DeleteGroupsRequest
)
"""What a coordinator answers: the requests a worker leading an offsets partition serves."""
GroupResponse: TypeAlias = (
    JoinGroupResponse | SyncGroupResponse | HeartbeatResponse | LeaveGroupResponse
    | OffsetCommitResponse | OffsetFetchResponse | GroupHeartbeatResponse
    | DescribeGroupsResponse | ListGroupsResponse | DeleteGroupsResponse
)
GroupMessage: TypeAlias = (
    GroupRequest | GroupResponse | FindCoordinatorRequestV0 | FindCoordinatorResponseV0
)
GROUP_REQUEST_TYPES: Final = get_args(GroupRequest)
GROUP_RESPONSE_TYPES: Final = get_args(GroupResponse)
