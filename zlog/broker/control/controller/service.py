"""The controller at work: the Raft leader's supervisor answering brokers and deciding rounds.

Active only while this supervisor's Raft node leads and has applied everything committed (the
state it decides from is then the latest). It answers the three controller APIs:

* BrokerRegistration: proposes RegisterBroker and answers, once committed, with the broker
  epoch. A new incarnation gets a new epoch; the same one asking again keeps its own.
* BrokerHeartbeat: notes the broker alive (with its workers' endpoints, and whether it asks
  for a controlled shutdown) and answers at once from the state: fenced or not, and whether a
  broker shutting down may stop now. A broker that the round being committed fences is
  answered fenced already: an unfenced answer would renew its lease past the election of its
  successors. A heartbeat with an old epoch is STALE_BROKER_EPOCH: the broker registers again.
* AlterPartition: queued for the next round, answered once that round's change committed.

Every CONTROLLER_ROUND_MS it runs one round (`controller.decide`): sessions that expired are
fenced, brokers heard from again unfenced, shutdowns and ISR requests applied, and every
partition those touch given a leader from its ISR; the result is one ClusterChange, and the next
round waits until it committed. A controller that just took over gives every registered broker
a fresh session first (it cannot know when they last heard from the old one); a fresh session
is time before fencing, not a sign of life, so a fenced broker stays fenced until it heartbeats
to this controller.

**Fencing never outruns a lease.** A broker leads while its lease runs: until a session after
it sent the last heartbeat answered unfenced, less a margin (`broker_lifecycle.py`). The
session here runs from the arrival of that heartbeat (or from the takeover), so a broker fenced
when its session expired has certainly stopped leading. The only earlier fence is for a broker
whose processes are gone: its control port refuses connections (`broker_probes.py`), which
its workers' lifeline makes safe (`zlog/broker/supervisor_lifeline.py`). A connection to it
that merely dropped, the broker silent since, proves nothing about its workers (a network
that resets connections, a middlebox) and fences nobody before the session ends.

Another supervisor asked any of these answers NOT_CONTROLLER, naming the controller it knows;
so does this one when its metadata log stopped leading before a proposal committed (the answer
names the leader the metadata log knew of: `raft.errors.NotLeaderError`).
Pure but for the clock it is handed; the supervisor routes requests to it and proposes for it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from zlog import limits
from zlog.broker.control.controller.decisions import IsrRequest, RoundInput, decide, shutdown_ready
from zlog.broker.control.controller.sessions import (
    Session,
    expired,
    fencing,
    heard_from,
    heartbeat,
    replaced,
    taken_over,
)
from zlog.broker.control.metadata.apply import retired_message
from zlog.broker.control.metadata.commands import (
    BrokerRegistered,
    ClusterChange,
    Propose,
    RegisterBroker,
    Result,
)
from zlog.broker.control.metadata.state import ClusterState
from zlog.broker.topic_configs import effective_topic_configs, unclean_election_enabled
from zlog.errors import ErrorCode, ZlogError
from zlog.raft.errors import NotLeaderError
from zlog.transport.messages import Response
from zlog.transport.messages.admin import ElectLeadersResponseV0
from zlog.transport.messages.cluster import (
    AlterPartitionRequestV0,
    AlterPartitionResponseV0,
    BrokerHeartbeatRequestV0,
    BrokerHeartbeatResponseV0,
    BrokerRegistrationRequestV0,
    BrokerRegistrationResponseV0,
)

log = logging.getLogger(__name__)

CONTROLLER_ROUND_MS: Final = 50  # how often the controller looks for something to decide
TURN_GAP_MS_MAX: Final = 500
"""A tick this long after the last one means the supervisor's loop stalled: whatever time it
took beyond this is not counted against anyone's session (the heartbeats of that time wait
unread in the control socket; a stall past `controller_stall_timeout_ms` hands the controller
off instead). Only the excess is credited, so a loop that is merely slow still fences a broker
that went silent, later rather than never. Fencing later is always safe for the lease."""

Answer = Callable[[Response], None]


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    session_timeout_ms: int
    leader_imbalance_check_interval_ms: int
    auto_leader_rebalance: bool = True
    topic_defaults: Mapping[str, str] = field(default_factory=dict)  # the broker's


@dataclass(slots=True)
class _Queued:
    request: IsrRequest
    answer: Answer


@dataclass(slots=True)
class ControllerService:
    node_id: int
    settings: ControllerSettings
    state: Callable[[], ClusterState]
    propose: Propose
    active: bool = False
    _sessions: dict[int, Session] = field(default_factory=dict)
    _isr_requests: list[_Queued] = field(default_factory=list)
    _in_flight: bool = False  # a round's ClusterChange is being committed
    _next_round_ms: int = 0
    _next_preferred_ms: int = 0
    _now_ms: int = 0  # the time of the last tick, for answers that come later
    _unreachable: dict[int, int] = field(default_factory=dict)  # node → probe down since (ms)
    _refused: frozenset[int] = frozenset()  # unreachable, and nothing listens at its port
    _fencing: frozenset[int] = frozenset()  # brokers the round being committed fences
    _elections: list[Answer] = field(default_factory=list)  # ElectLeaders for the next round

    # -- becoming (and stopping being) the controller -------------------------------------

    def set_active(self, active: bool, now_ms: int) -> None:
        if active == self.active:
            return
        self.active = active
        if active:
            log.info("node %d is the controller", self.node_id)
            self._now_ms = now_ms  # a stall is counted from here, not from an older turn
            self._sessions = taken_over(self.state(), now_ms)
            self._next_preferred_ms = now_ms + self.settings.leader_imbalance_check_interval_ms
        else:
            for queued in self._isr_requests:
                queued.answer(_alter_answer(ErrorCode.NOT_CONTROLLER, "the controller moved",
                                            -1))
            self._isr_requests.clear()
            self._sessions.clear()
            self._unreachable.clear()
            self._refused = frozenset()
            self._fencing = frozenset()
            for answer in self._elections:
                answer(ElectLeadersResponseV0(int(ErrorCode.NOT_CONTROLLER),
                                              "the controller moved"))
            self._elections.clear()

    # -- the APIs ---------------------------------------------------------------------------

    def register(self, request: BrokerRegistrationRequestV0, answer: Answer) -> None:
        state = self.state()
        if request.cluster_id and state.cluster_id and request.cluster_id != state.cluster_id:
            answer(BrokerRegistrationResponseV0(
                int(ErrorCode.INCONSISTENT_CLUSTER_ID),
                f"this is cluster {state.cluster_id}, not {request.cluster_id}", "", -1,
                self.node_id))
            return
        if request.incarnation_id and state.retired.get(request.node_id) == \
                request.incarnation_id:  # a drained broker's process: not without a restart
            answer(BrokerRegistrationResponseV0(
                int(ErrorCode.BROKER_ID_NOT_REGISTERED), retired_message(request.node_id), "",
                -1, self.node_id))
            return
        # The first broker of a new cluster names it.
        cluster_id = request.cluster_id or state.cluster_id or uuid.uuid4().hex
        command = RegisterBroker(request.node_id, request.host, request.control_endpoint,
                                 cluster_id, request.incarnation_id,
                                 request.workers, request.rack, request.dir_id)
        registered = state.brokers.get(request.node_id)
        if registered is not None and registered.incarnation_id != request.incarnation_id:
            replaced(self._sessions, request.node_id, registered.broker_epoch)
            self._next_round_ms = min(self._next_round_ms, self._now_ms)
        # Heard from when the request came, not when it committed: the process may have died
        # meanwhile, its port refusing since (which only a later sign of life outweighs).
        arrived_ms = self._now_ms

        def done(result: Result | None, error: ZlogError | None) -> None:
            if error is not None or not isinstance(result, BrokerRegistered):
                code = error.code if error is not None else ErrorCode.UNKNOWN_SERVER_ERROR
                answer(BrokerRegistrationResponseV0(int(code), str(error), "", -1,
                                                    self._controller_named(error)))
                return
            self._sessions[request.node_id] = Session(result.broker_epoch, arrived_ms,
                                                      heard=True)
            answer(BrokerRegistrationResponseV0(0, "", result.cluster_id, result.broker_epoch,
                                                self.node_id))

        self.propose(command, done)

    def heartbeat(self, request: BrokerHeartbeatRequestV0, now_ms: int) -> Response:
        broker = self.state().brokers.get(request.node_id)
        if broker is None or broker.broker_epoch != request.broker_epoch:
            return BrokerHeartbeatResponseV0(
                int(ErrorCode.STALE_BROKER_EPOCH),
                f"broker {request.node_id} epoch {request.broker_epoch} is not registered",
                True, False, self.node_id)
        if not heartbeat(self._sessions, request.node_id, request.broker_epoch, now_ms,
                         want_shutdown=request.want_shutdown,
                         worker_endpoints=request.worker_endpoints,
                         worker_kafka_endpoints=request.worker_kafka_endpoints):
            return BrokerHeartbeatResponseV0(
                int(ErrorCode.STALE_BROKER_EPOCH),
                f"broker {request.node_id} epoch {request.broker_epoch} was fenced when its "
                "process was seen gone: register again", True, False, self.node_id)
        ready = broker.shutting_down and shutdown_ready(self.state(), request.node_id)
        fenced = broker.fenced or request.node_id in self._fencing
        return BrokerHeartbeatResponseV0(0, "", fenced, ready, self.node_id)

    def alter_partition(self, request: AlterPartitionRequestV0, answer: Answer) -> None:
        if len(self._isr_requests) >= limits.ISR_REQUESTS_MAX:
            answer(_alter_answer(ErrorCode.THROTTLING_QUOTA_EXCEEDED, "too many ISR "
                                 "changes are waiting", self.node_id))
            return
        self._isr_requests.append(_Queued(IsrRequest(
            request.node_id, request.broker_epoch, request.topic, request.partition,
            request.leader_epoch, request.partition_epoch, request.new_isr,
            dict(request.member_epochs)), answer))

    def elect_preferred(self, answer: Answer) -> None:
        """ElectLeaders: the next round moves every leadership it can back to the preferred
        replica; answered with how many moved, once that round committed."""
        self._elections.append(answer)

    def set_unreachable(self, down_since_ms: Mapping[int, int],
                        refused: frozenset[int] = frozenset()) -> None:
        """The brokers whose control endpoint this controller cannot reach, and since when
        (`broker_probes.py`). Those whose port `refused` a connection (their processes are
        gone), with no heartbeat since, are fenced at once, in a round that runs now; the
        others wait out their session."""
        self._unreachable = dict(down_since_ms)
        if refused - self._refused and not self._in_flight:
            self._next_round_ms = min(self._next_round_ms, self._now_ms)
        self._refused = refused

    # -- rounds ----------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Run a round when one is due and none is committing."""
        stalled_ms = now_ms - self._now_ms - TURN_GAP_MS_MAX
        if self.active and stalled_ms > 0:
            for session in self._sessions.values():
                session.last_heartbeat_ms += stalled_ms
        self._now_ms = now_ms
        if not self.active or self._in_flight or now_ms < self._next_round_ms:
            return
        self._next_round_ms = now_ms + CONTROLLER_ROUND_MS
        state = self.state()
        preferred = (self.settings.auto_leader_rebalance and now_ms >= self._next_preferred_ms)
        if preferred:
            self._next_preferred_ms = now_ms + self.settings.leader_imbalance_check_interval_ms
        elections, self._elections = self._elections, []
        preferred = preferred or bool(elections)
        queued, self._isr_requests = self._isr_requests, []
        outcome = decide(state, RoundInput(
            expired=self._expired(state, now_ms), heard_from=self._heard_from(state, now_ms),
            shutting_down=frozenset(n for n, s in self._sessions.items() if s.want_shutdown),
            endpoints={n: (s.broker_epoch, s.worker_endpoints)
                       for n, s in self._sessions.items() if s.worker_endpoints is not None},
            kafka_endpoints={n: (s.broker_epoch, s.worker_kafka_endpoints)
                             for n, s in self._sessions.items()
                             if s.worker_kafka_endpoints is not None},
            isr_requests=tuple(q.request for q in queued), preferred_elections=preferred,
            unclean_topics=frozenset(
                name for name, topic in state.topics.items()
                if unclean_election_enabled(effective_topic_configs(
                    self.settings.topic_defaults, topic.configs))),
        ))
        for item, error in zip(queued, outcome.answers, strict=True):
            if error is not None:
                item.answer(_alter_answer(error.code, error.message, self.node_id))
        accepted = [item for item, error in zip(queued, outcome.answers, strict=True)
                    if error is None]
        moved = sum(1 for change in outcome.change.partitions
                    if _to_preferred(state, change.topic, change.partition, change.leader)
                    ) if elections else 0
        if outcome.empty:
            for answer in elections:
                answer(ElectLeadersResponseV0(0, "every partition is led by its preferred "
                                                 "replica, or it is not in sync"))
            return
        self._log_change(outcome.change)
        self._warn_unclean(state, outcome.change)
        self._in_flight = True
        self._fencing = frozenset(broker.node_id for broker in outcome.change.brokers
                                  if broker.fenced)
        fencing(self._sessions, self._fencing, frozenset(
            node_id for node_id in self._fencing
            if node_id in self._sessions and self._gone(node_id, self._sessions[node_id])))

        def done(result: Result | None, error: ZlogError | None) -> None:
            del result
            self._in_flight = False
            self._fencing = frozenset()
            code = ErrorCode.NONE if error is None else error.code
            for item in accepted:
                item.answer(_alter_answer(code, "" if error is None else str(error),
                                          self._controller_named(error)))
            for answer in elections:
                answer(ElectLeadersResponseV0(int(code), "" if error is None else str(error),
                                              moved if error is None else 0))
            if error is not None:
                log.warning("controller round not committed: %s", error)

        self.propose(outcome.change, done)

    def _controller_named(self, error: ZlogError | None) -> int:
        """The controller an answer names: this node, unless its metadata log refused the
        proposal because another node leads it (NOT_CONTROLLER): then that node, or -1 when
        the metadata log knew of no leader."""
        if isinstance(error, NotLeaderError):
            return -1 if error.leader_hint is None else error.leader_hint
        return self.node_id

    def _expired(self, state: ClusterState, now_ms: int) -> frozenset[int]:
        """Brokers silent past their session, or gone. A registration this controller has no
        session for yet (applied here before its answer went out) starts one now: it is not
        silent."""
        for node_id, broker in state.brokers.items():
            session = self._sessions.get(node_id)
            if session is None or session.broker_epoch < broker.broker_epoch:
                self._sessions[node_id] = Session(broker.broker_epoch, now_ms)
        return expired(state, self._sessions, now_ms, self.settings.session_timeout_ms) | {
            node_id for node_id in state.brokers
            if self._gone(node_id, self._sessions[node_id])}

    def _heard_from(self, state: ClusterState, now_ms: int) -> frozenset[int]:
        return frozenset(
            node_id for node_id in heard_from(state, self._sessions, now_ms,
                                              self.settings.session_timeout_ms)
            if not self._gone(node_id, self._sessions[node_id]))

    def _gone(self, node_id: int, session: Session) -> bool:
        """Its processes are gone: unreachable, nothing listening at its control port, and
        silent since it became unreachable (a heartbeat since means it came back)."""
        down_since_ms = self._unreachable.get(node_id)
        return (down_since_ms is not None and node_id in self._refused
                and session.last_heartbeat_ms <= down_since_ms)

    def _log_change(self, change: ClusterChange) -> None:
        for broker in change.brokers:
            if broker.fenced is not None:
                log.warning("broker %d %s", broker.node_id,
                            self._fence_reason(broker.node_id) if broker.fenced
                            else "unfenced")
            if broker.shutting_down:
                log.info("broker %d is shutting down: moving its leaderships", broker.node_id)
        for partition in change.partitions:
            log.info("%s-%d: leader %d epoch %d, ISR %s", partition.topic, partition.partition,
                     partition.leader, partition.leader_epoch, list(partition.isr))


    @staticmethod
    def _warn_unclean(state: ClusterState, change: ClusterChange) -> None:
        for partition_change in change.partitions:
            before = state.partition(partition_change.topic, partition_change.partition)
            if (before is not None and partition_change.leader >= 0
                    and partition_change.leader not in before.isr):
                log.warning("%s-%d: unclean leader election: broker %d leads though it was "
                            "not in sync; records only the old ISR %s held are lost",
                            partition_change.topic, partition_change.partition,
                            partition_change.leader, list(before.isr))

    def _fence_reason(self, node_id: int) -> str:
        if node_id in self._refused:
            return "fenced: its control port refuses connections (its process is gone)"
        if node_id in self._unreachable:
            return ("fenced: no heartbeat within the session timeout, and its control "
                    "endpoint is unreachable")
        return "fenced: no heartbeat within the session timeout"


def _to_preferred(state: ClusterState, topic: str, index: int, leader: int) -> bool:
    """Whether a change gives the partition's leadership back to its first replica."""
    partition = state.partition(topic, index)
    return (partition is not None and leader != partition.leader
            and leader == partition.replicas[0])


def _alter_answer(code: ErrorCode, message: str, controller_id: int) -> AlterPartitionResponseV0:
    return AlterPartitionResponseV0(int(code), message, controller_id)

