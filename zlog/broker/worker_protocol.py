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

Both sides encode and decode with the functions here, so the two can no longer drift apart; a
new message is a new class in `TO_WORKER` or `FROM_WORKER`. The checks here are about shape
(types and ranges); what a valid topic name or config is stays with the code that acts on it.
A message that does not decode is a `WorkerProtocolError`, which carries the request id when
one could be read, so that a request is still answered (with the error) whenever possible.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Final, TypeAlias

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.groups.config import GroupConfig
from zlog.transport.json_fields import Fields, parse_json_object
from zlog.transport.wire import INT16_MAX, INT16_MIN, INT32_MAX
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
    worker_id: int
    pid: int  # tells a restarted process from a late message of its predecessor
    endpoint: str  # the data ROUTER, as clients must spell it: tcp://host:port

    @classmethod
    def from_fields(cls, f: Fields) -> Hello:
        return cls(f.integer("worker_id", low=0, high=WORKER_ID_MAX),
                   f.integer("pid", low=1, high=PID_MAX), f.text("endpoint"))


@dataclass(frozen=True, slots=True)
class Heartbeat:
    TYPE: ClassVar[str] = "heartbeat"
    worker_id: int

    @classmethod
    def from_fields(cls, f: Fields) -> Heartbeat:
        return cls(f.integer("worker_id", low=0, high=WORKER_ID_MAX))


@dataclass(frozen=True, slots=True)
class Assign:
    """Open the partition, or take a new epoch, role, ISR or configs if it is open already.

    The fields after `is_leader` carry the partition's record for replication; their defaults
    describe a partition with this broker as its only replica (a single node, or a caller
    that has only the role to say).
    """

    TYPE: ClassVar[str] = "assign"
    request_id: int
    topic: str
    partition: int
    configs: Mapping[str, str] = field(default_factory=dict)  # effective topic configs
    leader_epoch: int = 0
    is_leader: bool = True
    broker_id: int = -1  # this broker (-1: the only replica, whatever its id)
    broker_epoch: int = -1  # this broker's registration, sent with its follower fetches
    leader: int = -1  # the leader's broker id (-1: none, or this broker when it leads)
    partition_epoch: int = 0  # the record these fields come from
    replicas: tuple[int, ...] = ()  # broker ids, preferred leader first (): this broker only)
    isr: tuple[int, ...] = ()  # in-sync replicas (() : this broker only)
    leader_endpoint: str = ""  # the data endpoint of the leader's worker, for a follower
    disk_share_bytes: int = -1  # this partition's part of its topic's disk budget (-1: none)
    topic_id: str = NO_TOPIC_ID  # the topic's id (KIP-516): its directory must carry the same
    # For a leader: replicas whose brokers may not join the ISR now (fenced, shutting down,
    # KIP-841): its HW does not wait for them outside the ISR.
    ineligible: tuple[int, ...] = ()

    @classmethod
    def from_fields(cls, f: Fields) -> Assign:
        return cls(_request_id(f), f.text("topic"),
                   f.integer("partition", low=0, high=PARTITION_INDEX_MAX),
                   f.text_map("configs"),
                   f.integer("leader_epoch", low=0, high=LEADER_EPOCH_MAX, default=0),
                   f.boolean("is_leader", default=True),
                   f.integer("broker_id", low=-1, high=BROKER_ID_MAX, default=-1),
                   f.integer("broker_epoch", low=-1, default=-1),
                   f.integer("leader", low=-1, high=BROKER_ID_MAX, default=-1),
                   f.integer("partition_epoch", low=0, high=LEADER_EPOCH_MAX, default=0),
                   f.integers("replicas", low=0, high=BROKER_ID_MAX) if f.has("replicas")
                   else (),
                   f.integers("isr", low=0, high=BROKER_ID_MAX) if f.has("isr") else (),
                   f.text("leader_endpoint", default=""),
                   f.integer("disk_share_bytes", low=-1, default=-1),
                   _topic_id(f),
                   f.integers("ineligible", low=0, high=BROKER_ID_MAX)
                   if f.has("ineligible") else ())


@dataclass(frozen=True, slots=True)
class Unassign:
    """Close the partition (its ring flushed into its segments), or delete its data."""

    TYPE: ClassVar[str] = "unassign"
    request_id: int
    topic: str
    partition: int
    delete: bool = False

    @classmethod
    def from_fields(cls, f: Fields) -> Unassign:
        return cls(_request_id(f), f.text("topic"),
                   f.integer("partition", low=0, high=PARTITION_INDEX_MAX),
                   f.boolean("delete", default=False))


@dataclass(frozen=True, slots=True)
class Stop:
    TYPE: ClassVar[str] = "stop"

    @classmethod
    def from_fields(cls, f: Fields) -> Stop:
        del f
        return cls()


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
    until_ms: int

    @classmethod
    def from_fields(cls, f: Fields) -> Lease:
        return cls(f.integer("until_ms", low=-1))


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """What a worker's group coordinators need from the supervisor: the partition count of
    every topic (which offsets partition owns a group; server-side groups' assignments) and
    the broker's group configs. Sent to each worker when it says hello and on every change."""

    TYPE: ClassVar[str] = "group-settings"
    partition_counts: Mapping[str, int]
    initial_rebalance_delay_ms: int
    min_session_timeout_ms: int
    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int
    offsets_retention_ms: int = GROUP_DEFAULTS.offsets_retention_ms
    offsets_retention_check_interval_ms: int = GROUP_DEFAULTS.offsets_retention_check_interval_ms

    @classmethod
    def from_fields(cls, f: Fields) -> GroupSettings:
        counts = f.text_map_any("partition_counts")
        for name, count in counts.items():
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise f.fail(f"partition_counts[{name!r}] must be a positive integer")
        return cls({k: int(v) for k, v in counts.items()},  # type: ignore[call-overload]
                   f.integer("initial_rebalance_delay_ms", low=0, high=INT32_MAX),
                   f.integer("min_session_timeout_ms", low=0, high=INT32_MAX),
                   f.integer("consumer_session_timeout_ms", low=1, high=INT32_MAX),
                   f.integer("consumer_heartbeat_interval_ms", low=1, high=INT32_MAX),
                   f.integer("offsets_retention_ms", low=1, high=2**53 - 1),
                   f.integer("offsets_retention_check_interval_ms", low=1, high=INT32_MAX))


@dataclass(frozen=True, slots=True)
class Assigned:
    """The answer to an Assign: 0, or the Kafka code and sentence of why it failed."""

    TYPE: ClassVar[str] = "assigned"
    request_id: int
    error_code: int = 0
    error_message: str = ""

    @classmethod
    def from_fields(cls, f: Fields) -> Assigned:
        return cls(*_answer(f))


@dataclass(frozen=True, slots=True)
class Unassigned:
    """The answer to an Unassign, shaped as Assigned."""

    TYPE: ClassVar[str] = "unassigned"
    request_id: int
    error_code: int = 0
    error_message: str = ""

    @classmethod
    def from_fields(cls, f: Fields) -> Unassigned:
        return cls(*_answer(f))


@dataclass(frozen=True, slots=True)
class AlterIsr:
    """A leader's ISR change (AlterPartition) for its supervisor to take to the controller."""

    TYPE: ClassVar[str] = "alter_isr"
    request_id: int
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int  # the record the new ISR was computed from
    new_isr: tuple[int, ...]
    member_epochs: Mapping[int, int] = field(default_factory=dict)  # broker -> epoch it fetched

    def to_json(self) -> dict[str, object]:
        return {"request_id": self.request_id, "topic": self.topic, "partition": self.partition,
                "leader_epoch": self.leader_epoch, "partition_epoch": self.partition_epoch,
                "new_isr": list(self.new_isr),
                "member_epochs": {str(k): v for k, v in self.member_epochs.items()}}

    @classmethod
    def from_fields(cls, f: Fields) -> AlterIsr:
        epochs: dict[int, int] = {}
        for key, value in f.text_map_any("member_epochs").items():
            if not key.isdigit() or isinstance(value, bool) or not isinstance(value, int):
                raise f.fail("member_epochs maps broker ids to broker epochs")
            epochs[int(key)] = value
        return cls(_request_id(f), f.text("topic"),
                   f.integer("partition", low=0, high=PARTITION_INDEX_MAX),
                   f.integer("leader_epoch", low=0, high=LEADER_EPOCH_MAX),
                   f.integer("partition_epoch", low=0, high=LEADER_EPOCH_MAX),
                   f.integers("new_isr", low=0, high=BROKER_ID_MAX), epochs)


@dataclass(frozen=True, slots=True)
class AlterIsrAnswer:
    """The controller's answer to an AlterIsr: 0 once committed, else why not. The committed
    record itself reaches the worker as an Assign."""

    TYPE: ClassVar[str] = "alter_isr_answer"
    request_id: int
    error_code: int = 0
    error_message: str = ""

    @classmethod
    def from_fields(cls, f: Fields) -> AlterIsrAnswer:
        return cls(*_answer(f))


ToWorker: TypeAlias = Assign | Unassign | Stop | AlterIsrAnswer | Lease | GroupSettings
FromWorker: TypeAlias = Hello | Heartbeat | Assigned | Unassigned | AlterIsr
TO_WORKER: Final[dict[str, type[ToWorker]]] = {
    kind.TYPE: kind for kind in (Assign, Unassign, Stop, AlterIsrAnswer, Lease,
                                 GroupSettings)
}
FROM_WORKER: Final[dict[str, type[FromWorker]]] = {
    kind.TYPE: kind for kind in (Hello, Heartbeat, Assigned, Unassigned, AlterIsr)
}


def _request_id(f: Fields) -> int:
    return f.integer("request_id", low=0, high=REQUEST_ID_MAX)


def _topic_id(f: Fields) -> str:
    topic_id = f.text("topic_id", default=NO_TOPIC_ID)
    if topic_id != NO_TOPIC_ID and not valid_topic_id(topic_id):
        raise f.fail("topic_id must be 32 lowercase hex digits")
    return topic_id


def _answer(f: Fields) -> tuple[int, int, str]:
    return (_request_id(f), f.integer("error_code", low=INT16_MIN, high=INT16_MAX, default=0),
            f.text("error_message", default=""))


def encode(message: ToWorker | FromWorker) -> bytes:
    """One frame: the message's fields and its `type`."""
    body: dict[str, Any] = {"type": message.TYPE}
    if isinstance(message, AlterIsr):
        body.update(message.to_json())
    else:
        for item in fields(message):
            value = getattr(message, item.name)
            body[item.name] = (dict(value) if isinstance(value, Mapping)
                               else list(value) if isinstance(value, tuple) else value)
    encoded = json.dumps(body, separators=(",", ":")).encode()
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
        return kind.from_fields(f)
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
