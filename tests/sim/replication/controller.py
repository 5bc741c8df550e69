"""The controller: zlog's `decide` rounds over a ClusterState, with a commit delay and failover.

It plays `ControllerService` (controller/service.py) over the simulated network: registrations
and round changes are proposals that commit after a random delay (the metadata log's
replication), in order; a round runs only when none is committing; AlterPartition requests
wait for the next round and are answered once its change committed. Sessions expire after
`session_ticks` without a heartbeat.

Failover models the Raft leader of the metadata log dying: for a few ticks nobody answers;
a proposal in flight either committed already (it reached a majority) or is lost, and its
answers are lost either way; queued requests are lost. The new controller gives every
registered broker a fresh session (`ControllerService.set_active`), which unfences nobody
until that broker heartbeats (`controller/sessions.py`).

A heartbeat is answered fenced while the broker's registration is fenced or the round being
committed fences it: only an unfenced answer renews the broker's lease (broker.py), so no lease
outlasts the session the controller fences by. Besides sessions, the controller watches its
connection to each broker (`broker_probes.py`): a broker whose port refuses connections (its
process is dead), silent since, is fenced at once (`wiring.fenced_early`).

Every commit goes to the ghost (`on_commit`) and to every broker (MetadataPush): brokers apply
what they receive, so a broker cut off from the controller keeps acting on old metadata.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from typing import Protocol

from tests.sim.replication.messages import (
    CONTROLLER,
    AlterIsr,
    AlterIsrAnswer,
    Envelope,
    Heartbeat,
    HeartbeatAnswer,
    MetadataPush,
    Register,
    Registered,
)
from tests.sim.replication.profile import Profile
from tests.sim.replication.wiring import Wiring
from zlog.broker.control.controller.decisions import IsrRequest, RoundInput
from zlog.broker.control.controller.sessions import (
    Session,
    expired,
    heard_from,
    heartbeat,
    replaced,
)
from zlog.broker.control.metadata.apply import apply_command
from zlog.broker.control.metadata.commands import (
    BrokerRegistered,
    Command,
    CreateTopic,
    RegisterBroker,
)
from zlog.broker.control.metadata.state import ClusterState
from zlog.errors import ErrorCode, ZlogError

TOPIC = "t"

Send = Callable[[int, int, object], None]
Done = Callable[[object, ZlogError | None], None]


@dataclass(slots=True)
class _Proposal:
    commit_at: int
    command: Command
    done: Done


class Reach(Enum):
    """What the controller's probe of a broker's control port finds (broker_probes.py)."""

    CONNECTED = "connected"  # its connection is up (a paused process keeps it up)
    DROPPED = "dropped"  # its connection is down, and a connect hangs: the network is cut
    REFUSED = "refused"  # nothing listens at its port: its process is dead


class CommitListener(Protocol):
    def on_commit(self, before: ClusterState, after: ClusterState, command: Command,
                  error: ZlogError | None) -> None: ...

    def log(self, line: str) -> None: ...

    def reach(self, broker: int) -> Reach: ...


class SimController:
    def __init__(self, profile: Profile, wiring: Wiring, rng: random.Random, send: Send,
                 listener: CommitListener) -> None:
        self.profile, self.wiring, self.rng = profile, wiring, rng
        self.send = send
        self.listener = listener
        self.state = ClusterState()
        self.version = 0
        self.sessions: dict[int, Session] = {}
        self.fencing: frozenset[int] = frozenset()  # brokers the round in flight fences
        self.down_since: dict[int, int] = {}  # broker -> since when its connection is down
        self.refused: frozenset[int] = frozenset()  # brokers whose port refuses connections
        self.queued: list[tuple[int, int, IsrRequest]] = []  # (broker, request id, request)
        self.pipeline: list[_Proposal] = []
        self.round_in_flight = False
        self.next_round = 0
        self.next_preferred = profile.preferred_every_ticks
        self.down_until = -1
        self.failovers = 0
        self.unclean_topics: frozenset[str] = frozenset()  # set by an operator, at heal
        self.now = 0

    # -- bootstrap (before the clock starts) ------------------------------------------------

    def bootstrap(self, brokers: list[int], assignment: tuple[tuple[int, ...], ...],
                  directories: dict[int, str]) -> None:
        for broker in brokers:
            self._commit(self._register_command(broker, f"{broker}.1", directories[broker]))
            self.sessions[broker] = Session(self.state.brokers[broker].broker_epoch, 0, True)
        self._commit(CreateTopic(TOPIC, len(assignment), len(assignment[0]),
                                 {"min.insync.replicas": str(self.profile.min_insync)},
                                 assignment))

    @staticmethod
    def _register_command(broker: int, incarnation: str, dir_id: str) -> RegisterBroker:
        return RegisterBroker(broker, f"h{broker}", f"tcp://h{broker}:7400", "sim",
                              incarnation_id=incarnation, workers=1, dir_id=dir_id)

    # -- the commit pipeline ---------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.now >= self.down_until

    def _propose(self, command: Command, done: Done) -> None:
        last = self.pipeline[-1].commit_at if self.pipeline else self.now
        delay = self.rng.randint(1, self.profile.commit_delay_max)
        self.pipeline.append(_Proposal(max(last, self.now + delay), command, done))

    def _commit(self, command: Command) -> tuple[object, ZlogError | None]:
        before = self.state
        try:
            after, result = apply_command(before, command)
            error = None
        except ZlogError as refused:
            after, result, error = before, None, refused
        self.state = replace(after, applied_commands=before.applied_commands + 1)
        self.version += 1
        self.listener.on_commit(before, self.state, command, error)
        return result, error

    def _push(self) -> None:
        for broker in sorted(self.state.brokers):
            self.send(CONTROLLER, broker, MetadataPush(self.state, self.version))

    # -- time ------------------------------------------------------------------------------

    def tick(self, now: int) -> None:
        self.now = now
        if not self.active:
            return
        if now == self.down_until:
            self.sessions = self.wiring.taken_over(self.state, now)
            self.listener.log("controller active again: fresh sessions for every broker")
        while self.pipeline and self.pipeline[0].commit_at <= now:
            proposal = self.pipeline.pop(0)
            result, error = self._commit(proposal.command)
            proposal.done(result, error)
            self._push()
        self._probe(now)
        if self.round_in_flight or now < self.next_round:
            return
        self.next_round = now + self.profile.round_ticks
        self._round(now)

    def _round(self, now: int) -> None:
        state = self.state
        preferred = now >= self.next_preferred
        if preferred:
            self.next_preferred = now + self.profile.preferred_every_ticks
        queued, self.queued = self.queued, []
        requests = self.wiring.isr_requests(state, tuple(q[2] for q in queued))
        timeout = self.profile.session_ticks
        gone = self._fenced_early(now)
        lapsed = expired(state, self.sessions, now, timeout) | gone
        heard = heard_from(state, self.sessions, now, timeout)
        outcome = self.wiring.decide(state, RoundInput(
            expired=lapsed, heard_from=heard, isr_requests=requests,
            preferred_elections=preferred, unclean_topics=self.unclean_topics))
        accepted: list[tuple[int, int]] = []
        for (broker, request_id, _), answer in zip(queued, outcome.answers, strict=True):
            if answer is None:
                accepted.append((broker, request_id))
            else:
                self.send(CONTROLLER, broker, AlterIsrAnswer(request_id, answer.code))
        if outcome.empty:
            return
        self.round_in_flight = True
        self.fencing = frozenset(b.node_id for b in outcome.change.brokers if b.fenced)
        self.wiring.fencing(self.sessions, self.fencing, gone & self.fencing)

        def done(result: object, error: ZlogError | None) -> None:
            del result
            self.round_in_flight = False
            self.fencing = frozenset()
            code = ErrorCode.NONE if error is None else error.code
            for broker, request_id in accepted:
                self.send(CONTROLLER, broker, AlterIsrAnswer(request_id, code))

        self._propose(outcome.change, done)

    # -- probes (broker_probes.py, ControllerService.set_unreachable) ---------------------

    def _probe(self, now: int) -> None:
        """Note whose connection went down, and when; a broker whose port newly refuses
        connections is fenced by a round that runs at once."""
        refused = set()
        for b in sorted(self.state.brokers):
            reach = self.listener.reach(b)
            if reach == Reach.CONNECTED:
                self.down_since.pop(b, None)
                continue
            self.down_since.setdefault(b, now)
            if reach == Reach.REFUSED:
                refused.add(b)
        if refused - self.refused and not self.round_in_flight:
            self.next_round = min(self.next_round, now)
        self.refused = frozenset(refused)

    def _fenced_early(self, now: int) -> frozenset[int]:
        """Brokers fenced before their session ends (ControllerService._gone)."""
        last_heard = {b: s.last_heartbeat_ms for b, s in self.sessions.items()}
        return self.wiring.fenced_early(self.down_since, self.refused, last_heard, now,
                                        self.profile.heartbeat_ticks)

    # -- failover --------------------------------------------------------------------------

    def fail_over(self, now: int, down_ticks: int) -> None:
        """The metadata log's leader dies; another takes over after `down_ticks`."""
        self.failovers += 1
        self.down_until = now + down_ticks
        kept: list[_Proposal] = []
        for proposal in self.pipeline:
            if self.rng.random() < 0.5:  # it reached a majority: it commits, unanswered
                kept.append(_Proposal(proposal.commit_at, proposal.command, _unanswered))
        self.pipeline = [replace(p, commit_at=max(p.commit_at, self.down_until)) for p in kept]
        self.queued = []
        self.round_in_flight = False
        self.fencing = frozenset()
        self.down_since, self.refused = {}, frozenset()  # the new one has no probe history
        self.next_round = self.down_until
        self.listener.log(f"controller failover: down until {self.down_until}, "
                          f"{len(kept)} proposal(s) still commit")

    # -- messages --------------------------------------------------------------------------

    def receive(self, envelope: Envelope) -> None:
        if not self.active:
            return
        broker, body = envelope.src, envelope.body
        if isinstance(body, Register):
            self._register(broker, body)
        elif isinstance(body, Heartbeat):
            registration = self.state.brokers.get(broker)
            if registration is None or registration.broker_epoch != body.broker_epoch:
                self.send(CONTROLLER, broker, HeartbeatAnswer(
                    ErrorCode.STALE_BROKER_EPOCH, body.broker_epoch, self.state, self.version))
                return
            if not heartbeat(self.sessions, broker, body.broker_epoch, self.now):
                self.send(CONTROLLER, broker, HeartbeatAnswer(
                    ErrorCode.STALE_BROKER_EPOCH, body.broker_epoch, self.state, self.version))
                return
            fenced = registration.fenced or broker in self.fencing
            self.send(CONTROLLER, broker, HeartbeatAnswer(
                ErrorCode.NONE, body.broker_epoch, self.state, self.version, fenced,
                body.sent_at))
        elif isinstance(body, AlterIsr):
            self.queued.append((broker, body.request_id, body.request))

    def _register(self, broker: int, body: Register) -> None:
        arrived = self.now  # heard from then (ControllerService.register)
        registered = self.state.brokers.get(broker)
        if registered is not None and registered.incarnation_id != body.incarnation:
            replaced(self.sessions, broker, registered.broker_epoch)
            self.next_round = min(self.next_round, self.now)

        def done(result: object, error: ZlogError | None) -> None:
            if error is not None or not isinstance(result, BrokerRegistered):
                return
            self.sessions[broker] = Session(result.broker_epoch, arrived, True)
            self.send(CONTROLLER, broker, Registered(body.incarnation, result.broker_epoch,
                                                     self.state, self.version))

        self._propose(self._register_command(broker, body.incarnation, body.dir_id), done)


def _unanswered(result: object, error: ZlogError | None) -> None:
    del result, error

