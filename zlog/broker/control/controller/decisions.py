"""The controller's decisions: pure functions of the cluster state and what it was told.

The supervisor whose Raft node leads is the controller. Each round it collects what happened
since the last one (brokers whose session expired, brokers heard from again, brokers asking
to shut down, workers' new data endpoints, leaders asking to change their ISR) and `decide`
turns that into one `ClusterChange` for the metadata log, plus an answer for every ISR request.
Nothing here has a clock or a socket (`service.py` has both), so every rule is a
unit test and the replication simulator drives the same code.

The rules (docs/replication.md §4):

* A broker is **usable** for leadership and ISR membership while registered, not fenced and
  not shutting down.
* **Fencing** removes a broker from every ISR and moves every leadership it held to the first
  usable ISR member in replica order (leader epoch + 1). The last member of an ISR is never
  removed: a partition whose whole ISR is gone keeps it and has no leader (-1) until one of
  them comes back. Nothing outside the ISR is ever elected (no unclean election), so an
  acknowledged batch, which every ISR member had, is never lost to an election.
* A leaderless partition gets a leader as soon as an ISR member is usable again.
* A broker that **registers as a new process** (a restart) may have lost what it had not
  flushed: it leaves every ISR that keeps another usable member, and its leaderships move to
  them; it rejoins each ISR once its follower caught up again. Where it is the only usable
  member it keeps its place (nobody else holds the data), but a leadership it keeps goes
  through a new election: the partition has no leader until the next round elects it again,
  in a new leader epoch. Every partition it replicates gets a new partition epoch, so that a
  change decided before the registration is refused.
* A broker that registers with **another data directory** (a wiped or replaced disk, KIP-858)
  holds nothing: it leaves every ISR that has another member, usable or not (they hold the
  data). Where it is the last member it stays recorded there, but a replica whose recorded
  directory is not its broker's current one is never an acceptable leader, so the partition
  has no leader rather than an empty one that the others would truncate to. It is acceptable
  again when its old directory comes back, or once it joined the ISR again by catching up
  (which records its new directory).
* A **controlled shutdown** moves the broker's leaderships to other usable ISR members and
  takes it out of every ISR that keeps another usable member; where it is the only one (a
  replication factor of 1) it keeps leading until it stops.
* An **ISR change** proposed by a leader (AlterPartition, KIP-497) is checked against the record
  it was computed from, fenced by partition epoch; new members must be usable and at the
  broker epoch the leader saw them fetch with.
* A **reassignment** completes once every replica of its target is in the ISR
  (`reassignment.completed`): the replica set becomes the target, and a leader outside it
  hands over to a target member in the ISR.
* A **draining** broker (being removed) is deregistered once no partition lists it as a
  replica; no new replica is placed on it meanwhile (`placeable`).
* Every partition change bumps the partition epoch (the metadata log does it); a leader change
  bumps the leader epoch by one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from zlog.broker.control.controller.reassignment import completed
from zlog.broker.control.metadata.commands import BrokerChange, ClusterChange, PartitionChange
from zlog.broker.control.metadata.state import ClusterState, PartitionInfo
from zlog.errors import ErrorCode, ZlogError
from zlog.types import NO_LEADER


@dataclass(frozen=True, slots=True)
class IsrRequest:
    """A leader's AlterPartition: the ISR it wants, computed from the record it was sent."""

    node_id: int  # the leader asking
    broker_epoch: int  # its registration
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    member_epochs: Mapping[int, int] = field(default_factory=dict)  # broker -> epoch seen


@dataclass(frozen=True, slots=True)
class RoundInput:
    """What the controller learned since its last round."""

    expired: frozenset[int] = frozenset()  # sessions over: fence them
    heard_from: frozenset[int] = frozenset()  # heartbeats at their current epoch: unfence
    shutting_down: frozenset[int] = frozenset()  # asked for a controlled shutdown
    endpoints: Mapping[int, tuple[int, tuple[str, ...]]] = field(default_factory=dict)
    kafka_endpoints: Mapping[int, tuple[int, tuple[str, ...]]] = field(default_factory=dict)
    isr_requests: Sequence[IsrRequest] = ()
    preferred_elections: bool = False  # move leadership back to preferred replicas
    unclean_topics: frozenset[str] = frozenset()  # unclean.leader.election.enable=true


@dataclass(frozen=True, slots=True)
class RoundOutcome:
    change: ClusterChange  # empty when nothing is to change
    answers: tuple[ZlogError | None, ...]  # one per ISR request: None if it is in `change`

    @property
    def empty(self) -> bool:
        return not self.change.brokers and not self.change.partitions


@dataclass(frozen=True, slots=True)
class Liveness:
    """Who may lead: `usable` brokers (registered, unfenced, not shutting down), and the wider
    `alive` set (not fenced) that a broker shutting down still belongs to; `directories` is
    each registered broker's current data directory ("" when it names none)."""

    usable: frozenset[int]
    alive: frozenset[int]
    directories: Mapping[int, str] = field(default_factory=dict)

    def holds_its_data(self, partition: PartitionInfo, broker: int) -> bool:
        """Whether `broker`'s replica is still in the directory the record names (Kafka's
        LeaderAcceptor directory check); unknown on either side counts as the same."""
        recorded = partition.directory_of(broker)
        current = self.directories.get(broker, "")
        return not recorded or not current or recorded == current


def elect(partition: PartitionInfo, isr: Iterable[int], live: Liveness) -> int:
    """The current leader if it may stay, else the first usable ISR member in replica order;
    failing that, a current leader that is shutting down stays (nobody else can take over).
    A replica whose broker is on another directory than the record names is never chosen."""
    members = {r for r in isr if live.holds_its_data(partition, r)}
    if partition.leader in members and partition.leader in live.usable:
        return partition.leader
    chosen = next((r for r in partition.replicas if r in members and r in live.usable), None)
    if chosen is not None:
        return chosen
    if partition.leader in members and partition.leader in live.alive:
        return partition.leader
    return NO_LEADER


def healed(topic: str, partition: PartitionInfo, live: Liveness) -> PartitionChange | None:
    """The change that takes fenced and departing brokers out of the ISR (never its last
    member) and gives the partition a leader from it; None when nothing needs to change."""
    isr = (tuple(r for r in partition.isr if r in live.usable)
           or tuple(r for r in partition.isr if r in live.alive) or partition.isr)
    leader = elect(partition, isr, live)
    if leader == partition.leader and isr == partition.isr:
        return None
    return _change(topic, partition, leader, isr)


def unclean(topic: str, partition: PartitionInfo, change: PartitionChange | None,
            live: Liveness) -> PartitionChange | None:
    """With unclean.leader.election.enable, a partition left without a leader because no ISR
    member is usable takes the first usable replica outside the ISR, alone in a new ISR:
    available again, at the price of what only the old ISR held (Kafka's unclean election).
    A replica still on the directory the record names is preferred: one back on an empty disk
    is taken only when no other is usable."""
    leader = partition.leader if change is None else change.leader
    if leader != NO_LEADER:
        return None
    usable = [r for r in partition.replicas if r in live.usable]
    chosen = next((r for r in usable if live.holds_its_data(partition, r)),
                  usable[0] if usable else None)
    if chosen is None or chosen == partition.leader:
        return None
    return _change(topic, partition, chosen, (chosen,))


def restarted(state: ClusterState, broker: int, *, new_directory: bool = False
              ) -> tuple[PartitionChange, ...]:
    """The changes for `broker` registering as a new process (applied with its registration);
    `new_directory`: on another data directory than its last registration's."""
    live = liveness(state)
    without = replace(live, usable=live.usable - {broker})
    changes = []
    for topic in state.topics.values():
        for partition in topic.partitions:
            if broker not in partition.replicas:
                continue
            change = None
            if new_directory and broker in partition.isr and len(partition.isr) > 1:
                # It holds nothing: the others hold the data, usable or not.
                isr = tuple(r for r in partition.isr if r != broker)
                change = _change(topic.name, partition, elect(partition, isr, without), isr)
            elif broker in partition.isr or partition.leader == broker:
                change = healed(topic.name, partition, without)
                if partition.leader == broker and (change is None or change.leader == broker):
                    # The new process may have lost the tail it wrote in its leader epoch and
                    # write other batches there: followers that copied the old tail would see
                    # the same (offset, epoch) and never truncate it. It leads again only
                    # through a new election, in a new epoch (the next round's).
                    isr = partition.isr if change is None else change.isr
                    change = _change(topic.name, partition, NO_LEADER, isr)
            # Every partition it replicates gets a new partition epoch even when nothing else
            # changes: a round decided before this registration (an ISR join checked against
            # the broker epoch of the process that died) is then refused when it commits.
            changes.append(change if change is not None else
                           _change(topic.name, partition, partition.leader, partition.isr))
    return tuple(changes)


def preferred(topic: str, partition: PartitionInfo, live: Liveness) -> PartitionChange | None:
    """Leadership back to the preferred replica (the first) when it is usable and in sync."""
    first = partition.replicas[0]
    if (partition.leader == first or first not in partition.isr or first not in live.usable
            or not live.holds_its_data(partition, first)):
        return None
    return _change(topic, partition, first, partition.isr)


def _change(
    topic: str, partition: PartitionInfo, leader: int, isr: tuple[int, ...]
) -> PartitionChange:
    epoch = partition.leader_epoch + (1 if leader != partition.leader else 0)
    return PartitionChange(topic, partition.partition, partition.partition_epoch, leader,
                           epoch, isr)


def checked_isr_request(
    state: ClusterState, request: IsrRequest, live: Liveness | None = None
) -> PartitionChange:
    """The change an AlterPartition asks for, or ZlogError with Kafka's code for why not
    (ReplicationControlManager's checks, in its order). `live` is who is usable once the
    round's own broker changes apply: a broker fenced in this round may not join an ISR in it."""
    registration = state.brokers.get(request.node_id)
    if registration is None or registration.broker_epoch != request.broker_epoch:
        raise ZlogError(ErrorCode.STALE_BROKER_EPOCH,
                        f"broker {request.node_id} epoch {request.broker_epoch} is not current")
    partition = state.partition(request.topic, request.partition)
    if partition is None:
        raise ZlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"no partition {request.topic}-{request.partition}")
    where = f"{request.topic}-{request.partition}"
    if (request.leader_epoch > partition.leader_epoch
            or request.partition_epoch > partition.partition_epoch):
        raise ZlogError(ErrorCode.NOT_CONTROLLER, f"{where}: this controller is behind")
    if request.leader_epoch < partition.leader_epoch:
        raise ZlogError(ErrorCode.FENCED_LEADER_EPOCH,
                        f"{where}: leader epoch {request.leader_epoch} is not current")
    if request.node_id != partition.leader:
        raise ZlogError(ErrorCode.INVALID_REQUEST, f"{where}: broker {request.node_id} "
                                                   "does not lead it")
    if request.partition_epoch < partition.partition_epoch:
        raise ZlogError(ErrorCode.INVALID_UPDATE_VERSION,
                        f"{where}: partition epoch {request.partition_epoch} is not current")
    new_isr = request.new_isr
    live = live if live is not None else liveness(state)
    usable = live.usable
    if partition.leader not in new_isr:
        return _resigned(request.topic, partition, new_isr, live)
    if len(set(new_isr)) != len(new_isr) or not set(new_isr) <= set(partition.replicas):
        raise ZlogError(ErrorCode.INVALID_REQUEST,
                        f"{where}: ISR {list(new_isr)} must be replicas and hold the leader")
    for member in set(new_isr) - set(partition.isr):
        seen = request.member_epochs.get(member, -1)
        member_registration = state.brokers.get(member)
        if (member not in usable or member_registration is None
                or seen not in (-1, member_registration.broker_epoch)):
            raise ZlogError(ErrorCode.INELIGIBLE_REPLICA,
                            f"{where}: broker {member} may not join the ISR now")
    ordered = tuple(r for r in partition.replicas if r in new_isr)
    return PartitionChange(request.topic, request.partition, partition.partition_epoch,
                           partition.leader, partition.leader_epoch, ordered)


def _resigned(topic: str, partition: PartitionInfo, new_isr: tuple[int, ...],
              live: Liveness) -> PartitionChange:
    """A leader proposing an ISR without itself resigns (it cannot write: a full disk): the
    first usable member of what is left leads, in a new leader epoch. Only the ISR less the
    leader is accepted, so every committed batch stays on each member; with nobody usable
    to take over, the leader stays (INELIGIBLE_REPLICA). Kafka moves the partitions of a
    failed log dir away from its broker the same way."""
    where = f"{topic}-{partition.partition}"
    rest = tuple(r for r in partition.replicas if r in partition.isr and r != partition.leader)
    if not new_isr or sorted(new_isr) != sorted(rest):
        raise ZlogError(ErrorCode.INVALID_REQUEST,
                        f"{where}: a resigning leader proposes the ISR {list(rest)} without "
                        f"itself, not {list(new_isr)}")
    leader = elect(replace(partition, leader=NO_LEADER), rest, live)
    if leader == NO_LEADER:
        raise ZlogError(ErrorCode.INELIGIBLE_REPLICA,
                        f"{where}: no in-sync replica can take over from {partition.leader}")
    return _change(topic, partition, leader, rest)


def decide(state: ClusterState, round_input: RoundInput) -> RoundOutcome:
    """One round: broker changes first, then every partition they affect, then ISR requests
    for partitions this round leaves alone (the others are refused: their record moved)."""
    brokers = _broker_changes(state, round_input)
    live = liveness(state, brokers)
    partitions: dict[tuple[str, int], PartitionChange] = {}
    for topic in state.topics.values():
        for partition in topic.partitions:
            moved = healed(topic.name, partition, live)
            if moved is None:
                moved = completed(topic.name, partition, live.usable)
            if moved is None and round_input.preferred_elections:
                moved = preferred(topic.name, partition, live)
            if topic.name in round_input.unclean_topics:
                moved = unclean(topic.name, partition, moved, live) or moved
            if moved is not None:
                partitions[(topic.name, partition.partition)] = moved
    answers: list[ZlogError | None] = []
    for request in round_input.isr_requests:
        key = (request.topic, request.partition)
        if key in partitions:
            answers.append(ZlogError(ErrorCode.INVALID_UPDATE_VERSION,
                                     f"{request.topic}-{request.partition} changed meanwhile"))
            continue
        try:
            partitions[key] = checked_isr_request(state, request, live)
        except ZlogError as error:
            answers.append(error)
            continue
        answers.append(None)
    return RoundOutcome(ClusterChange(tuple(brokers), tuple(partitions.values())),
                        tuple(answers))


def _broker_changes(state: ClusterState, round_input: RoundInput) -> list[BrokerChange]:
    changes: list[BrokerChange] = []
    holding = {replica for topic in state.topics.values() for partition in topic.partitions
               for replica in partition.replicas}
    for node_id, registration in state.brokers.items():
        if registration.draining and node_id not in holding:
            changes.append(BrokerChange(node_id, registration.broker_epoch, unregister=True))
            continue
        fenced: bool | None = None
        if node_id in round_input.expired and not registration.fenced:
            fenced = True
        elif (node_id in round_input.heard_from and registration.fenced
              and node_id not in round_input.expired):
            fenced = False
        shutting = True if (node_id in round_input.shutting_down
                            and not registration.shutting_down) else None
        endpoints: tuple[str, ...] | None = None
        update = round_input.endpoints.get(node_id)
        if update is not None and update[0] == registration.broker_epoch and (
                update[1] != registration.worker_endpoints):
            endpoints = update[1]
        kafka_endpoints: tuple[str, ...] | None = None
        kafka_update = round_input.kafka_endpoints.get(node_id)
        if kafka_update is not None and kafka_update[0] == registration.broker_epoch and (
                kafka_update[1] != registration.worker_kafka_endpoints):
            kafka_endpoints = kafka_update[1]
        if (fenced is not None or shutting is not None or endpoints is not None
                or kafka_endpoints is not None):
            changes.append(BrokerChange(node_id, registration.broker_epoch, fenced, shutting,
                                        endpoints, worker_kafka_endpoints=kafka_endpoints))
    return changes


def liveness(state: ClusterState, changes: Sequence[BrokerChange] = ()) -> Liveness:
    """Who is usable and alive once `changes` apply."""
    changed = {change.node_id: change for change in changes}
    usable_ids: set[int] = set()
    alive_ids: set[int] = set()
    for node_id, registration in state.brokers.items():
        change = changed.get(node_id)
        fenced, shutting = registration.fenced, registration.shutting_down
        if change is not None and change.fenced is not None:
            fenced = change.fenced
        if change is not None and change.shutting_down is not None:
            shutting = change.shutting_down
        if not fenced:
            alive_ids.add(node_id)
            if not shutting:
                usable_ids.add(node_id)
    return Liveness(frozenset(usable_ids), frozenset(alive_ids),
                    {node_id: r.dir_id for node_id, r in state.brokers.items()})


def placeable(state: ClusterState) -> list[int]:
    """The brokers a new replica may go to: usable and not being removed, in id order."""
    usable = liveness(state).usable
    return sorted(node_id for node_id in usable if not state.brokers[node_id].draining)


def shutdown_ready(state: ClusterState, broker: int) -> bool:
    """Whether a broker shutting down may stop now: it leads nothing that another usable ISR
    member could lead, and is in no ISR beside another usable member."""
    live = liveness(state)
    for topic in state.topics.values():
        for partition in topic.partitions:
            others = [r for r in partition.isr if r != broker and r in live.usable]
            if others and (partition.leader == broker or broker in partition.isr):
                return False
    return True
