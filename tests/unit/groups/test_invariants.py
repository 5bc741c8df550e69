"""Seeded random runs of both group protocols, checking the safety invariants after every step.

Clients are modelled as the protocol asks them to behave (revoke what they are told to, report
what they hold, rejoin when fenced); the coordinator is the real one. The random driver joins,
leaves, crashes (a crashed client just stops: its session expires) and changes subscriptions,
then lets the group settle and checks every subscribed partition is owned. A failure names its
seed; rerun one with `-k 'seed-17'`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import pytest

from tests.unit.groups.coordinator_driver import Driver
from zlog.errors import ErrorCode
from zlog.groups.assignors import assign_classic_group
from zlog.groups.classic.consumer_protocol import decode_assignment
from zlog.groups.classic.group import ClassicGroup, ClassicState
from zlog.groups.server_side.group import ConsumerGroup
from zlog.groups.server_side.records import group_from_records
from zlog.transport.messages.groups import (
    GroupHeartbeatRequestV0,
    GroupHeartbeatResponseV0,
    HeartbeatResponseV0,
    JoinGroupResponseV0,
    LeaveGroupRequestV0,
    SyncGroupResponseV0,
)
from zlog.types import TopicPartition

COUNTS = {"x": 5, "y": 3}
TOPIC_CHOICES = (("x",), ("y",), ("x", "y"))
STEP_MS = 1_000
SETTLE_STEPS = 200
CHURN_STEPS = 120
SEEDS = range(25)


def run_seeded(seed: int, body: Callable[[random.Random], None]) -> None:
    try:
        body(random.Random(seed))
    except AssertionError as error:
        raise AssertionError(f"seed {seed}: {error}") from error


def subscribed_partitions(topics: set[str]) -> set[TopicPartition]:
    return {TopicPartition(t, p) for t in topics for p in range(COUNTS[t])}


class Client(Protocol):
    alive: bool
    topics: tuple[str, ...]
    holds: set[TopicPartition]

    def act(self, d: Driver) -> None: ...

    def leave(self, d: Driver) -> None: ...

    def restart(self, d: Driver, new_member_id: str) -> None: ...


C = TypeVar("C", bound=Client)


def churn_then_settle(
    rng: random.Random,
    new_client: Callable[[str, tuple[str, ...]], C],
    check: Callable[[Driver, list[C]], None],
    settled: Callable[[Driver, list[C]], bool],
) -> None:
    """Random joins, leaves, crashes, restarts and subscription changes with the clients acting in a
    random order, `check` after every action; then everyone alive acts every step until the
    group settles with every subscribed partition owned."""
    d = Driver(counts=dict(COUNTS), seed=rng.randrange(2**32))
    clients: list[C] = []
    for step in range(CHURN_STEPS):
        alive = [c for c in clients if c.alive]
        roll = rng.random()
        if roll < 0.15 or not alive:
            clients.append(new_client(f"m{step}", rng.choice(TOPIC_CHOICES)))
        elif roll < 0.22:
            rng.choice(alive).leave(d)
        elif roll < 0.28:
            rng.choice(alive).alive = False  # crash: stops consuming and heartbeating
        elif roll < 0.35:
            rng.choice(alive).topics = rng.choice(TOPIC_CHOICES)
        elif roll < 0.40:
            rng.choice(alive).restart(d, f"r{step}")  # a new process, same instance id
        for client in rng.sample(alive, len(alive)):
            if client.alive and rng.random() < 0.8:
                client.act(d)
                check(d, clients)
        d.tick(STEP_MS)
        check(d, clients)
    alive = [c for c in clients if c.alive]
    wanted = subscribed_partitions({t for c in alive for t in c.topics})
    for _ in range(SETTLE_STEPS):
        for client in alive:
            client.act(d)
            check(d, clients)
        if settled(d, clients) and set().union(*(c.holds for c in alive)) == wanted:
            return
        d.tick(STEP_MS)
    raise AssertionError(f"not every subscribed partition is owned after {SETTLE_STEPS} steps")


# --- server-side protocol -----------------------------------------------------------------


@dataclass
class HeartbeatClient:
    """A member of a server-side group; every other one is static (its instance id is the
    name it was created with)."""

    member_id: str
    topics: tuple[str, ...]
    epoch: int = 0
    holds: set[TopicPartition] = field(default_factory=set)
    alive: bool = True
    instance_id: str | None = None

    def __post_init__(self) -> None:
        if int(self.member_id[1:]) % 2 == 0:
            self.instance_id = f"i-{self.member_id}"

    def fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"owned": tuple(sorted(self.holds)),
                                     "group_instance_id": self.instance_id}
        if self.epoch == 0:
            fields.update(subscribed_topics=self.topics, rebalance_timeout_ms=30_000, owned=())
        else:
            fields["subscribed_topics"] = self.topics
        return fields

    def request(self, d: Driver) -> GroupHeartbeatResponseV0:
        response = d.send(GroupHeartbeatRequestV0, group_id="g", member_id=self.member_id,
                          member_epoch=self.epoch, **self.fields())
        assert isinstance(response, GroupHeartbeatResponseV0)
        return response

    def leave(self, d: Driver) -> None:
        self.holds.clear()
        self.alive = False
        d.send(GroupHeartbeatRequestV0, group_id="g", member_id=self.member_id, member_epoch=-1,
               group_instance_id=self.instance_id)

    def restart(self, d: Driver, new_member_id: str) -> None:
        """Stop consuming; a static member says it will be back (-2), then the new process
        joins under a new member id."""
        if self.instance_id is not None and self.epoch > 0:
            d.send(GroupHeartbeatRequestV0, group_id="g", member_id=self.member_id,
                   member_epoch=-2, group_instance_id=self.instance_id)
        self.holds, self.epoch, self.member_id = set(), 0, new_member_id

    def act(self, d: Driver) -> None:
        self.apply(self.request(d))

    def apply(self, response: GroupHeartbeatResponseV0) -> None:
        if response.error_code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            self.holds, self.epoch = set(), 0  # lost: drop everything, rejoin as the same id
            return
        if response.error_code == ErrorCode.UNRELEASED_INSTANCE_ID:
            return  # the old process still holds the instance: retry later
        assert response.error_code == ErrorCode.NONE, response
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.holds = set(response.assignment)


@dataclass
class LongPollClient(HeartbeatClient):
    """Asks to be held (a long poll): its answer may come in the output of another member's
    request or of a timer, and it sends nothing until it has come."""

    pending: int | None = None
    max_wait_ms: int = 1_000

    def act(self, d: Driver) -> None:
        if self.pending is None:
            self.pending = d.handle(GroupHeartbeatRequestV0(
                group_id="g", member_id=self.member_id, member_epoch=self.epoch,
                max_wait_ms=self.max_wait_ms, **self.fields()))
        response = d.reply(self.pending)
        if response is None:
            return  # held
        assert isinstance(response, GroupHeartbeatResponseV0)
        self.pending = None
        self.apply(response)

    def leave(self, d: Driver) -> None:
        self.pending = None
        super().leave(d)

    def restart(self, d: Driver, new_member_id: str) -> None:
        self.pending = None  # the old process's answer goes nowhere
        super().restart(d, new_member_id)


def check_server_side(d: Driver, clients: list[HeartbeatClient]) -> None:
    group = d.coordinator.groups.get("g")
    held: dict[TopicPartition, str] = {}
    for client in clients:
        if not client.alive:
            continue
        for tp in client.holds:
            assert tp not in held, f"{tp} consumed by {held[tp]} and {client.member_id}"
            held[tp] = client.member_id
        if client.holds:
            assert isinstance(group, ConsumerGroup)
            member = group.members.get(client.member_id)
            assert member is not None, f"{client.member_id} consumes but is not a member"
            assert client.holds <= member.holds(), f"{client.member_id} holds more than granted"
    if isinstance(group, ConsumerGroup):
        owners: dict[TopicPartition, str] = {}
        for member_id, member in sorted(group.members.items()):
            for tp in member.holds():
                assert tp not in owners, f"server: {tp} held by {owners[tp]} and {member_id}"
                owners[tp] = member_id
                epoch = member.previous_epoch if member.epoch == -2 else member.epoch
                assert epoch >= member.assigned.get(tp, member.pending_revocation.get(tp, 0))
        assert owners == group.owner
    # State = replay: the log, replayed, gives back the group as it is in memory.
    loaded = d.view.groups.get("g")
    rebuilt = group_from_records("g", loaded.consumer) if loaded and loaded.consumer else None
    assert rebuilt == (group if isinstance(group, ConsumerGroup) else None)


def server_side_settled(d: Driver, clients: list[HeartbeatClient]) -> bool:
    group = d.coordinator.groups.get("g")
    return isinstance(group, ConsumerGroup) and group.state.value == "Stable"


def server_side_run(rng: random.Random) -> None:
    churn_then_settle(rng, HeartbeatClient, check_server_side, server_side_settled)


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed-{s}")
def test_server_side_ownership_is_exclusive_and_complete(seed: int) -> None:
    run_seeded(seed, server_side_run)


def long_poll_run(rng: random.Random) -> None:
    def new_client(member_id: str, topics: tuple[str, ...]) -> LongPollClient:
        return LongPollClient(member_id, topics, max_wait_ms=rng.choice((0, 500, 1_000, 5_000)))

    churn_then_settle(rng, new_client, check_server_side, server_side_settled)


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed-{s}")
def test_server_side_with_held_heartbeats_ownership_is_exclusive_and_complete(
        seed: int) -> None:
    """Held heartbeats move members without a request of theirs: the same promises hold."""
    run_seeded(seed, long_poll_run)


# --- classic protocol, cooperative-sticky --------------------------------------------------


@dataclass
class ClassicClient:
    """A cooperative consumer: sends what it owns when it joins, revokes what the new
    assignment leaves out, and rejoins at once if it revoked anything (KIP-429)."""

    topics: tuple[str, ...]
    member_id: str = ""
    generation: int = -1
    holds: set[TopicPartition] = field(default_factory=set)
    join_request: int | None = None
    sync_request: int | None = None
    alive: bool = True
    rejoin: bool = True
    joined_topics: tuple[str, ...] = ()

    def restart(self, d: Driver, new_member_id: str) -> None:
        """A new process: everything held is gone, replies to the old one are ignored."""
        del d, new_member_id
        self.lose()
        self.member_id, self.join_request, self.sync_request = "", None, None

    def lose(self) -> None:
        self.holds, self.generation, self.rejoin = set(), -1, True

    def leave(self, d: Driver) -> None:
        self.alive = False
        if self.member_id:
            d.send(LeaveGroupRequestV0, group_id="g", members=((self.member_id, None),))

    def act(self, d: Driver) -> None:
        if self.topics != self.joined_topics:
            self.joined_topics, self.rejoin = self.topics, True
        if self.join_request is not None:
            self._joined(d, d.reply(self.join_request))
        elif self.sync_request is not None:
            self._synced(d.reply(self.sync_request))
        elif self.rejoin:
            self.rejoin = False
            self.join_request = d.join("g", self.member_id, topics=self.topics,
                                       protocols=("cooperative-sticky",),
                                       owned=tuple(sorted(self.holds)),
                                       generation=self.generation)
            self._joined(d, d.reply(self.join_request))
        else:
            response = d.heartbeat(self.member_id, self.generation)
            assert isinstance(response, HeartbeatResponseV0)
            if response.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                self.rejoin = True
            elif response.error_code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
                if response.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                self.lose()

    def _joined(self, d: Driver, response: object) -> None:
        if response is None:
            return  # parked
        assert isinstance(response, JoinGroupResponseV0)
        self.join_request = None
        if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id, self.rejoin = response.member_id, True
            return
        if response.error_code != ErrorCode.NONE:
            if response.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self.lose()
            return
        self.member_id, self.generation = response.member_id, response.generation
        assignments: dict[str, bytes] = {}
        if response.members:
            members = [(m.member_id, m.group_instance_id, m.metadata) for m in response.members]
            assignments = assign_classic_group(response.protocol_name or "", members, COUNTS)
        self.sync_request = d.sync(self.member_id, self.generation, assignments)
        self._synced(d.reply(self.sync_request))

    def _synced(self, response: object) -> None:
        if response is None:
            return  # parked until the leader syncs
        assert isinstance(response, SyncGroupResponseV0)
        self.sync_request = None
        if response.error_code != ErrorCode.NONE:
            if response.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                self.lose()
            self.rejoin = True
            return
        assigned = set(decode_assignment(response.assignment).partitions)
        revoked = self.holds - assigned
        self.holds = assigned
        if revoked:
            self.rejoin = True


def check_classic(d: Driver, clients: list[ClassicClient]) -> None:
    by_generation: dict[int, dict[TopicPartition, str]] = {}
    for client in clients:
        if not client.alive:
            continue
        held = by_generation.setdefault(client.generation, {})
        for tp in client.holds:
            assert tp not in held, (
                f"generation {client.generation}: {tp} owned by {held[tp]} and {client.member_id}")
            held[tp] = client.member_id
    group = d.coordinator.groups.get("g")
    if isinstance(group, ClassicGroup) and group.state is ClassicState.STABLE:
        logged = d.replayed().groups["g"].metadata
        assert logged is not None and logged.generation == group.generation
        assert {m.member_id for m in logged.members} == set(group.members)


def classic_settled(d: Driver, clients: list[ClassicClient]) -> bool:
    group = d.coordinator.groups.get("g")
    return (isinstance(group, ClassicGroup) and group.state is ClassicState.STABLE
            and all(not c.rejoin and c.join_request is None and c.sync_request is None
                    for c in clients if c.alive))


def classic_run(rng: random.Random) -> None:
    churn_then_settle(rng, lambda _, topics: ClassicClient(topics), check_classic,
                      classic_settled)


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed-{s}")
def test_classic_cooperative_ownership_is_exclusive_and_complete(seed: int) -> None:
    run_seeded(seed, classic_run)
