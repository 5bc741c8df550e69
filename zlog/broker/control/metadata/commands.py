"""The metadata log's commands and their results, typed: one class each, one codec for all.

Every change to cluster state is one of these, proposed by a supervisor, committed in the
Chained-Raft log, and applied in log order by `state_machine.MetadataStateMachine` on every
node. A command travels and is stored as one JSON object whose `type` names its class; the
result of applying it goes back to the proposer as a JSON object
`{"error_code", "error_message", ...}` with the fields of the command's `Result`. The JSON forms
are what the log holds, so they only ever grow: a new command is a new class in `COMMANDS`, a
new field has a default, and a form an earlier version wrote keeps decoding (CreateTopic's
`assignment`, below).

Decoding checks shape only (types, ranges, the codes below); what a command means against the
current state (a topic that exists, an epoch that is stale) is checked when it is applied.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, ClassVar, Final, TypeAlias, TypeVar

from zlog import limits
from zlog.broker.control.placement import InitialPartition
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.json_codec import from_annotations, from_fields, to_json
from zlog.transport.json_fields import Fields, parse_json_object
from zlog.transport.messages.security import AclEntry, QuotaEntry, ScramUser
from zlog.transport.wire_types import AtLeast, Check, Code, Local, Range, Sparse
from zlog.types import BROKER_ID_MAX, NO_TOPIC_ID, valid_topic_id

COMMAND_CODE: Final = ErrorCode.INVALID_REQUEST  # a malformed command's result code
_JSON_SEPARATORS: Final = (",", ":")

BrokerId = Annotated[int, Range(0, BROKER_ID_MAX)]
BrokerIdOrNone = Annotated[int, Range(-1, BROKER_ID_MAX)]
BrokerIds = tuple[BrokerId, ...]
Count = Annotated[int, AtLeast(0)]
"""An epoch, an index or a sequence number: never negative."""
Name = Annotated[str, Check(bool, "must be a non-empty string")]


# -- results -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Applied:
    """The result of a command that returns nothing but success."""


@dataclass(frozen=True, slots=True)
class BrokerRegistered:
    cluster_id: str
    broker_epoch: Count  # bumped at each registration: tells a restarted broker from its past


@dataclass(frozen=True, slots=True)
class TopicCreated:
    topic_seq: Count


@dataclass(frozen=True, slots=True)
class PartitionStateSet:
    partition_epoch: Count


@dataclass(frozen=True, slots=True)
class ProducerIdsAllocated:
    first_id: Count
    count: Annotated[int, AtLeast(1)]


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
    node_id: BrokerId
    host: Name  # where clients reach this broker's workers
    control_endpoint: Name  # the supervisor's control ROUTER, e.g. tcp://10.0.0.5:7400
    cluster_id: str | None = None
    incarnation_id: str = ""  # new at every start of the supervisor process
    # how many partition workers it runs (0: unknown, placed as 1)
    workers: Annotated[int, Range(0, limits.WORKERS_MAX)] = 0
    rack: str = ""  # for rack-aware placement; "" for none
    dir_id: str = ""  # the data directory's id: a new one means a wiped disk


@dataclass(frozen=True, slots=True)
class CreateTopic:
    """A new topic with each partition's replica list, in partition order.

    A new partition's state follows from its replicas (leader: the first, epoch 0, ISR: all),
    so only they are written: a topic of tens of thousands of partitions still fits one
    command. Commands written before this form carried an `assignment` list of
    {partition, replicas, leader, leader_epoch, isr}; those decode into `initial`, which is
    never written.
    """

    TYPE: ClassVar[str] = "CreateTopic"
    RESULT: ClassVar[type[Result]] = TopicCreated
    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]
    replicas: tuple[tuple[int, ...], ...]
    initial: Annotated[tuple[InitialPartition, ...] | None, Local] = None
    topic_id: Annotated[str, Sparse] = NO_TOPIC_ID  # none in commands from before ids

    def initial_partitions(self) -> tuple[InitialPartition, ...]:
        if self.initial is not None:
            return self.initial
        return tuple(InitialPartition(index, replicas, replicas[0] if replicas else -1, 0,
                                      replicas) for index, replicas in enumerate(self.replicas))

    @classmethod
    def from_fields(cls, f: Fields) -> CreateTopic:
        """Either form; the replica lists must name every partition once."""
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
    name: Name
    set: Annotated[Mapping[str, str], Code(ErrorCode.INVALID_CONFIG)]  # overrides to set
    delete: Annotated[frozenset[str], Code(ErrorCode.INVALID_CONFIG)]  # overrides to drop


@dataclass(frozen=True, slots=True)
class AddPartitions:
    """New partitions at the end of a topic, each with its replica list (state as for a new
    topic's partitions: leader the first replica, epoch 0, ISR all). `first` is the index the
    proposer saw as the next one: applied after another growth, the command is refused rather
    than numbering its partitions from a count it did not see."""

    TYPE: ClassVar[str] = "AddPartitions"
    RESULT: ClassVar[type[Result]] = Applied
    name: Name
    first: Annotated[int, AtLeast(1)]
    replicas: Annotated[tuple[BrokerIds, ...], Code(ErrorCode.INVALID_REPLICA_ASSIGNMENT)]

    @classmethod
    def from_fields(cls, f: Fields) -> AddPartitions:
        """The fields' shapes, and at least one partition (INVALID_PARTITIONS)."""
        added = from_annotations(cls, f)
        if not added.replicas:
            raise ZlogError(ErrorCode.INVALID_PARTITIONS, "no partitions to add")
        return added


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    """The topic disappears; its data is now "deleting" until every replica removed it."""

    TYPE: ClassVar[str] = "DeleteTopic"
    RESULT: ClassVar[type[Result]] = Applied
    name: Name


@dataclass(frozen=True, slots=True)
class TopicDeleted:
    """Every replica's data is gone; the name may be reused."""

    TYPE: ClassVar[str] = "TopicDeleted"
    RESULT: ClassVar[type[Result]] = Applied
    name: Name


@dataclass(frozen=True, slots=True)
class SetPartitionState:
    """A partition's leader, leader epoch and ISR, fenced by epoch when applied."""

    TYPE: ClassVar[str] = "SetPartitionState"
    RESULT: ClassVar[type[Result]] = PartitionStateSet
    topic: Name
    partition: Count
    leader: BrokerIdOrNone  # broker id, -1 for none
    leader_epoch: Count
    isr: BrokerIds


@dataclass(frozen=True, slots=True)
class BrokerChange:
    """The controller's change to one broker's registration, fenced by its broker epoch.
    What does not change is not written."""

    node_id: BrokerId
    broker_epoch: Count  # the registration this change was decided for
    fenced: Annotated[bool | None, Sparse] = None  # None: unchanged
    shutting_down: Annotated[bool | None, Sparse] = None
    worker_endpoints: Annotated[tuple[str, ...] | None, Sparse] = None
    # a drained broker leaves the cluster (the rest is ignored)
    unregister: Annotated[bool, Sparse] = False
    worker_kafka_endpoints: Annotated[tuple[str, ...] | None, Sparse] = None


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """A partition's new leader, leader epoch and ISR, computed from the record at
    `partition_epoch`: if the record changed since, the change is refused
    (INVALID_UPDATE_VERSION), so two decisions made from one state cannot both apply.
    `replicas`, when set, ends a reassignment: the replica set becomes that target."""

    topic: Name
    partition: Count
    partition_epoch: Count  # the record's epoch this change was computed from
    leader: BrokerIdOrNone  # broker id, -1 for none
    leader_epoch: Count
    isr: BrokerIds
    # a completed reassignment's final replica set
    replicas: Annotated[BrokerIds | None, Sparse] = None


@dataclass(frozen=True, slots=True)
class ClusterChange:
    """What the controller decided in one round: brokers fenced, unfenced or shutting down,
    their workers' endpoints, and partition leaders and ISRs. Applied whole or not at all."""

    TYPE: ClassVar[str] = "ClusterChange"
    RESULT: ClassVar[type[Result]] = Applied
    brokers: tuple[BrokerChange, ...] = ()
    partitions: tuple[PartitionChange, ...] = ()


@dataclass(frozen=True, slots=True)
class Reassignment:
    """One partition's new replica set (the preferred leader first); None cancels the
    reassignment in progress (Kafka's null target)."""

    topic: Name
    partition: Count
    replicas: Annotated[BrokerIds | None, Code(ErrorCode.INVALID_REPLICA_ASSIGNMENT)]


@dataclass(frozen=True, slots=True)
class ReassignPartitions:
    """Partitions start moving to new replica sets (or stop moving), all or none: one bad
    entry refuses the command. `drain`, when set, names a broker being removed: it is marked
    draining (no new replicas go to it) and, once it holds none, deregistered."""

    TYPE: ClassVar[str] = "ReassignPartitions"
    RESULT: ClassVar[type[Result]] = Applied
    reassignments: tuple[Reassignment, ...]
    drain: BrokerId | None = None


@dataclass(frozen=True, slots=True)
class AllocateProducerIds:
    """The next `count` producer ids, for the control plane to hand out one by one."""

    TYPE: ClassVar[str] = "AllocateProducerIds"
    RESULT: ClassVar[type[Result]] = ProducerIdsAllocated
    count: Annotated[int, Range(1, limits.PRODUCER_IDS_PER_COMMAND_MAX)] = 1


@dataclass(frozen=True, slots=True)
class AlterSecurity:
    """ACLs added and removed, SASL users set and removed, quotas set, as one change
    (security_state.py); the fields are AlterSecurity's request's."""

    TYPE: ClassVar[str] = "AlterSecurity"
    RESULT: ClassVar[type[Result]] = Applied
    acls_add: tuple[AclEntry, ...] = ()
    acls_remove: tuple[AclEntry, ...] = ()
    users_set: tuple[ScramUser, ...] = ()
    users_remove: tuple[Name, ...] = ()
    quotas_set: tuple[QuotaEntry, ...] = ()


Command: TypeAlias = (
    RegisterBroker | CreateTopic | AlterTopicConfigs | DeleteTopic | TopicDeleted
    | SetPartitionState | AllocateProducerIds | ClusterChange | AddPartitions
    | ReassignPartitions | AlterSecurity
)
COMMANDS: Final[dict[str, type[Command]]] = {
    kind.TYPE: kind for kind in (RegisterBroker, CreateTopic, AlterTopicConfigs, DeleteTopic,
                                 TopicDeleted, SetPartitionState, AllocateProducerIds,
                                 ClusterChange, AddPartitions, ReassignPartitions,
                                 AlterSecurity)
}

Done = Callable[[Result | None, ZlogError | None], None]
"""What a proposer hears back, on the loop thread: (apply result, None) or (None, error)."""
Propose = Callable[[Command, Done], None]


def _initial_partition(f: Fields) -> InitialPartition:
    return InitialPartition(
        f.integer("partition", low=0), f.integers("replicas", low=0, high=BROKER_ID_MAX),
        f.integer("leader", low=-1, high=BROKER_ID_MAX),
        f.integer("leader_epoch", low=0), f.integers("isr", low=0, high=BROKER_ID_MAX),
    )


# -- the codec ---------------------------------------------------------------------------------


def _encode(body: Mapping[str, object]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=_JSON_SEPARATORS).encode()


def encode_command(command: Command) -> bytes:
    """The command as the log stores it: sorted keys, so equal commands are equal bytes."""
    return _encode({"type": command.TYPE, **to_json(command)})


def decode_command(data: bytes | memoryview) -> Command:
    """A command from the log, or ZlogError (INVALID_REQUEST unless a field says otherwise)."""
    f = parse_json_object(memoryview(data), COMMAND_CODE, "command")
    kind_name = f.text("type")
    kind = COMMANDS.get(kind_name)
    if kind is None:
        raise ZlogError(COMMAND_CODE, f"unknown command type {kind_name!r}")
    return from_fields(kind, f)


def encode_result(result: Result) -> bytes:
    return _encode({"error_code": 0, "error_message": "", **to_json(result)})


def encode_error_result(code: ErrorCode, message: str) -> bytes:
    return _encode({"error_code": int(code), "error_message": message})


def decode_result(result_type: type[R], data: bytes | memoryview) -> R:
    """A command's result; raises ZlogError when it carries an error code."""
    f = parse_json_object(memoryview(data), ErrorCode.UNKNOWN_SERVER_ERROR, "result")
    code = f.integer("error_code", default=0)
    if code != 0:
        raise ZlogError(ErrorCode(code), f.text("error_message", default=""))
    return from_fields(result_type, f)
