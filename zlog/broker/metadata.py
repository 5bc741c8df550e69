"""The cluster's metadata: a deterministic state machine fed by the Chained-Raft log.

Every change to cluster state is a JSON command committed in the metadata log and applied here,
in log order, on every supervisor (zlog.raft.fsm.StateMachine). Apply is deterministic and
never raises: a malformed or refused command becomes the same error result on every node, and
the proposer learns the outcome from that result (`{"error_code": 36, "error_message": ...}`).

Commands (the `type` field names them):

    RegisterBroker(node_id, host, control_endpoint[, cluster_id])   a supervisor (re)joins
    CreateTopic(name, partitions, replication_factor, configs, replicas)
    AlterTopicConfigs(name, set, delete)   set overrides {k: v}, drop overrides [k]
    DeleteTopic(name)           the topic disappears; its data is now "deleting"
    TopicDeleted(name)          every replica's data is gone; the name may be reused
    SetPartitionState(topic, partition, leader, leader_epoch, isr)
    AllocateProducerIds(count) -> first_id

Leader epochs, replica lists and ISRs are in the state from the start, so the cluster work
(leader election from the ISR, fencing by epoch) adds commands, not a new format.

Apply never mutates published state: it builds a new frozen ClusterState and swaps it in with
one attribute store, so another thread may read `state` at any time and sees one consistent
version (the supervisor's loop reads it while the Raft thread applies).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from zlog.broker.topics import colliding_topic, validate_topic_name
from zlog.errors import ErrorCode, ZlogError

producer_ids_per_command_max: Final = 1_000_000
_JSON_SEPARATORS: Final = (",", ":")


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A broker as its last RegisterBroker command left it in the cluster state.

    Not the Metadata response's broker entry (transport.messages.BrokerMetadata): the state
    also keeps the epoch that fences a restarted broker's past, which clients never see.
    """

    node_id: int
    host: str  # where clients reach this broker's workers
    control_endpoint: str  # the supervisor's control ROUTER, e.g. tcp://10.0.0.5:7400
    broker_epoch: int  # bumped at each registration: tells a restarted broker from its past


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    replicas: tuple[int, ...]  # broker ids; the first is the preferred leader
    leader: int  # broker id, -1 when no replica in the ISR is available
    leader_epoch: int  # bumped at each leader change; fences stale leaders (KIP-101)
    isr: tuple[int, ...]  # in-sync replicas, a subset of replicas
    partition_epoch: int  # bumped at every change of this record (leader or ISR)


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_seq: int  # creation sequence number: orders topics, rotates replica placement
    replication_factor: int
    configs: Mapping[str, str]  # the topic's own overrides, Kafka names, string values
    partitions: tuple[PartitionInfo, ...]


@dataclass(frozen=True, slots=True)
class ClusterState:
    """One version of the metadata; never mutated once published."""

    cluster_id: str = ""
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    topics: Mapping[str, TopicInfo] = field(default_factory=dict)  # in creation order
    deleting: Mapping[str, int] = field(default_factory=dict)  # name -> partition count
    next_producer_id: int = 0
    next_topic_seq: int = 0
    applied_commands: int = 0


class _BadCommand(Exception):
    """A command this state machine cannot apply; becomes an error result, never a crash."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- commands, as the proposer builds them -----------------------------------------------------


def _encode(command: dict[str, Any]) -> bytes:
    return json.dumps(command, sort_keys=True, separators=_JSON_SEPARATORS).encode()


def register_broker(
    node_id: int, host: str, control_endpoint: str, cluster_id: str | None = None
) -> bytes:
    """`cluster_id` is adopted only by a cluster that has none yet (its first registration)."""
    return _encode({"type": "RegisterBroker", "node_id": node_id, "host": host,
                    "control_endpoint": control_endpoint, "cluster_id": cluster_id})


def create_topic(
    name: str,
    partitions: int,
    replication_factor: int,
    configs: Mapping[str, str],
    replicas: Sequence[Sequence[int]],
) -> bytes:
    """`replicas`: each partition's replica list, in partition order.

    A new partition's state follows from its replicas (leader: the first, epoch 0, ISR: all),
    so only they are written: a topic of tens of thousands of partitions still fits one
    command. Commands written before this form carried an `assignment` list of
    {partition, replicas, leader, leader_epoch, isr}; apply still accepts it.
    """
    return _encode({"type": "CreateTopic", "name": name, "partitions": partitions,
                    "replication_factor": replication_factor, "configs": dict(configs),
                    "replicas": [list(replica_ids) for replica_ids in replicas]})


def alter_topic_configs(
    name: str, set_configs: Mapping[str, str], delete_configs: list[str]
) -> bytes:
    """The change, not the resulting map: two alterations committed one after the other both
    take effect, whichever the proposer read first (the control plane validated each)."""
    return _encode({"type": "AlterTopicConfigs", "name": name, "set": dict(set_configs),
                    "delete": sorted(delete_configs)})


def delete_topic(name: str) -> bytes:
    return _encode({"type": "DeleteTopic", "name": name})


def topic_deleted(name: str) -> bytes:
    return _encode({"type": "TopicDeleted", "name": name})


def set_partition_state(
    topic: str, partition: int, leader: int, leader_epoch: int, isr: list[int]
) -> bytes:
    return _encode({"type": "SetPartitionState", "topic": topic, "partition": partition,
                    "leader": leader, "leader_epoch": leader_epoch, "isr": isr})


def allocate_producer_ids(count: int) -> bytes:
    return _encode({"type": "AllocateProducerIds", "count": count})


def decode_result(result: bytes) -> dict[str, Any]:
    """An apply result; raises ZlogError when it carries an error code."""
    decoded = json.loads(result)
    assert isinstance(decoded, dict), "apply always returns a JSON object"
    code = int(decoded.get("error_code", 0))
    if code != 0:
        raise ZlogError(ErrorCode(code), str(decoded.get("error_message", "")))
    return decoded


# -- the state machine -------------------------------------------------------------------------


class MetadataStateMachine:
    """zlog.raft.fsm.StateMachine over ClusterState. Only the Raft loop thread calls apply."""

    def __init__(self) -> None:
        self.state = ClusterState()

    def apply(self, command: bytes) -> bytes:
        state = replace(self.state, applied_commands=self.state.applied_commands + 1)
        try:
            decoded = json.loads(command)
            if not isinstance(decoded, dict):
                raise _BadCommand(ErrorCode.INVALID_REQUEST, "a command is a JSON object")
            kind = decoded.get("type")
            handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
            if handler is None:
                raise _BadCommand(
                    ErrorCode.INVALID_REQUEST, f"unknown command type {kind!r}"
                )
            state, result = handler(state, decoded)
        except (_BadCommand, ValueError, RecursionError) as error:
            code = error.code if isinstance(error, _BadCommand) else ErrorCode.INVALID_REQUEST
            message = error.message if isinstance(error, _BadCommand) else str(error)
            result = {"error_code": int(code), "error_message": message}
        assert state.applied_commands == self.state.applied_commands + 1
        self.state = state
        return _encode({"error_code": 0, "error_message": "", **result})

    def query(self, query: bytes) -> bytes:
        """Every query reads the whole state: metadata is small, and reads are rare."""
        del query
        return self.snapshot()

    def snapshot(self) -> bytes:
        return _encode(_state_to_json(self.state))

    def restore(self, data: bytes) -> None:
        self.state = _state_from_json(json.loads(data))

    def digest(self) -> str:
        """Equal on every node that applied the same commands (the Raft runner reports it)."""
        return hashlib.sha256(self.snapshot()).hexdigest()[:16]


# -- command handlers: (state, command) -> (new state, result fields) --------------------------


_Result = tuple[ClusterState, dict[str, Any]]


def _register_broker(state: ClusterState, command: Mapping[str, Any]) -> _Result:
    node_id = _int(command, "node_id", minimum=0)
    host = _str(command, "host")
    endpoint = _str(command, "control_endpoint")
    cluster_id = state.cluster_id
    if not cluster_id:
        proposed = command.get("cluster_id")
        if not isinstance(proposed, str) or not proposed:
            raise _BadCommand(ErrorCode.INVALID_REQUEST, "the first broker brings a cluster id")
        cluster_id = proposed
    previous = state.brokers.get(node_id)
    epoch = 0 if previous is None else previous.broker_epoch + 1
    broker = BrokerRegistration(node_id, host, endpoint, epoch)
    brokers = dict(sorted({**state.brokers, node_id: broker}.items()))
    new_state = replace(state, cluster_id=cluster_id, brokers=brokers)
    return new_state, {"cluster_id": cluster_id, "broker_epoch": epoch}


def _create_topic(state: ClusterState, command: Mapping[str, Any]) -> _Result:
    try:
        name = validate_topic_name(command.get("name"))
    except ZlogError as error:
        raise _BadCommand(error.code, error.message) from None
    if name in state.topics:
        raise _BadCommand(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
    if name in state.deleting:
        raise _BadCommand(
            ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} is marked for deletion"
        )
    other = colliding_topic(name, state.topics)
    if other is not None:  # checked before proposing too; here it also settles races
        raise _BadCommand(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic {name!r} collides with topic {other!r}"
        )
    count = _int(command, "partitions", minimum=1)
    factor = _int(command, "replication_factor", minimum=1)
    configs = _str_map(command, "configs")
    replica_lists = command.get("replicas")
    if replica_lists is None:  # the form of commands written by earlier versions
        assignment = command.get("assignment")
    else:
        assignment = replica_lists if not isinstance(replica_lists, list) else [
            {"partition": index, "replicas": replicas,
             "leader": replicas[0] if isinstance(replicas, list) and replicas else -1,
             "leader_epoch": 0, "isr": replicas}
            for index, replicas in enumerate(replica_lists)
        ]
    if not isinstance(assignment, list) or len(assignment) != count:
        raise _BadCommand(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the assignment lists every partition once"
        )
    partitions = tuple(
        _new_partition(state, index, entry, factor) for index, entry in enumerate(assignment)
    )
    topic = TopicInfo(name, state.next_topic_seq, factor, dict(sorted(configs.items())),
                      partitions)
    new_state = replace(state, topics={**state.topics, name: topic},
                        next_topic_seq=state.next_topic_seq + 1)
    return new_state, {"topic_seq": topic.topic_seq}


def _new_partition(state: ClusterState, index: int, entry: object, factor: int) -> PartitionInfo:
    if not isinstance(entry, dict) or entry.get("partition") != index:
        raise _BadCommand(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {index} is missing")
    replicas = _int_list(entry, "replicas")
    if len(replicas) != factor or len(set(replicas)) != factor:
        raise _BadCommand(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"partition {index} needs {factor} distinct replicas, not {replicas}",
        )
    unknown = [replica for replica in replicas if replica not in state.brokers]
    if unknown:
        raise _BadCommand(ErrorCode.BROKER_ID_NOT_REGISTERED, f"unknown broker(s) {unknown}")
    leader = _int(entry, "leader", minimum=-1)
    isr = _int_list(entry, "isr")
    _check_leader_and_isr(replicas, leader, isr)
    epoch = _int(entry, "leader_epoch", minimum=0)
    return PartitionInfo(index, tuple(replicas), leader, epoch, tuple(isr), 0)


def _alter_topic_configs(state: ClusterState, command: Mapping[str, Any]) -> _Result:
    name = _str(command, "name")
    topic = state.topics.get(name)
    if topic is None:
        raise _BadCommand(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
    set_configs = _str_map(command, "set")
    deleted = command.get("delete")
    if not isinstance(deleted, list) or not all(isinstance(key, str) for key in deleted):
        raise _BadCommand(ErrorCode.INVALID_CONFIG, "delete lists config names")
    configs = {**topic.configs, **set_configs}
    for key in deleted:
        configs.pop(key, None)
    altered = replace(topic, configs=dict(sorted(configs.items())))
    return replace(state, topics={**state.topics, name: altered}), {}


def _delete_topic(state: ClusterState, command: Mapping[str, Any]) -> _Result:
    name = _str(command, "name")
    topic = state.topics.get(name)
    if topic is None:
        raise _BadCommand(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
    topics = {key: value for key, value in state.topics.items() if key != name}
    deleting = dict(sorted({**state.deleting, name: len(topic.partitions)}.items()))
    return replace(state, topics=topics, deleting=deleting), {}


def _topic_deleted(state: ClusterState, command: Mapping[str, Any]) -> _Result:
    name = _str(command, "name")
    if name not in state.deleting:
        raise _BadCommand(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name!r} is not being deleted")
    deleting = {key: value for key, value in state.deleting.items() if key != name}
    return replace(state, deleting=deleting), {}


def _set_partition_state(state: ClusterState, command: Mapping[str, Any]) -> _Result:
    name = _str(command, "topic")
    index = _int(command, "partition", minimum=0)
    topic = state.topics.get(name)
    if topic is None or index >= len(topic.partitions):
        raise _BadCommand(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {name}-{index}")
    current = topic.partitions[index]
    leader = _int(command, "leader", minimum=-1)
    leader_epoch = _int(command, "leader_epoch", minimum=0)
    isr = _int_list(command, "isr")
    _check_leader_and_isr(list(current.replicas), leader, isr)
    if leader_epoch < current.leader_epoch:
        raise _BadCommand(
            ErrorCode.FENCED_LEADER_EPOCH,
            f"leader epoch {leader_epoch} is older than {current.leader_epoch}",
        )
    if leader != current.leader and leader_epoch == current.leader_epoch:
        raise _BadCommand(ErrorCode.INVALID_REQUEST, "a new leader needs a new leader epoch")
    updated = replace(current, leader=leader, leader_epoch=leader_epoch, isr=tuple(isr),
                      partition_epoch=current.partition_epoch + 1)
    partitions = (*topic.partitions[:index], updated, *topic.partitions[index + 1 :])
    topics = {**state.topics, name: replace(topic, partitions=partitions)}
    return replace(state, topics=topics), {"partition_epoch": updated.partition_epoch}


def _allocate_producer_ids(state: ClusterState, command: Mapping[str, Any]) -> _Result:
    count = _int(command, "count", minimum=1)
    if count > producer_ids_per_command_max:
        raise _BadCommand(ErrorCode.INVALID_REQUEST, f"at most {producer_ids_per_command_max} ids")
    first = state.next_producer_id
    return replace(state, next_producer_id=first + count), {"first_id": first, "count": count}


_HANDLERS: Final = {
    "RegisterBroker": _register_broker,
    "CreateTopic": _create_topic,
    "AlterTopicConfigs": _alter_topic_configs,
    "DeleteTopic": _delete_topic,
    "TopicDeleted": _topic_deleted,
    "SetPartitionState": _set_partition_state,
    "AllocateProducerIds": _allocate_producer_ids,
}


def _check_leader_and_isr(replicas: list[int], leader: int, isr: list[int]) -> None:
    """The ISR is a duplicate-free subset of the replicas; a leader is in the ISR."""
    if len(set(isr)) != len(isr) or not set(isr) <= set(replicas):
        raise _BadCommand(ErrorCode.INVALID_REQUEST, f"ISR {isr} is not a subset of {replicas}")
    if leader != -1 and leader not in isr:
        raise _BadCommand(ErrorCode.INVALID_REQUEST, f"leader {leader} is not in the ISR {isr}")


# -- field access that turns wrong types into _BadCommand ---------------------------------------


def _int(command: Mapping[str, Any], key: str, *, minimum: int) -> int:
    value = command.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise _BadCommand(ErrorCode.INVALID_REQUEST, f"{key} must be an integer >= {minimum}")
    return value


def _str(command: Mapping[str, Any], key: str) -> str:
    value = command.get(key)
    if not isinstance(value, str) or not value:
        raise _BadCommand(ErrorCode.INVALID_REQUEST, f"{key} must be a non-empty string")
    return value


def _str_map(command: Mapping[str, Any], key: str) -> dict[str, str]:
    """A config map: names to string values (absent: empty)."""
    value = command.get(key, {})
    if not isinstance(value, dict) or not all(
        isinstance(name, str) and isinstance(text, str) for name, text in value.items()
    ):
        raise _BadCommand(ErrorCode.INVALID_CONFIG, f"{key} maps config names to strings")
    return dict(value)


def _int_list(command: Mapping[str, Any], key: str) -> list[int]:
    value = command.get(key)
    if not isinstance(value, list) or not all(
        isinstance(item, int) and not isinstance(item, bool) and item >= 0 for item in value
    ):
        raise _BadCommand(ErrorCode.INVALID_REQUEST, f"{key} must be a list of broker ids")
    return list(value)


# -- snapshots -----------------------------------------------------------------------------------


def _state_to_json(state: ClusterState) -> dict[str, Any]:
    return {
        "cluster_id": state.cluster_id,
        "brokers": [
            {"node_id": broker.node_id, "host": broker.host,
             "control_endpoint": broker.control_endpoint, "broker_epoch": broker.broker_epoch}
            for broker in state.brokers.values()
        ],
        "topics": [
            {"name": topic.name, "topic_seq": topic.topic_seq,
             "replication_factor": topic.replication_factor, "configs": dict(topic.configs),
             "partitions": [
                 {"partition": p.partition, "replicas": list(p.replicas), "leader": p.leader,
                  "leader_epoch": p.leader_epoch, "isr": list(p.isr),
                  "partition_epoch": p.partition_epoch}
                 for p in topic.partitions
             ]}
            for topic in state.topics.values()
        ],
        "deleting": dict(state.deleting),
        "next_producer_id": state.next_producer_id,
        "next_topic_seq": state.next_topic_seq,
        "applied_commands": state.applied_commands,
    }


def _state_from_json(data: dict[str, Any]) -> ClusterState:
    brokers = {
        int(item["node_id"]): BrokerRegistration(
            int(item["node_id"]), str(item["host"]), str(item["control_endpoint"]),
            int(item["broker_epoch"]),
        )
        for item in data["brokers"]
    }
    topics = {
        str(item["name"]): TopicInfo(
            str(item["name"]), int(item["topic_seq"]), int(item["replication_factor"]),
            {str(key): str(value) for key, value in item["configs"].items()},
            tuple(
                PartitionInfo(
                    int(p["partition"]), tuple(p["replicas"]), int(p["leader"]),
                    int(p["leader_epoch"]), tuple(p["isr"]), int(p["partition_epoch"]),
                )
                for p in item["partitions"]
            ),
        )
        for item in sorted(data["topics"], key=lambda topic: int(topic["topic_seq"]))
    }
    return ClusterState(
        cluster_id=str(data["cluster_id"]),
        brokers=brokers,
        topics=topics,
        deleting={str(key): int(value) for key, value in data["deleting"].items()},
        next_producer_id=int(data["next_producer_id"]),
        next_topic_seq=int(data["next_topic_seq"]),
        applied_commands=int(data["applied_commands"]),
    )
