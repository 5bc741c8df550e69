"""How each metadata command changes the cluster state: pure, deterministic functions.

`apply_command(state, command)` returns the new state and the command's result, or raises
ZlogError for a command the state refuses; `state_machine.MetadataStateMachine` turns that into
the same error result on every node. Nothing here reads a clock or a random number: every node
that applies the same commands in the same order reaches the same state.

Placement onto workers is decided here too, so that every broker can tell which worker of
another broker serves a partition (its data endpoint is `worker_endpoints[worker]`): a new
replica goes to the least loaded worker of its broker, and a broker that comes back with
another number of workers has its partitions dealt over them again, in creation order.
"""

from __future__ import annotations

from dataclasses import replace

from zlog.broker.control.controller.decisions import restarted
from zlog.broker.control.controller.reassignment import cancelled, started
from zlog.broker.control.metadata.commands import (
    AddPartitions,
    AllocateProducerIds,
    AlterSecurity,
    AlterTopicConfigs,
    Applied,
    BrokerChange,
    BrokerRegistered,
    ClusterChange,
    Command,
    CreateTopic,
    DeleteTopic,
    PartitionChange,
    PartitionStateSet,
    ProducerIdsAllocated,
    Reassignment,
    ReassignPartitions,
    RegisterBroker,
    Result,
    SetPartitionState,
    TopicCreated,
    TopicDeleted,
)
from zlog.broker.control.metadata.security_state import altered
from zlog.broker.control.metadata.state import (
    BrokerRegistration,
    ClusterState,
    PartitionInfo,
    TopicInfo,
    legacy_topic_id,
)
from zlog.broker.control.placement import InitialPartition
from zlog.broker.topic_configs import colliding_topic, validate_topic_name
from zlog.errors import ErrorCode, ZlogError

_Applied = tuple[ClusterState, Result]


def apply_command(state: ClusterState, command: Command) -> _Applied:
    match command:
        case RegisterBroker():
            return _register_broker(state, command)
        case CreateTopic():
            return _create_topic(state, command)
        case AlterTopicConfigs():
            return _alter_topic_configs(state, command)
        case AddPartitions():
            return _add_partitions(state, command)
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
        case ClusterChange():
            return apply_cluster_change(state, command), Applied()
        case ReassignPartitions():
            return _reassign_partitions(state, command)
        case AlterSecurity():
            return replace(state, security=altered(
                state.security, acls_add=command.acls_add, acls_remove=command.acls_remove,
                users_set=command.users_set, users_remove=command.users_remove,
                quotas_set=command.quotas_set)), Applied()


def _register_broker(state: ClusterState, command: RegisterBroker) -> _Applied:
    """A new incarnation gets the next broker epoch (cluster-wide, so epochs never repeat)
    and leaves the ISRs others can keep (`controller.restarted`), every ISR with another
    member if its data directory is not the one it registered last (KIP-858); the same
    incarnation registering again (a retry) keeps its own. A directory another registered
    broker names is refused (INVALID_REGISTRATION): a copied disk is not two brokers. A broker
    that now runs another number of workers has its partitions spread over them again."""
    cluster_id = state.cluster_id
    if not cluster_id:
        if not command.cluster_id:
            raise ZlogError(ErrorCode.INVALID_REQUEST, "the first broker brings a cluster id")
        cluster_id = command.cluster_id
    if command.incarnation_id and state.retired.get(command.node_id) == command.incarnation_id:
        raise ZlogError(ErrorCode.BROKER_ID_NOT_REGISTERED, retired_message(command.node_id))
    holder = next((r.node_id for r in state.brokers.values()
                   if command.dir_id and r.dir_id == command.dir_id
                   and r.node_id != command.node_id), None)
    if holder is not None:
        raise ZlogError(ErrorCode.INVALID_REGISTRATION,
                        f"data directory {command.dir_id} is registered by broker {holder}: "
                        f"broker {command.node_id} cannot run on a copy of it")
    retired = {node: incarnation for node, incarnation in state.retired.items()
               if node != command.node_id}
    previous = state.brokers.get(command.node_id)
    same = (previous is not None and command.incarnation_id != ""
            and previous.incarnation_id == command.incarnation_id)
    epoch = previous.broker_epoch if same and previous is not None else state.next_broker_epoch
    workers = max(command.workers, 1)
    endpoints = previous.worker_endpoints if same and previous is not None else ("",) * workers
    kafka_endpoints = previous.worker_kafka_endpoints if same and previous is not None else ()
    broker = BrokerRegistration(
        command.node_id, command.host, command.control_endpoint, epoch,
        incarnation_id=command.incarnation_id, workers=workers, rack=command.rack,
        dir_id=command.dir_id, worker_endpoints=endpoints,
        worker_kafka_endpoints=kafka_endpoints,
        draining=previous is not None and previous.draining,
    )
    brokers = dict(sorted({**state.brokers, command.node_id: broker}.items()))
    new_state = replace(state, cluster_id=cluster_id, brokers=brokers,
                        next_broker_epoch=max(state.next_broker_epoch, epoch + 1),
                        retired=retired)
    if previous is None or previous.workers != workers:
        new_state = spread_over_workers(new_state, command.node_id)
    if previous is not None and not same:
        new_directory = bool(previous.dir_id and command.dir_id
                             and previous.dir_id != command.dir_id)
        new_state = apply_cluster_change(new_state, ClusterChange((), restarted(
            new_state, command.node_id, new_directory=new_directory)))
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
    partitions: list[PartitionInfo] = []
    load = worker_loads(state)
    for index, entry in enumerate(command.initial_partitions()):
        partition = _new_partition(state, index, entry, command.replication_factor)
        workers = tuple(_least_loaded(state, broker, load) for broker in partition.replicas)
        partitions.append(replace(partition, replica_workers=workers))
    topic_id = command.topic_id or legacy_topic_id(state.cluster_id, state.next_topic_seq, name)
    topic = TopicInfo(name, state.next_topic_seq, command.replication_factor,
                      dict(sorted(command.configs.items())), tuple(partitions), topic_id)
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
                         tuple(entry.isr), 0,
                         directories=tuple(state.brokers[r].dir_id for r in replicas))


def _add_partitions(state: ClusterState, command: AddPartitions) -> _Applied:
    topic = _topic(state, command.name)
    if command.first != len(topic.partitions):
        raise ZlogError(ErrorCode.INVALID_PARTITIONS,
                        f"topic {topic.name!r} has {len(topic.partitions)} partitions now, "
                        f"not {command.first}")
    load = worker_loads(state)
    added: list[PartitionInfo] = []
    for offset, replicas in enumerate(command.replicas):
        index = command.first + offset
        entry = InitialPartition(index, replicas, replicas[0] if replicas else -1, 0, replicas)
        partition = _new_partition(state, index, entry, topic.replication_factor)
        workers = tuple(_least_loaded(state, broker, load) for broker in partition.replicas)
        added.append(replace(partition, replica_workers=workers))
    grown = replace(topic, partitions=(*topic.partitions, *added))
    return replace(state, topics={**state.topics, command.name: grown}), Applied()


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
                      partition_epoch=current.partition_epoch + 1,
                      directories=joined_directories(current, command.isr, leader, state))
    partitions = (*topic.partitions[:index], updated, *topic.partitions[index + 1 :])
    topics = {**state.topics, name: replace(topic, partitions=partitions)}
    return replace(state, topics=topics), PartitionStateSet(updated.partition_epoch)


def retired_message(node_id: int) -> str:
    return (f"broker {node_id} was removed from the cluster; restart its process to join "
            "again as a new, empty broker")


def _reassign_partitions(state: ClusterState, command: ReassignPartitions) -> _Applied:
    """Every entry checked and started (or cancelled) against the state, or none: one bad
    entry refuses the command, and nothing stored changes."""
    brokers = dict(state.brokers)
    if command.drain is not None:
        leaving = brokers.get(command.drain)
        if leaving is None:
            raise ZlogError(ErrorCode.BROKER_ID_NOT_REGISTERED,
                            f"broker {command.drain} is not registered")
        brokers[command.drain] = replace(leaving, draining=True)
    draining = replace(state, brokers=brokers)
    topics = dict(state.topics)
    load = worker_loads(state)
    seen: set[tuple[str, int]] = set()
    for item in command.reassignments:
        if (item.topic, item.partition) in seen:
            raise ZlogError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            f"{item.topic}-{item.partition} is named twice")
        seen.add((item.topic, item.partition))
        topic = topics.get(item.topic)
        if topic is None or not 0 <= item.partition < len(topic.partitions):
            raise ZlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            f"no partition {item.topic}-{item.partition}")
        updated = _reassigned(draining, topic, item, load)
        index = item.partition
        topics[topic.name] = replace(
            topic, partitions=(*topic.partitions[:index], updated, *topic.partitions[index + 1:]))
    return replace(draining, topics=topics), Applied()


def _reassigned(state: ClusterState, topic: TopicInfo, item: Reassignment,
                load: dict[tuple[int, int], int]) -> PartitionInfo:
    current = topic.partitions[item.partition]
    epoch = current.partition_epoch + 1
    if item.replicas is None:
        fields, leader, leader_epoch, isr = cancelled(topic.name, current)
        return replace(current, replicas=fields.replicas, adding=(), removing=(), leader=leader,
                       leader_epoch=leader_epoch, isr=isr, partition_epoch=epoch,
                       replica_workers=tuple(current.worker_of(b) for b in fields.replicas),
                       directories=_kept_directories(current, fields.replicas, state))
    _check_target(state, topic, current, item.replicas)
    fields = started(current, item.replicas)
    workers = tuple(current.worker_of(b) if b in current.replicas
                    else _least_loaded(state, b, load) for b in fields.replicas)
    return replace(current, replicas=fields.replicas, adding=fields.adding,
                   removing=fields.removing, partition_epoch=epoch, replica_workers=workers,
                   directories=_kept_directories(current, fields.replicas, state))


def _check_target(state: ClusterState, topic: TopicInfo, current: PartitionInfo,
                  target: tuple[int, ...]) -> None:
    """Kafka's checks of a reassignment's target: not empty, no broker twice, every broker
    registered; a broker that would take a new replica must be unfenced and not draining.
    The replication factor stays the topic's (zlog does not change it by reassignment)."""
    where = f"{topic.name}-{current.partition}"
    if not target:
        raise ZlogError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"{where}: an empty replica set")
    if len(set(target)) != len(target):
        raise ZlogError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"{where}: {list(target)} names a broker twice")
    if len(target) != topic.replication_factor:
        raise ZlogError(ErrorCode.INVALID_REPLICATION_FACTOR,
                        f"{where}: topic {topic.name!r} has replication factor "
                        f"{topic.replication_factor}, not {len(target)}")
    for broker in target:
        registration = state.brokers.get(broker)
        if registration is None:
            raise ZlogError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            f"{where}: broker {broker} is not registered")
        if broker in current.replicas:
            continue
        if registration.fenced:
            raise ZlogError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            f"{where}: broker {broker} is fenced")
        if registration.draining:
            raise ZlogError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            f"{where}: broker {broker} is being removed")


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


# -- the controller's changes -----------------------------------------------------------------


def apply_cluster_change(state: ClusterState, change: ClusterChange) -> ClusterState:
    """Every broker and partition change checked against the state first, then all applied:
    a change made from a state that moved on since is refused whole."""
    brokers = dict(state.brokers)
    retired = dict(state.retired)
    for broker_change in change.brokers:
        changed = _changed_broker(state, broker_change)
        if broker_change.unregister:
            _check_empty(state, broker_change.node_id)
            del brokers[broker_change.node_id]
            retired[broker_change.node_id] = changed.incarnation_id
        else:
            brokers[broker_change.node_id] = changed
    topics = dict(state.topics)
    for partition_change in change.partitions:
        topic = topics.get(partition_change.topic)
        if topic is None or not 0 <= partition_change.partition < len(topic.partitions):
            raise ZlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            f"no partition {partition_change.topic}-{partition_change.partition}")
        index = partition_change.partition
        updated = _changed_partition(state, topic.name, topic.partitions[index],
                                     partition_change)
        topics[topic.name] = replace(
            topic, partitions=(*topic.partitions[:index], updated, *topic.partitions[index + 1:]))
    return replace(state, brokers=brokers, topics=topics, retired=dict(sorted(retired.items())))


def _check_empty(state: ClusterState, node_id: int) -> None:
    """A broker leaves the cluster only once no partition lists it as a replica."""
    for topic in state.topics.values():
        for partition in topic.partitions:
            if node_id in partition.replicas:
                raise ZlogError(ErrorCode.INVALID_REQUEST,
                                f"broker {node_id} still holds {topic.name}-"
                                f"{partition.partition}")


def _changed_broker(state: ClusterState, change: BrokerChange) -> BrokerRegistration:
    current = state.brokers.get(change.node_id)
    if current is None:
        raise ZlogError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"no broker {change.node_id}")
    if current.broker_epoch != change.broker_epoch:
        raise ZlogError(ErrorCode.STALE_BROKER_EPOCH,
                        f"broker {change.node_id} is at epoch {current.broker_epoch}, "
                        f"not {change.broker_epoch}")
    updated = current
    if change.fenced is not None:
        updated = replace(updated, fenced=change.fenced)
    if change.shutting_down is not None:
        updated = replace(updated, shutting_down=change.shutting_down)
    if change.worker_endpoints is not None:
        updated = replace(updated, worker_endpoints=change.worker_endpoints)
    if change.worker_kafka_endpoints is not None:
        updated = replace(updated, worker_kafka_endpoints=change.worker_kafka_endpoints)
    return updated


def _changed_partition(
    state: ClusterState, topic: str, current: PartitionInfo, change: PartitionChange
) -> PartitionInfo:
    if change.partition_epoch != current.partition_epoch:
        raise ZlogError(ErrorCode.INVALID_UPDATE_VERSION,
                        f"{topic}-{current.partition} is at partition epoch "
                        f"{current.partition_epoch}, not {change.partition_epoch}")
    replicas = current.replicas if change.replicas is None else change.replicas
    if not set(replicas) <= set(current.replicas) or len(set(replicas)) != len(replicas):
        raise ZlogError(ErrorCode.INVALID_REQUEST,
                        f"{topic}-{current.partition}: {list(replicas)} is not a set of its "
                        f"replicas {list(current.replicas)}")
    _check_leader_and_isr(list(replicas), change.leader, list(change.isr))
    if not change.isr:
        raise ZlogError(ErrorCode.INVALID_REQUEST, f"{topic}-{current.partition}: empty ISR")
    moved = change.leader != current.leader
    if change.leader_epoch != current.leader_epoch + (1 if moved else 0):
        raise ZlogError(ErrorCode.INVALID_REQUEST,
                        f"{topic}-{current.partition}: leader epoch {change.leader_epoch} "
                        f"after {current.leader_epoch} {'with' if moved else 'without'} a "
                        "leader change")
    updated = replace(current, leader=change.leader, leader_epoch=change.leader_epoch,
                      isr=change.isr, partition_epoch=current.partition_epoch + 1,
                      directories=joined_directories(current, change.isr, change.leader,
                                                     state))
    if change.replicas is None:
        return updated
    return replace(updated, replicas=replicas, adding=(), removing=(),
                   replica_workers=tuple(current.worker_of(b) for b in replicas),
                   directories=tuple(updated.directory_of(b) for b in replicas))


def joined_directories(current: PartitionInfo, isr: tuple[int, ...], leader: int,
                       state: ClusterState) -> tuple[str, ...]:
    """The record's directories once `isr` and `leader` are committed: a replica joining the
    ISR (an expansion) or newly elected (an unclean election makes its log the partition's)
    holds its data in its broker's current directory."""
    def now_current(broker: int) -> bool:
        return broker in state.brokers and (
            (broker in isr and broker not in current.isr)
            or (broker == leader and leader != current.leader))

    return tuple(state.brokers[broker].dir_id if now_current(broker)
                 else current.directory_of(broker) for broker in current.replicas)


def _kept_directories(current: PartitionInfo, replicas: tuple[int, ...],
                      state: ClusterState) -> tuple[str, ...]:
    """A new replica set's directories: a replica kept keeps its own, a new one is placed in
    its broker's current directory."""
    return tuple(current.directory_of(b) if b in current.replicas
                 else state.brokers[b].dir_id if b in state.brokers else ""
                 for b in replicas)


# -- placement onto workers -------------------------------------------------------------------


def worker_loads(state: ClusterState) -> dict[tuple[int, int], int]:
    """(broker, worker) -> replicas placed there."""
    load: dict[tuple[int, int], int] = {}
    for topic in state.topics.values():
        for partition in topic.partitions:
            for broker, worker in zip(partition.replicas, partition.replica_workers,
                                      strict=False):
                load[(broker, worker)] = load.get((broker, worker), 0) + 1
    return load


def _least_loaded(state: ClusterState, broker: int, load: dict[tuple[int, int], int]) -> int:
    registration = state.brokers.get(broker)
    count = registration.workers if registration is not None else 1
    worker = min(range(count), key=lambda index: (load.get((broker, index), 0), index))
    load[(broker, worker)] = load.get((broker, worker), 0) + 1
    return worker


def spread_over_workers(state: ClusterState, broker: int) -> ClusterState:
    """Deal `broker`'s replicas over its workers again, in creation order."""
    registration = state.brokers[broker]
    count = max(registration.workers, 1)
    dealt = 0
    topics = dict(state.topics)
    for name, topic in state.topics.items():
        partitions = []
        for partition in topic.partitions:
            workers = list(partition.replica_workers) or [0] * len(partition.replicas)
            if broker in partition.replicas:
                workers[partition.replicas.index(broker)] = dealt % count
                dealt += 1
            partitions.append(replace(partition, replica_workers=tuple(workers)))
        topics[name] = replace(topic, partitions=tuple(partitions))
    return replace(state, topics=topics)
