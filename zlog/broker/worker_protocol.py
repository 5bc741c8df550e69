"""The messages between a supervisor and its partition workers, both directions, typed.

The channel is a ROUTER in the supervisor and one DEALER per worker (identity `worker-N`) over
ipc; each message is one JSON object in one frame, with a `type` field naming its class:

    worker -> Hello(worker_id, pid, endpoint)          once its data ROUTER is bound
    worker -> Heartbeat(worker_id)                     every HEARTBEAT_INTERVAL_MS
    sup    -> Assign(request_id, topic, partition, configs, leader_epoch, is_leader, ...,
                     disk_share_bytes)
    worker -> Assigned(request_id, error_code, error_message)
    sup    -> Unassign(request_id, topic, partition, delete)
    worker -> Unassigned(request_id, error_code, error_message)
    sup    -> Stop()                                   answer parked requests, flush, exit 0
    sup    -> Lease(until_ms)                          lead only until then (monotonic ms)
    worker -> AlterIsr(request_id, topic, partition, leader_epoch, partition_epoch, new_isr,
                       member_epochs)                  a leader's ISR change, for the controller
    sup    -> AlterIsrAnswer(request_id, error_code, error_message)
    sup    -> GroupSettings(partition_counts, group configs)   on hello and on every change
    sup    -> SecuritySettings(acls, super_users, quotas, users) the same, with security on

Both sides encode and decode with the functions here, so the two can no longer drift apart; a
new message is a new class in `TO_WORKER` or `FROM_WORKER`, its fields' annotations its shape
(the transport's json_codec reads them). The checks are about shape (types and ranges); what a
valid topic name or config is stays with the code that acts on it.
A message that does not decode is a `WorkerProtocolError`, which carries the request id when
one could be read, so that a request is still answered (with the error) whenever possible.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, ClassVar, Final, TypeAlias

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.groups.config import GroupConfig
from zlog.transport.json_codec import from_fields, to_json
from zlog.transport.json_fields import Fields, parse_json_object
from zlog.transport.messages.cluster import MemberEpochs
from zlog.transport.messages.security import AclEntry, QuotaEntry, ScramUser
from zlog.transport.wire import INT32_MAX
from zlog.transport.wire_types import AtLeast, Check, ErrorCode16, Range, Sentence, Sparse
from zlog.types import BROKER_ID_MAX, NO_TOPIC_ID, valid_topic_id

HEARTBEAT_INTERVAL_MS: Final = 500
"""How often a worker says it is alive; the supervisor restarts one silent for its
worker_heartbeat_timeout_ms."""
REQUEST_ID_MAX: Final = 2**53 - 1  # JSON numbers stay exact up to here
PARTITION_INDEX_MAX: Final = INT32_MAX
LEADER_EPOCH_MAX: Final = INT32_MAX
WORKER_ID_MAX: Final = 65_535
PID_MAX: Final = 2**22  # Linux's pid_max ceiling
GROUP_DEFAULTS: Final = GroupConfig()


RequestId = Annotated[int, Range(0, REQUEST_ID_MAX)]
PartitionIndex = Annotated[int, Range(0, PARTITION_INDEX_MAX)]
LeaderEpoch = Annotated[int, Range(0, LEADER_EPOCH_MAX)]
BrokerIdOrNone = Annotated[int, Range(-1, BROKER_ID_MAX)]
BrokerIds = tuple[Annotated[int, Range(0, BROKER_ID_MAX)], ...]
WorkerId = Annotated[int, Range(0, WORKER_ID_MAX)]
Interval32 = Annotated[int, Range(1, INT32_MAX)]
TopicId = Annotated[str, Check(lambda topic_id: topic_id == NO_TOPIC_ID or valid_topic_id(topic_id),
                               "must be 32 lowercase hex digits")]


class WorkerProtocolError(ZlogError):
    """A frame that is not a message of this protocol (logged by the receiver)."""

    def __init__(
        self, code: ErrorCode, message: str, kind: str = "", request_id: int | None = None
    ) -> None:
        super().__init__(code, message)
        self.kind = kind  # the message's `type` when it could be read
        self.request_id = request_id


@dataclass(frozen=True, slots=True)
class Hello:
    """A worker's first message once its data endpoint is bound: where clients reach it."""

    TYPE: ClassVar[str] = "hello"
    worker_id: WorkerId
    pid: Annotated[int, Range(1, PID_MAX)]  # tells a restarted process from a late message
    endpoint: str  # the data ROUTER, as clients must spell it: tcp://host:port
    kafka_endpoint: Annotated[str, Sparse] = ""  # its Kafka port, host:port ("": none)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    TYPE: ClassVar[str] = "heartbeat"
    worker_id: WorkerId


@dataclass(frozen=True, slots=True)
class Assign:
    """Open the partition, or take a new epoch, role, ISR or configs if it is open already.

    The fields after `is_leader` carry the partition's record for replication; their defaults
    describe a partition with this broker as its only replica (a single node, or a caller
    that has only the role to say).
    """

    TYPE: ClassVar[str] = "assign"
    request_id: RequestId
    topic: str
    partition: PartitionIndex
    configs: Mapping[str, str] = field(default_factory=dict)  # effective topic configs
    leader_epoch: LeaderEpoch = 0
    is_leader: bool = True
    broker_id: BrokerIdOrNone = -1  # this broker (-1: the only replica, whatever its id)
    broker_epoch: Annotated[int, AtLeast(-1)] = -1  # its registration, sent with its fetches
    leader: BrokerIdOrNone = -1  # the leader's broker id (-1: none, or this broker)
    partition_epoch: LeaderEpoch = 0  # the record these fields come from
    replicas: BrokerIds = ()  # broker ids, preferred leader first (): this broker only)
    isr: BrokerIds = ()  # in-sync replicas (() : this broker only)
    leader_endpoint: str = ""  # the data endpoint of the leader's worker, for a follower
    disk_share_bytes: Annotated[int, AtLeast(-1)] = -1  # its part of its topic's disk budget
    topic_id: TopicId = NO_TOPIC_ID  # the topic's id (KIP-516): its directory must carry it
    # For a leader: replicas whose brokers may not join the ISR now (fenced, shutting down,
    # KIP-841): its HW does not wait for them outside the ISR.
    ineligible: BrokerIds = ()


@dataclass(frozen=True, slots=True)
class Unassign:
    """Close the partition (its ring flushed into its segments), or delete its data."""

    TYPE: ClassVar[str] = "unassign"
    request_id: RequestId
    topic: str
    partition: PartitionIndex
    delete: bool = False


@dataclass(frozen=True, slots=True)
class Stop:
    TYPE: ClassVar[str] = "stop"


@dataclass(frozen=True, slots=True)
class Lease:
    """Until when this broker's leaderships stand, on the host's monotonic clock (the
    supervisor's and the workers' `monotonic_ms` read the same CLOCK_MONOTONIC).

    The controller fences a broker silent for its session; a leader that kept taking writes
    past that could take them beside its replacement. So a broker leads only while it has
    heard from the controller within a session: `until_ms` is when its last answered
    heartbeat was sent plus the session timeout, never later than the controller's own
    deadline for it. A worker whose lease ran out refuses produce with
    NOT_LEADER_OR_FOLLOWER (clients refresh and find the new leader). -1: no lease (a single
    node, its own controller)."""

    TYPE: ClassVar[str] = "lease"
    until_ms: Annotated[int, AtLeast(-1)]


PartitionCounts = Annotated[Mapping[str, Annotated[int, AtLeast(1)]],
                            Sentence("{field}[{key!r}] must be a positive integer")]


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """What a worker's group coordinators need from the supervisor: the partition count of
    every topic (which offsets partition owns a group; server-side groups' assignments) and
    the broker's group configs. Sent to each worker when it says hello and on every change."""

    TYPE: ClassVar[str] = "group-settings"
    partition_counts: PartitionCounts
    initial_rebalance_delay_ms: Annotated[int, Range(0, INT32_MAX)]
    min_session_timeout_ms: Annotated[int, Range(0, INT32_MAX)]
    consumer_session_timeout_ms: Interval32
    consumer_heartbeat_interval_ms: Interval32
    offsets_retention_ms: Annotated[int, Range(1, 2**53 - 1)] = (
        GROUP_DEFAULTS.offsets_retention_ms)
    offsets_retention_check_interval_ms: Interval32 = (
        GROUP_DEFAULTS.offsets_retention_check_interval_ms)


@dataclass(frozen=True, slots=True)
class Assigned:
    """The answer to an Assign: 0, or the Kafka code and sentence of why it failed."""

    TYPE: ClassVar[str] = "assigned"
    request_id: RequestId
    error_code: ErrorCode16 = 0
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class Unassigned:
    """The answer to an Unassign, shaped as Assigned."""

    TYPE: ClassVar[str] = "unassigned"
    request_id: RequestId
    error_code: ErrorCode16 = 0
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class AlterIsr:
    """A leader's ISR change (AlterPartition) for its supervisor to take to the controller."""

    TYPE: ClassVar[str] = "alter_isr"
    request_id: RequestId
    topic: str
    partition: PartitionIndex
    leader_epoch: LeaderEpoch
    partition_epoch: LeaderEpoch  # the record the new ISR was computed from
    new_isr: BrokerIds
    member_epochs: MemberEpochs = field(default_factory=dict)  # broker -> epoch it fetched


@dataclass(frozen=True, slots=True)
class AlterIsrAnswer:
    """The controller's answer to an AlterIsr: 0 once committed, else why not. The committed
    record itself reaches the worker as an Assign."""

    TYPE: ClassVar[str] = "alter_isr_answer"
    request_id: RequestId
    error_code: ErrorCode16 = 0
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class SecuritySettings:
    """With security on, what a worker's data endpoint enforces: the ACLs and quotas of the
    metadata log and the broker's super-users, and the SASL users its Kafka port logs clients
    in with (their SCRAM credentials: the channel is CURVE too). Sent when it says hello
    (before any assign) and on every change."""

    TYPE: ClassVar[str] = "security-settings"
    acls: tuple[AclEntry, ...]
    super_users: tuple[str, ...]
    quotas: tuple[QuotaEntry, ...] = ()
    users: Annotated[tuple[ScramUser, ...], Sparse] = ()


ToWorker: TypeAlias = (Assign | Unassign | Stop | AlterIsrAnswer | Lease | GroupSettings
                       | SecuritySettings)
FromWorker: TypeAlias = Hello | Heartbeat | Assigned | Unassigned | AlterIsr
TO_WORKER: Final[dict[str, type[ToWorker]]] = {
    kind.TYPE: kind for kind in (Assign, Unassign, Stop, AlterIsrAnswer, Lease,
                                 GroupSettings, SecuritySettings)
}
FROM_WORKER: Final[dict[str, type[FromWorker]]] = {
    kind.TYPE: kind for kind in (Hello, Heartbeat, Assigned, Unassigned, AlterIsr)
}


def encode(message: ToWorker | FromWorker) -> bytes:
    """One frame: the message's fields and its `type`."""
    encoded = json.dumps({"type": message.TYPE, **to_json(message)},
                         separators=(",", ":")).encode()
    assert len(encoded) <= limits.WORKER_MESSAGE_BYTES_MAX, (message.TYPE, len(encoded))
    return encoded


def decode_to_worker(frame: bytes | str | memoryview) -> ToWorker:
    """A supervisor's message, or WorkerProtocolError."""
    return _decode(frame, TO_WORKER)  # type: ignore[return-value]


def decode_from_worker(frame: bytes | str | memoryview) -> FromWorker:
    """A worker's message, or WorkerProtocolError."""
    return _decode(frame, FROM_WORKER)  # type: ignore[return-value]


def _decode(
    frame: bytes | str | memoryview, kinds: Mapping[str, type[ToWorker | FromWorker]]
) -> ToWorker | FromWorker:
    view = memoryview(frame.encode() if isinstance(frame, str) else frame)
    if view.nbytes > limits.WORKER_MESSAGE_BYTES_MAX:
        raise WorkerProtocolError(ErrorCode.INVALID_REQUEST,
                                  f"a message of {view.nbytes} bytes exceeds the bound")
    try:
        f = parse_json_object(view, ErrorCode.INVALID_REQUEST, "message")
        kind_name = f.text("type")
    except ZlogError as error:
        raise WorkerProtocolError(error.code, error.message) from None
    kind = kinds.get(kind_name)
    if kind is None:
        raise WorkerProtocolError(
            ErrorCode.INVALID_REQUEST, f"unknown message type {kind_name!r}", kind_name
        )
    try:
        return from_fields(kind, f)
    except ZlogError as error:
        raise WorkerProtocolError(
            error.code, error.message, kind_name, _readable_request_id(f)
        ) from None


def _readable_request_id(f: Fields) -> int | None:
    """The request id of a request that is wrong elsewhere, so it can still be answered."""
    try:
        return f.optional_integer("request_id", low=0, high=REQUEST_ID_MAX)
    except ZlogError:
        return None
