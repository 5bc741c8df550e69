"""The cluster's metadata: a deterministic state machine fed by the Chained-Raft log.

Every change to cluster state is a command (`metadata_commands`: one typed class each)
committed in the metadata log and applied here, in log order, on every supervisor
(zlog.raft.fsm.StateMachine). Apply is deterministic and never raises: a malformed or refused
command becomes the same error result on every node, and the proposer learns the outcome from
that result.

Leader epochs, replica lists and ISRs are in the state from the start, so the cluster work
(leader election from the ISR, fencing by epoch) adds commands, not a new format.

Apply never mutates published state: it builds a new frozen ClusterState and swaps it in with
one attribute store, so another thread may read `state` at any time and sees one consistent
version (the supervisor's loop reads it while the Raft thread applies).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from zlog.broker.control.metadata_commands import (
    AllocateProducerIds,
    AlterTopicConfigs,
    Applied,
    BrokerRegistered,
    Command,
    CreateTopic,
    DeleteTopic,
    PartitionStateSet,
    ProducerIdsAllocated,
    RegisterBroker,
    Result,
    SetPartitionState,
    TopicCreated,
    TopicDeleted,
    decode_command,
    encode_error_result,
    encode_result,
)
from zlog.broker.control.placement import InitialPartition
from zlog.broker.topic_configs import colliding_topic, validate_topic_name
from zlog.errors import ErrorCode, ZlogError

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


# -- the state machine -------------------------------------------------------------------------


class MetadataStateMachine:
    """zlog.raft.fsm.StateMachine over ClusterState. Only the Raft loop thread calls apply."""

    def __init__(self) -> None:
        self.state = ClusterState()

    def apply(self, command: bytes) -> bytes:
        state = replace(self.state, applied_commands=self.state.applied_commands + 1)
        try:
            state, result = _apply(state, decode_command(command))
            encoded = encode_result(result)
        except ZlogError as error:  # refused: the state stays as it was, but for the count
            encoded = encode_error_result(error.code, error.message)
        assert state.applied_commands == self.state.applied_commands + 1
        self.state = state
        return encoded

    def query(self, query: bytes) -> bytes:
        """Every query reads the whole state: metadata is small, and reads are rare."""
        del query
        return self.snapshot()

    def snapshot(self) -> bytes:
        return json.dumps(_state_to_json(self.state), sort_keys=True,
                          separators=_JSON_SEPARATORS).encode()

    def restore(self, data: bytes) -> None:
        self.state = _state_from_json(json.loads(data))

    def digest(self) -> str:
        """Equal on every node that applied the same commands (the Raft runner reports it)."""
        return hashlib.sha256(self.snapshot()).hexdigest()[:16]


# -- command handlers: (state, command) -> (new state, result) --------------------------------


_Applied = tuple[ClusterState, Result]


def _apply(state: ClusterState, command: Command) -> _Applied:
    match command:
        case RegisterBroker():
            return _register_broker(state, command)
        case CreateTopic():
            return _create_topic(state, command)
        case AlterTopicConfigs():
            return _alter_topic_configs(state, command)
        case DeleteTopic():
            return _delete_topic(state, command)
        case TopicDeleted():
            return _topic_deleted(state, command)
        case SetPartitionState():
            return _set_partition_state(state, command)
        case AllocateProducerIds():
            first = state.next_producer_id
            return (replace(state, next_producer_id=first + command.count),
                    ProducerIdsAllocated(first, command.count))


def _register_broker(state: ClusterState, command: RegisterBroker) -> _Applied:
    cluster_id = state.cluster_id
    if not cluster_id:
        if not command.cluster_id:
            raise ZlogError(ErrorCode.INVALID_REQUEST, "the first broker brings a cluster id")
        cluster_id = command.cluster_id
    previous = state.brokers.get(command.node_id)
    epoch = 0 if previous is None else previous.broker_epoch + 1
    broker = BrokerRegistration(command.node_id, command.host, command.control_endpoint, epoch)
    brokers = dict(sorted({**state.brokers, command.node_id: broker}.items()))
    new_state = replace(state, cluster_id=cluster_id, brokers=brokers)
    return new_state, BrokerRegistered(cluster_id, epoch)


def _create_topic(state: ClusterState, command: CreateTopic) -> _Applied:
    name = validate_topic_name(command.name)
    if name in state.topics:
        raise ZlogError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
    if name in state.deleting:
        raise ZlogError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} is marked for deletion")
    other = colliding_topic(name, state.topics)
    if other is not None:  # checked before proposing too; here it also settles races
        raise ZlogError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic {name!r} collides with topic {other!r}"
        )
    partitions = tuple(
        _new_partition(state, index, entry, command.replication_factor)
        for index, entry in enumerate(command.initial_partitions())
    )
    topic = TopicInfo(name, state.next_topic_seq, command.replication_factor,
                      dict(sorted(command.configs.items())), partitions)
    new_state = replace(state, topics={**state.topics, name: topic},
                        next_topic_seq=state.next_topic_seq + 1)
    return new_state, TopicCreated(topic.topic_seq)


def _new_partition(
    state: ClusterState, index: int, entry: InitialPartition, factor: int
) -> PartitionInfo:
    if entry.partition != index:
        raise ZlogError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {index} is missing")
    replicas = list(entry.replicas)
    if len(replicas) != factor or len(set(replicas)) != factor:
        raise ZlogError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"partition {index} needs {factor} distinct replicas, not {replicas}",
        )
    unknown = [replica for replica in replicas if replica not in state.brokers]
    if unknown:
        raise ZlogError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"unknown broker(s) {unknown}")
    _check_leader_and_isr(replicas, entry.leader, list(entry.isr))
    return PartitionInfo(index, tuple(replicas), entry.leader, entry.leader_epoch,
                         tuple(entry.isr), 0)


def _alter_topic_configs(state: ClusterState, command: AlterTopicConfigs) -> _Applied:
    topic = _topic(state, command.name)
    configs = {**topic.configs, **command.set}
    for key in command.delete:
        configs.pop(key, None)
    altered = replace(topic, configs=dict(sorted(configs.items())))
    return replace(state, topics={**state.topics, command.name: altered}), Applied()


def _delete_topic(state: ClusterState, command: DeleteTopic) -> _Applied:
    name = command.name
    topic = _topic(state, name)
    topics = {key: value for key, value in state.topics.items() if key != name}
    deleting = dict(sorted({**state.deleting, name: len(topic.partitions)}.items()))
    return replace(state, topics=topics, deleting=deleting), Applied()


def _topic_deleted(state: ClusterState, command: TopicDeleted) -> _Applied:
    name = command.name
    if name not in state.deleting:
        raise ZlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name!r} is not being deleted")
    deleting = {key: value for key, value in state.deleting.items() if key != name}
    return replace(state, deleting=deleting), Applied()


def _set_partition_state(state: ClusterState, command: SetPartitionState) -> _Applied:
    name, index = command.topic, command.partition
    topic = state.topics.get(name)
    if topic is None or index >= len(topic.partitions):
        raise ZlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {name}-{index}")
    current = topic.partitions[index]
    leader, leader_epoch = command.leader, command.leader_epoch
    _check_leader_and_isr(list(current.replicas), leader, list(command.isr))
    if leader_epoch < current.leader_epoch:
        raise ZlogError(
            ErrorCode.FENCED_LEADER_EPOCH,
            f"leader epoch {leader_epoch} is older than {current.leader_epoch}",
        )
    if leader != current.leader and leader_epoch == current.leader_epoch:
        raise ZlogError(ErrorCode.INVALID_REQUEST, "a new leader needs a new leader epoch")
    updated = replace(current, leader=leader, leader_epoch=leader_epoch, isr=command.isr,
                      partition_epoch=current.partition_epoch + 1)
    partitions = (*topic.partitions[:index], updated, *topic.partitions[index + 1 :])
    topics = {**state.topics, name: replace(topic, partitions=partitions)}
    return replace(state, topics=topics), PartitionStateSet(updated.partition_epoch)


def _topic(state: ClusterState, name: str) -> TopicInfo:
    topic = state.topics.get(name)
    if topic is None:
        raise ZlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
    return topic


def _check_leader_and_isr(replicas: list[int], leader: int, isr: list[int]) -> None:
    """The ISR is a duplicate-free subset of the replicas; a leader is in the ISR."""
    if len(set(isr)) != len(isr) or not set(isr) <= set(replicas):
        raise ZlogError(ErrorCode.INVALID_REQUEST, f"ISR {isr} is not a subset of {replicas}")
    if leader != -1 and leader not in isr:
        raise ZlogError(ErrorCode.INVALID_REQUEST, f"leader {leader} is not in the ISR {isr}")


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
