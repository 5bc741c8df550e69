"""The metadata log's commands and their results, typed: one class each, one codec for all.

Every change to cluster state is one of these, proposed by a supervisor, committed in the
Chained-Raft log, and applied in log order by `metadata.MetadataStateMachine` on every node. A
command travels and is stored as one JSON object whose `type` names its class; the result of
applying it goes back to the proposer as a JSON object `{"error_code", "error_message", ...}`
with the fields of the command's `Result`. The JSON forms are what the log holds, so they only
ever grow: a new command is a new class in `COMMANDS`, a new field has a default, and a form an
earlier version wrote keeps decoding (CreateTopic's `assignment`, below).

Decoding checks shape only (types, ranges, the codes below); what a command means against the
current state (a topic that exists, an epoch that is stale) is checked when it is applied.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Final, TypeAlias, TypeVar

from zlog import limits
from zlog.broker.control.placement import InitialPartition
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.json_fields import Fields, parse_json_object
from zlog.types import BROKER_ID_MAX, NO_TOPIC_ID, valid_topic_id

COMMAND_CODE: Final = ErrorCode.INVALID_REQUEST  # a malformed command's result code
_JSON_SEPARATORS: Final = (",", ":")


# -- results -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Applied:
    """The result of a command that returns nothing but success."""

    @classmethod
    def from_fields(cls, f: Fields) -> Applied:
        del f
        return cls()


@dataclass(frozen=True, slots=True)
class BrokerRegistered:
    cluster_id: str
    broker_epoch: int  # bumped at each registration: tells a restarted broker from its past

    @classmethod
    def from_fields(cls, f: Fields) -> BrokerRegistered:
        return cls(f.text("cluster_id"), f.integer("broker_epoch", low=0))


@dataclass(frozen=True, slots=True)
class TopicCreated:
    topic_seq: int

    @classmethod
    def from_fields(cls, f: Fields) -> TopicCreated:
        return cls(f.integer("topic_seq", low=0))


@dataclass(frozen=True, slots=True)
class PartitionStateSet:
    partition_epoch: int

    @classmethod
    def from_fields(cls, f: Fields) -> PartitionStateSet:
        return cls(f.integer("partition_epoch", low=0))


@dataclass(frozen=True, slots=True)
class ProducerIdsAllocated:
    first_id: int
    count: int

    @classmethod
    def from_fields(cls, f: Fields) -> ProducerIdsAllocated:
        return cls(f.integer("first_id", low=0), f.integer("count", low=1))


Result: TypeAlias = (
    Applied | BrokerRegistered | TopicCreated | PartitionStateSet | ProducerIdsAllocated
)
R = TypeVar("R", bound=Result)


# -- commands ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    """A supervisor (re)joins. `cluster_id` is adopted only by a cluster that has none yet.

    A registration from a new incarnation (a new process) gets a new broker epoch; the same
    incarnation registering again (a retry) keeps its epoch. The fields after `cluster_id`
    came with the cluster: a registration written before them decodes with their defaults.
    """

    TYPE: ClassVar[str] = "RegisterBroker"
    RESULT: ClassVar[type[Result]] = BrokerRegistered
    node_id: int
    host: str  # where clients reach this broker's workers
    control_endpoint: str  # the supervisor's control ROUTER, e.g. tcp://10.0.0.5:7400
    cluster_id: str | None = None
    incarnation_id: str = ""  # new at every start of the supervisor process
    workers: int = 0  # how many partition workers it runs (0: unknown, placed as 1)
    rack: str = ""  # for rack-aware placement; "" for none
    dir_id: str = ""  # the data directory's id: a new one means a wiped disk

    @classmethod
    def from_fields(cls, f: Fields) -> RegisterBroker:
        return cls(f.integer("node_id", low=0, high=BROKER_ID_MAX), _name(f, "host"),
                   _name(f, "control_endpoint"), f.optional_text("cluster_id"),
                   f.text("incarnation_id", default=""),
                   f.integer("workers", low=0, high=limits.WORKERS_MAX, default=0),
                   f.text("rack", default=""), f.text("dir_id", default=""))


@dataclass(frozen=True, slots=True)
class CreateTopic:
    """A new topic with each partition's replica list, in partition order.

    A new partition's state follows from its replicas (leader: the first, epoch 0, ISR: all),
    so only they are written: a topic of tens of thousands of partitions still fits one
    command. Commands written before this form carried an `assignment` list of
    {partition, replicas, leader, leader_epoch, isr}; those decode into `initial`.
    """

    TYPE: ClassVar[str] = "CreateTopic"
    RESULT: ClassVar[type[Result]] = TopicCreated
    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]
    replicas: tuple[tuple[int, ...], ...]
    initial: tuple[InitialPartition, ...] | None = None  # the earlier form's explicit states
    topic_id: str = NO_TOPIC_ID  # made by the proposer; none in commands from before ids

    def initial_partitions(self) -> tuple[InitialPartition, ...]:
        if self.initial is not None:
            return self.initial
        return tuple(InitialPartition(index, replicas, replicas[0] if replicas else -1, 0,
                                      replicas) for index, replicas in enumerate(self.replicas))

    def to_json(self) -> dict[str, Any]:
        assert self.initial is None, "only the compact form is written"
        body: dict[str, Any] = {
            "name": self.name, "partitions": self.partitions,
            "replication_factor": self.replication_factor, "configs": dict(self.configs),
            "replicas": [list(replica_ids) for replica_ids in self.replicas]}
        if self.topic_id != NO_TOPIC_ID:
            body["topic_id"] = self.topic_id
        return body

    @classmethod
    def from_fields(cls, f: Fields) -> CreateTopic:
        # The name is checked against the topic rules when applied, with their own code.
        name = f.text("name")
        count = f.integer("partitions", low=1)
        factor = f.integer("replication_factor", low=1)
        configs = f.recode(ErrorCode.INVALID_CONFIG).text_map("configs")
        shape = f.recode(ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        if f.has("replicas"):
            replicas = shape.integer_lists("replicas", low=0, high=BROKER_ID_MAX)
            initial = None
        else:
            initial = shape.nested_list("assignment", _initial_partition)
            replicas = tuple(entry.replicas for entry in initial)
        if len(replicas) != count:
            raise ZlogError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            "the assignment lists every partition once")
        topic_id = f.text("topic_id", default=NO_TOPIC_ID)
        if topic_id != NO_TOPIC_ID and not valid_topic_id(topic_id):
            raise f.fail("topic_id must be 32 lowercase hex digits")
        return cls(name, count, factor, configs, replicas, initial, topic_id)


@dataclass(frozen=True, slots=True)
class AlterTopicConfigs:
    """The change, not the resulting map: two alterations committed one after the other both
    take effect, whichever the proposer read first (the control plane validated each)."""

    TYPE: ClassVar[str] = "AlterTopicConfigs"
    RESULT: ClassVar[type[Result]] = Applied
    name: str
    set: Mapping[str, str]  # overrides to set, {name: value}
    delete: tuple[str, ...]  # overrides to drop

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "set": dict(self.set), "delete": sorted(self.delete)}

    @classmethod
    def from_fields(cls, f: Fields) -> AlterTopicConfigs:
        configs = f.recode(ErrorCode.INVALID_CONFIG)
        return cls(_name(f, "name"), configs.text_map("set"), configs.texts("delete"))


@dataclass(frozen=True, slots=True)
class AddPartitions:
    """New partitions at the end of a topic, each with its replica list (state as for a new
    topic's partitions: leader the first replica, epoch 0, ISR all). `first` is the index the
    proposer saw as the next one: applied after another growth, the command is refused rather
    than numbering its partitions from a count it did not see."""

    TYPE: ClassVar[str] = "AddPartitions"
    RESULT: ClassVar[type[Result]] = Applied
    name: str
    first: int
    replicas: tuple[tuple[int, ...], ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "first": self.first,
                "replicas": [list(replica_ids) for replica_ids in self.replicas]}

    @classmethod
    def from_fields(cls, f: Fields) -> AddPartitions:
        replicas = f.recode(ErrorCode.INVALID_REPLICA_ASSIGNMENT).integer_lists(
            "replicas", low=0, high=BROKER_ID_MAX)
        if not replicas:
            raise ZlogError(ErrorCode.INVALID_PARTITIONS, "no partitions to add")
        return cls(_name(f, "name"), f.integer("first", low=1), replicas)


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    """The topic disappears; its data is now "deleting" until every replica removed it."""

    TYPE: ClassVar[str] = "DeleteTopic"
    RESULT: ClassVar[type[Result]] = Applied
    name: str

    @classmethod
    def from_fields(cls, f: Fields) -> DeleteTopic:
        return cls(_name(f, "name"))


@dataclass(frozen=True, slots=True)
class TopicDeleted:
    """Every replica's data is gone; the name may be reused."""

    TYPE: ClassVar[str] = "TopicDeleted"
    RESULT: ClassVar[type[Result]] = Applied
    name: str

    @classmethod
    def from_fields(cls, f: Fields) -> TopicDeleted:
        return cls(_name(f, "name"))


@dataclass(frozen=True, slots=True)
class SetPartitionState:
    """A partition's leader, leader epoch and ISR, fenced by epoch when applied."""

    TYPE: ClassVar[str] = "SetPartitionState"
    RESULT: ClassVar[type[Result]] = PartitionStateSet
    topic: str
    partition: int
    leader: int  # broker id, -1 for none
    leader_epoch: int
    isr: tuple[int, ...]

    @classmethod
    def from_fields(cls, f: Fields) -> SetPartitionState:
        return cls(_name(f, "topic"), f.integer("partition", low=0),
                   f.integer("leader", low=-1, high=BROKER_ID_MAX),
                   f.integer("leader_epoch", low=0), _broker_id_list(f, "isr"))


@dataclass(frozen=True, slots=True)
class BrokerChange:
    """The controller's change to one broker's registration, fenced by its broker epoch."""

    node_id: int
    broker_epoch: int  # the registration this change was decided for
    fenced: bool | None = None  # None: unchanged
    shutting_down: bool | None = None
    worker_endpoints: tuple[str, ...] | None = None
    unregister: bool = False  # a drained broker leaves the cluster (the rest is ignored)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"node_id": self.node_id, "broker_epoch": self.broker_epoch}
        if self.unregister:
            body["unregister"] = True
        if self.fenced is not None:
            body["fenced"] = self.fenced
        if self.shutting_down is not None:
            body["shutting_down"] = self.shutting_down
        if self.worker_endpoints is not None:
            body["worker_endpoints"] = list(self.worker_endpoints)
        return body

    @classmethod
    def from_fields(cls, f: Fields) -> BrokerChange:
        return cls(
            f.integer("node_id", low=0, high=BROKER_ID_MAX), f.integer("broker_epoch", low=0),
            f.boolean("fenced") if f.has("fenced") else None,
            f.boolean("shutting_down") if f.has("shutting_down") else None,
            f.texts("worker_endpoints") if f.has("worker_endpoints") else None,
            f.boolean("unregister", default=False),
        )


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """A partition's new leader, leader epoch and ISR, computed from the record at
    `partition_epoch`: if the record changed since, the change is refused
    (INVALID_UPDATE_VERSION), so two decisions made from one state cannot both apply.
    `replicas`, when set, ends a reassignment: the replica set becomes that target."""

    topic: str
    partition: int
    partition_epoch: int  # the record's epoch this change was computed from
    leader: int  # broker id, -1 for none
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...] | None = None  # a completed reassignment's final replica set

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "topic": self.topic, "partition": self.partition,
            "partition_epoch": self.partition_epoch, "leader": self.leader,
            "leader_epoch": self.leader_epoch, "isr": list(self.isr)}
        if self.replicas is not None:
            body["replicas"] = list(self.replicas)
        return body

    @classmethod
    def from_fields(cls, f: Fields) -> PartitionChange:
        return cls(_name(f, "topic"), f.integer("partition", low=0),
                   f.integer("partition_epoch", low=0),
                   f.integer("leader", low=-1, high=BROKER_ID_MAX),
                   f.integer("leader_epoch", low=0), _broker_id_list(f, "isr"),
                   _broker_id_list(f, "replicas") if f.has("replicas") else None)


@dataclass(frozen=True, slots=True)
class ClusterChange:
    """What the controller decided in one round: brokers fenced, unfenced or shutting down,
    their workers' endpoints, and partition leaders and ISRs. Applied whole or not at all."""

    TYPE: ClassVar[str] = "ClusterChange"
    RESULT: ClassVar[type[Result]] = Applied
    brokers: tuple[BrokerChange, ...] = ()
    partitions: tuple[PartitionChange, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"brokers": [change.to_json() for change in self.brokers],
                "partitions": [change.to_json() for change in self.partitions]}

    @classmethod
    def from_fields(cls, f: Fields) -> ClusterChange:
        return cls(f.nested_list("brokers", BrokerChange.from_fields, default=[]),
                   f.nested_list("partitions", PartitionChange.from_fields, default=[]))


@dataclass(frozen=True, slots=True)
class Reassignment:
    """One partition's new replica set (the preferred leader first); None cancels the
    reassignment in progress (Kafka's null target)."""

    topic: str
    partition: int
    replicas: tuple[int, ...] | None

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition,
                "replicas": None if self.replicas is None else list(self.replicas)}

    @classmethod
    def from_fields(cls, f: Fields) -> Reassignment:
        replicas = f.recode(ErrorCode.INVALID_REPLICA_ASSIGNMENT).optional_integers(
            "replicas", low=0, high=BROKER_ID_MAX)
        return cls(_name(f, "topic"), f.integer("partition", low=0), replicas)


@dataclass(frozen=True, slots=True)
class ReassignPartitions:
    """Partitions start moving to new replica sets (or stop moving), all or none: one bad
    entry refuses the command. `drain`, when set, names a broker being removed: it is marked
    draining (no new replicas go to it) and, once it holds none, deregistered."""

    TYPE: ClassVar[str] = "ReassignPartitions"
    RESULT: ClassVar[type[Result]] = Applied
    reassignments: tuple[Reassignment, ...]
    drain: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"reassignments": [item.to_json() for item in self.reassignments],
                "drain": self.drain}

    @classmethod
    def from_fields(cls, f: Fields) -> ReassignPartitions:
        return cls(f.nested_list("reassignments", Reassignment.from_fields),
                   f.optional_integer("drain", low=0, high=BROKER_ID_MAX))


@dataclass(frozen=True, slots=True)
class AllocateProducerIds:
    """The next `count` producer ids, for the control plane to hand out one by one."""

    TYPE: ClassVar[str] = "AllocateProducerIds"
    RESULT: ClassVar[type[Result]] = ProducerIdsAllocated
    count: int = field(default=1)

    @classmethod
    def from_fields(cls, f: Fields) -> AllocateProducerIds:
        return cls(f.integer("count", low=1, high=limits.PRODUCER_IDS_PER_COMMAND_MAX))


Command: TypeAlias = (
    RegisterBroker | CreateTopic | AlterTopicConfigs | DeleteTopic | TopicDeleted
    | SetPartitionState | AllocateProducerIds | ClusterChange | AddPartitions
    | ReassignPartitions
)
COMMANDS: Final[dict[str, type[Command]]] = {
    kind.TYPE: kind for kind in (RegisterBroker, CreateTopic, AlterTopicConfigs, DeleteTopic,
                                 TopicDeleted, SetPartitionState, AllocateProducerIds,
                                 ClusterChange, AddPartitions, ReassignPartitions)
}

Done = Callable[[Result | None, ZlogError | None], None]
"""What a proposer hears back, on the loop thread: (apply result, None) or (None, error)."""
Propose = Callable[[Command, Done], None]


# -- field helpers -------------------------------------------------------------------------------


def _name(f: Fields, key: str) -> str:
    value = f.text(key)
    if not value:
        raise f.fail(f"{key} must be a non-empty string")
    return value


def _broker_id_list(f: Fields, key: str) -> tuple[int, ...]:
    return f.integers(key, low=0, high=BROKER_ID_MAX)


def _initial_partition(f: Fields) -> InitialPartition:
    return InitialPartition(
        f.integer("partition", low=0), _broker_id_list(f, "replicas"),
        f.integer("leader", low=-1, high=BROKER_ID_MAX),
        f.integer("leader_epoch", low=0), _broker_id_list(f, "isr"),
    )


# -- the codec ---------------------------------------------------------------------------------


def _encode(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=_JSON_SEPARATORS).encode()


def encode_command(command: Command) -> bytes:
    """The command as the log stores it: sorted keys, so equal commands are equal bytes."""
    to_json = getattr(command, "to_json", None)
    body = to_json() if to_json is not None else {
        item.name: _json_value(getattr(command, item.name)) for item in fields(command)
    }
    return _encode({"type": command.TYPE, **body})


def decode_command(data: bytes | memoryview) -> Command:
    """A command from the log, or ZlogError (INVALID_REQUEST unless a field says otherwise)."""
    f = parse_json_object(memoryview(data), COMMAND_CODE, "command")
    kind_name = f.text("type")
    kind = COMMANDS.get(kind_name)
    if kind is None:
        raise ZlogError(COMMAND_CODE, f"unknown command type {kind_name!r}")
    return kind.from_fields(f)


def encode_result(result: Result) -> bytes:
    body = {item.name: _json_value(getattr(result, item.name)) for item in fields(result)}
    return _encode({"error_code": 0, "error_message": "", **body})


def encode_error_result(code: ErrorCode, message: str) -> bytes:
    return _encode({"error_code": int(code), "error_message": message})


def decode_result(result_type: type[R], data: bytes | memoryview) -> R:
    """A command's result; raises ZlogError when it carries an error code."""
    f = parse_json_object(memoryview(data), ErrorCode.UNKNOWN_SERVER_ERROR, "result")
    code = f.integer("error_code", default=0)
    if code != 0:
        raise ZlogError(ErrorCode(code), f.text("error_message", default=""))
    return result_type.from_fields(f)  # type: ignore[return-value]


def _json_value(value: object) -> object:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return [_json_value(item) for item in value]
    return value
