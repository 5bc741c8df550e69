"""Scripted scenarios (docs/simulation.md, Scripted scenarios): the worked cases of
docs/replication.md, and the cases the rarer planted bugs need, as fixed schedules.

A random seed meets some cases only once in hundreds of runs: a follower's answer arriving
after its leader changed, a replica elected between its truncation and its refetch, a
leader's ISR proposal overtaken by the controller's own change. A scenario drives the same
simulated cluster (zlog's own rules, the same checker) through one such case on purpose, step
by step, each step waiting (with a deadline) for the state the next one needs; then the
cluster heals and must be live again, as after any seed. With zlog's rules every scenario
passes; with each bug it `exposes` (bugs.py), a check that bug is known by fails.

Brokers are numbered from 1 (A, B, C in the cases' text), and partition 0 has the replicas
(1, 2, 3), or (1, 2) with a replication factor of 2. Timeouts are short and fixed
(`scripted_profile`): nothing random happens except what the seed decides among equal
choices, so `python -m tests.sim.replication --scenario NAME [--bug BX]` replays one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tests.sim.replication.broker import Status
from tests.sim.replication.checker import InvariantViolation
from tests.sim.replication.clients import CONSUMER_BASE, PRODUCER_BASE
from tests.sim.replication.controller import TOPIC
from tests.sim.replication.messages import (
    CONTROLLER,
    AlterIsr,
    ConsumerFetch,
    Envelope,
    Register,
    ReplicaFetchAnswer,
)
from tests.sim.replication.network import NetworkProfile
from tests.sim.replication.profile import Profile
from tests.sim.replication.sim import ReplicationSim
from tests.sim.replication.storage import SimLog
from tests.sim.replication.wiring import REAL, Wiring
from zlog.broker.control.controller.decisions import liveness
from zlog.broker.control.metadata.state import PartitionInfo
from zlog.errors import ErrorCode
from zlog.types import ACKS_ALL, NO_LEADER

A, B, C = 1, 2, 3
PRODUCER = PRODUCER_BASE  # partition 0's producer
FOREVER = 10**9  # a crash or pause that lasts until the script (or the heal) ends it
STEP_TICKS_MAX = 200  # how long one step may wait for its state


def scripted_profile(*, replication_factor: int = 3, min_insync: int = 1,
                     flush_every_ticks: int = 5) -> Profile:
    """Three brokers, one partition, a whole network with one-tick delays, no random faults
    and no random load. `min.insync.replicas = 1` as in the KIPs' cases."""
    return Profile(
        brokers=3, partitions=1, replication_factor=replication_factor, min_insync=min_insync,
        network=NetworkProfile(), heartbeat_ticks=2, session_ticks=10, lag_max_ticks=40,
        isr_check_ticks=2, isr_answer_timeout_ticks=60, isr_refused_backoff_ticks=4,
        round_ticks=1, commit_delay_max=1, preferred_every_ticks=FOREVER,
        fetch_backoff_ticks=1, fetch_idle_ticks=1, fetch_timeout_ticks=100,
        fetch_limit_bytes=1 << 20, flush_every_ticks=flush_every_ticks,
        produce_timeout_ticks=40, chaos_ticks=0, heal_ticks=600, produce_p=0.0,
        acks_all_p=1.0, idempotent=True, consume_p=0.0, crash_p=0.0, power_loss_p=0.0,
        pause_p=0.0, cut_p=0.0, failover_p=0.0, churn_p=0.0)


class Script:
    """A scenario's hands on the simulation: do something now, or tick until a state holds.
    Every tick runs the checker, so a planted bug fails the step where its effect shows."""

    def __init__(self, sim: ReplicationSim) -> None:
        self.sim = sim

    # -- time ------------------------------------------------------------------------------

    def until(self, what: str, done: Callable[[], bool], within: int = STEP_TICKS_MAX, *,
              note: bool = True) -> None:
        """Tick until `done`; a step that never comes fails the run (check "scenario")."""
        deadline = self.sim.clock.now + within
        while not done():
            if self.sim.clock.now >= deadline:
                raise InvariantViolation("scenario", f"not within {within} ticks: {what}")
            self.sim.step()
        if note:
            self.sim.log(f"scenario: {what}")

    def ticks(self, count: int) -> None:
        for _ in range(count):
            self.sim.step()

    # -- what the cluster says -------------------------------------------------------------

    def record(self) -> PartitionInfo:
        info = self.sim.controller.state.partition(TOPIC, 0)
        assert info is not None
        return info

    def leads(self, b: int) -> bool:
        """`b` is the committed leader and acts as the leader of that epoch."""
        info = self.record()
        partition = self.sim.brokers[b].partitions.get(0)
        return (info.leader == b and partition is not None and partition.is_leader
                and partition.leader_epoch == info.leader_epoch)

    def follows(self, b: int, leader: int) -> bool:
        """`b` follows `leader` in the committed epoch."""
        info = self.record()
        partition = self.sim.brokers[b].partitions.get(0)
        return (info.leader == leader and partition is not None and not partition.is_leader
                and partition.leader_epoch == info.leader_epoch)

    def isr(self) -> tuple[int, ...]:
        return self.record().isr

    def usable(self, b: int) -> bool:
        return b in liveness(self.sim.controller.state).usable

    def log(self, b: int) -> SimLog:
        return self.sim.disks[b].logs[0]

    def log_end(self, b: int) -> int:
        return self.log(b).log_end_offset

    def succeeded(self, batch_id: int) -> bool:
        return self.sim.producers[0].outcomes.get(batch_id) == ErrorCode.NONE

    def committed(self, offset: int) -> bool:
        """The ghost knows the batch at `offset` as committed (acknowledged, or consumed)."""
        return offset in self.sim.ghost.committed[0]

    # -- clients ---------------------------------------------------------------------------

    def produce(self, to: int, acks: int = ACKS_ALL) -> int:
        """The producer sends one record to `to` now (and retries it as it would)."""
        return self.sim.producers[0].send_batch(self.sim.clock.now, acks, to)

    def consume(self, source: int) -> None:
        """The consumer reads from offset 0 on `source`: what it gets below that broker's HW
        counts as committed."""
        self.sim.send(CONSUMER_BASE, source, ConsumerFetch(self.sim.new_id(), 0, 0))

    # -- faults ----------------------------------------------------------------------------

    def crash(self, b: int) -> None:
        self.sim.crash(b, FOREVER)

    def lose_power(self, b: int) -> None:
        self.sim.lose_power(b, FOREVER)

    def wipe(self, b: int) -> None:
        """kill -9, and b's disk comes back empty under a new directory id."""
        self.sim.crash(b, FOREVER)
        self.sim.disks[b].wipe()
        self.sim.checker.power_lost(b, wiped=True)
        self.sim.log(f"scenario: b{b}'s disk wiped")

    def fail_over(self, down_ticks: int) -> None:
        """The metadata log's leader dies; another controller takes over `down_ticks` later."""
        self.sim.controller.fail_over(self.sim.clock.now, down_ticks)

    def restart(self, b: int) -> None:
        """A crashed broker starts again at the next tick."""
        assert self.sim.brokers[b].status == Status.DOWN
        self.sim.restart_at[b] = self.sim.clock.now + 1

    def pause(self, b: int) -> None:
        self.sim.pause(b, FOREVER)

    def resume(self, b: int) -> None:
        self.sim.resume_at[b] = self.sim.clock.now + 1

    def cut(self, a: int, b: int, *, both: bool = True) -> None:
        self.sim.network.cut(a, b, both=both)
        self.sim.log(f"scenario: cut {a} {'<->' if both else '->'} {b}")

    def mend(self, a: int, b: int) -> None:
        self.sim.network.blocked -= {(a, b), (b, a)}
        self.sim.log(f"scenario: link {a} <-> {b} mended")

    def hold(self, what: str, matches: Callable[[Envelope], bool]) -> None:
        """Messages that `matches` wait until `release` (a stalled connection)."""
        self.sim.network.hold(matches)
        self.sim.log(f"scenario: holding {what}")

    def held(self) -> int:
        return len(self.sim.network.withheld)

    def release(self) -> None:
        count = self.sim.network.release(self.sim.clock.now)
        self.sim.log(f"scenario: {count} held message(s) delivered")

    def flush(self, b: int) -> None:
        """b's page cache is written back (the periodic writeback, now)."""
        self.sim.disks[b].flush()


def _answers(src: int, dst: int) -> Callable[[Envelope], bool]:
    def matches(envelope: Envelope) -> bool:
        return (envelope.src == src and envelope.dst == dst
                and isinstance(envelope.body, ReplicaFetchAnswer))
    return matches


def _isr_requests(src: int, partition_epoch: int) -> Callable[[Envelope], bool]:
    """`src`'s ISR proposals computed from the record at `partition_epoch` (and their
    resends): later ones, from newer records, flow."""
    def matches(envelope: Envelope) -> bool:
        return (envelope.src == src and envelope.dst == CONTROLLER
                and isinstance(envelope.body, AlterIsr)
                and envelope.body.request.partition_epoch == partition_epoch)
    return matches


def _write(s: Script, to: int, acks: int = ACKS_ALL) -> int:
    """One record produced to `to`, answered with success. A batch refused for its sequence
    (the log lost the producer's last batches) is written again in the producer's new
    epoch, as a client would."""
    batch = _answered(s, s.produce(to, acks))
    if not s.succeeded(batch):
        batch = _answered(s, s.produce(to, acks))
    if not s.succeeded(batch):
        raise InvariantViolation("scenario", f"no write through b{to}")
    s.sim.log(f"scenario: batch {batch} written through b{to}")
    return batch


def _answered(s: Script, batch: int) -> int:
    outcomes = s.sim.producers[0].outcomes
    s.until(f"batch {batch} answered", lambda: batch in outcomes, note=False)
    return batch


def _holds(s: Script, b: int, end: int) -> None:
    s.until(f"b{b} holds {end} batch(es)", lambda: s.log_end(b) == end)


# -- docs/replication.md's worked cases (SC9-SC11) -----------------------------------------


def kip101_restart(s: Script) -> None:
    """KIP-101 scenario 1 (SC9): a follower restarts knowing a stale high watermark. A leads,
    B follows. B holds m1 and m2, and its fetch at 2 lets A acknowledge m2, but the answer that
    would have told B the new HW is lost with B's crash. B restarts: truncating to its HW (1)
    would lose m2 (B1); asking for its epoch's end keeps it. B rejoins the ISR, A dies, and B
    leads holding m2."""
    s.until("A leads", lambda: s.leads(A))
    _write(s, A)
    m2 = s.produce(A)
    s.until("B holds m2", lambda: s.log_end(B) == 2)
    s.hold("A's answers to B", _answers(A, B))
    s.until("m2 acknowledged (B's HW is still 1)", lambda: s.succeeded(m2))
    s.crash(B)
    s.release()
    s.restart(B)
    s.until("B back in the ISR", lambda: s.follows(B, A) and B in s.isr())
    s.crash(A)
    s.until("B leads", lambda: s.leads(B))
    _write(s, B)


def kip101_power_loss(s: Script) -> None:
    """KIP-101 scenario 2 (SC10): both replicas lose power; m2 had reached A's disk but only
    B's page cache. B returns first, leads and writes m3 at 1; A returns with m2 at 1. Asking
    for the end of its epoch, A cuts m2 and fetches m3 (m2 is lost, and the checker files it
    under every ISR member having lost power); naming no epoch (B2), A keeps m2 where B holds
    m3 and fetches on."""
    s.until("A leads", lambda: s.leads(A))
    _write(s, A)
    s.flush(A)
    s.flush(B)
    _write(s, A)
    s.flush(A)
    s.lose_power(A)
    s.lose_power(B)
    s.until("the partition has no leader", lambda: s.record().leader == NO_LEADER)
    s.restart(B)
    s.until("B leads", lambda: s.leads(B))
    _write(s, B)
    s.restart(A)
    s.until("A caught up with B and in the ISR",
            lambda: s.follows(A, B) and A in s.isr() and s.log(A).same_batches(s.log(B)))


def kip279(s: Script) -> None:
    """KIP-279's case (SC11), a fast double failover. A holds 0..4; B has 0..2, C 0..4; HW 3.
    A dies, B leads and writes 3..5 in its epoch before C fetches; B dies, C leads (its cache
    ends with its own epoch at 5) and writes at 5. B returns as C's follower: C answers B's
    epoch with (the largest epoch below it, 5); B's own end for that epoch is 3, so it cuts at
    3 and refetches. An answer without the epoch (B3) cuts at 5 and keeps B's batches where C
    holds others; a new leader that records no epoch start (B4) leaves its cache short of its
    own batches; a cut that keeps the cache (B16) leaves B's epoch in it."""
    s.until("A leads", lambda: s.leads(A))
    for _ in range(3):
        _write(s, A)
    s.cut(A, B)
    for end in (4, 5):
        _write(s, A, acks=1)
        _holds(s, C, end)
    s.cut(B, C)
    s.crash(A)
    s.until("B leads", lambda: s.leads(B))
    for _ in range(3):
        _write(s, B, acks=1)
    s.crash(B)
    s.until("C leads", lambda: s.leads(C))
    _write(s, C)
    s.restart(B)
    s.mend(B, C)
    s.until("B caught up with C and in the ISR",
            lambda: s.follows(B, C) and B in s.isr() and s.log(B).same_batches(s.log(C)))


# -- the cases of the rarer planted bugs ----------------------------------------------------


def stale_fetch_answer(s: Script) -> None:
    """A leader change mid-fetch (B13). x reaches A and C but not B. A is cut off from the
    controller and B takes over; A, back as B's follower, fetches from B, and B's answer (cut
    at 1: A's x diverges from B's log) is held up. B is cut off in turn: C takes over and a
    consumer reads x from it, so x is committed. Then B's answer reaches A, which follows C
    now: it must drop it; applying it (B13) cuts the committed x."""
    s.until("A leads", lambda: s.leads(A))
    _write(s, A)
    s.cut(A, B)
    _write(s, A, acks=1)
    s.until("C holds x", lambda: s.log_end(C) == 2)
    s.cut(B, C)
    s.cut(A, CONTROLLER)
    s.until("B leads", lambda: s.leads(B))
    s.hold("B's answers to A", _answers(B, A))
    s.mend(A, B)
    s.mend(A, CONTROLLER)
    s.until("B answered A's fetch", lambda: s.follows(A, B) and s.held() > 0)
    s.cut(B, CONTROLLER)
    s.until("C leads", lambda: s.leads(C))
    s.consume(C)
    s.until("x read from C", lambda: s.committed(1))
    s.until("A follows C", lambda: s.follows(A, C))
    s.release()
    s.until("A caught up with C", lambda: s.log(A).same_batches(s.log(C)))


def divergent_follower_elected(s: Script) -> None:
    """A follower elected between its truncation and its refetch (B15). The producer's z
    (sequence 1) reaches A and B, not C, and A's answer to the producer is lost. A dies and B
    stops: C leads without z. B returns, cuts z where C's log ends, and rejoins C's ISR with
    nothing to refetch; C dies and B leads. The producer's retry of z reaches B: with producer
    state rebuilt from the log B appends it; with the state kept from before the cut (B15) B
    takes z for a retry of what it held at 1 and answers ok for a batch its log lacks."""
    s.until("A leads", lambda: s.leads(A))
    _write(s, A)
    s.cut(A, C)
    s.cut(PRODUCER, C)
    s.cut(A, PRODUCER, both=False)
    s.produce(A, acks=1)
    s.until("B holds z", lambda: s.log_end(B) == 2)
    s.crash(A)
    s.pause(B)
    s.until("C leads", lambda: s.leads(C))
    s.resume(B)
    s.until("B cut z and rejoined the ISR",
            lambda: s.follows(B, C) and B in s.isr() and s.log_end(B) == 1)
    s.crash(C)
    s.until("B leads", lambda: s.leads(B))
    s.until("the producer's retry answered", lambda: s.sim.producers[0].current is None,
            within=400)


def _proposal_to_add_c_held_up(s: Script) -> None:
    """C falls out of A's ISR and catches up; A's proposal to add it back is held up on its
    way to the controller, and C is cut off again."""
    s.until("A leads", lambda: s.leads(A))
    _write(s, A)
    s.cut(A, C)
    _write(s, A, acks=1)
    s.until("C out of the ISR", lambda: s.isr() == (A, B))
    record = s.sim.controller.state.partition(TOPIC, 0)
    assert record is not None
    s.hold("A's ISR proposals", _isr_requests(A, record.partition_epoch))
    s.mend(A, C)
    s.until("A proposes C back", lambda: s.held() > 0)
    s.cut(A, C)


def stale_isr_request(s: Script) -> None:
    """A leader's ISR proposal overtaken by the controller's own change (B17). C falls out of
    the ISR and catches up; A's proposal to add it back is held up on the way. Meanwhile C is
    cut off again, B stops and the controller fences it: the ISR is {A}, and A acknowledges
    m2, which neither B nor C holds. B resumes; then A's proposal arrives, made at the
    partition epoch before B's removal: refused; taken as current (B17), it puts B and C in
    the ISR without m2."""
    _proposal_to_add_c_held_up(s)
    s.pause(B)
    _write(s, A, acks=1)  # so that A does not take the stopped B for caught up
    s.until("B fenced and out of the ISR", lambda: s.isr() == (A,) and not s.usable(B))
    s.until("A applied the ISR {A}",
            lambda: s.sim.brokers[A].partitions[0].replicas.isr == frozenset({A}))
    _write(s, A)
    s.resume(B)
    s.until("B usable again", lambda: s.usable(B))
    s.release()
    s.ticks(10)


# -- cases that found bugs in zlog ---------------------------------------------------------


def unanswered_isr_change(s: Script) -> None:
    """An ISR change applied after its leader stopped waiting for the answer. C falls out of
    the ISR and catches up; A's proposal to add it back is held up on the way past A's answer
    timeout, while B and C fall behind (so that B's removal is due as well). B fetches again
    and A takes m2; then the proposal arrives, at the partition epoch it was made at, and the
    controller applies it. A leader that forgets an unanswered change lets its HW pass C and
    acknowledges m2, which C lacks as it joins (S4); zlog keeps it pending, sends it again, and
    waits for C."""
    _proposal_to_add_c_held_up(s)
    s.cut(A, B)
    _write(s, A, acks=1)
    s.ticks(s.sim.profile.isr_answer_timeout_ticks)
    s.mend(A, B)
    s.produce(A)
    _holds(s, B, 4)
    s.ticks(5)
    s.release()
    s.ticks(10)


def wiped_sole_isr_takeover(s: Script) -> None:
    """A controller takes over while the last member of an ISR is back on a wiped disk and
    not registered again (B27). x reaches every replica; B and C die and leave the ISR, A alone
    in it; A is killed, fenced, and its disk wiped. It starts again, empty, but its registration
    is held up on the way, so the metadata still holds its registration from before the wipe.
    The controller fails over: its successor starts a session for every registered broker, and
    must not take that for a heartbeat from A: unfenced under its old registration (B27), A
    is elected with an empty log, without x."""
    s.until("A leads", lambda: s.leads(A))
    _write(s, A)
    _holds(s, B, 1)
    _holds(s, C, 1)
    s.crash(B)
    s.crash(C)
    s.until("A alone in the ISR", lambda: s.isr() == (A,) and not s.usable(B)
            and not s.usable(C))
    s.wipe(A)
    s.until("A fenced, the partition without a leader",
            lambda: not s.usable(A) and s.record().leader == NO_LEADER)
    s.hold("A's registration", lambda e: e.src == A and isinstance(e.body, Register))
    s.restart(A)
    s.until("A back, its registration held up", lambda: s.held() > 0)
    _not_led_by_wiped(s, A)
    s.fail_over(2)
    s.until("the new controller active", lambda: s.sim.controller.active)
    for _ in range(2 * s.sim.profile.session_ticks):
        s.ticks(1)
        _not_led_by_wiped(s, A)
    s.release()


def _not_led_by_wiped(s: Script, b: int) -> None:
    """The partition's record names no leader b, back on a wiped disk without what was
    committed (it could lead nothing before registering again, but the others would follow
    it, and clients be sent to it)."""
    if s.record().leader == b:
        raise InvariantViolation("S5", f"p0: broker {b}, back on a wiped disk, elected in "
                                       f"epoch {s.record().leader_epoch} without x")


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    script: Callable[[Script], None]
    exposes: tuple[str, ...]  # the planted bugs it shows (bugs.CAUGHT_BY names the checks)
    profile: Callable[[], Profile] = field(default=scripted_profile)


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("kip101-restart", kip101_restart, ("B1",),
             lambda: scripted_profile(replication_factor=2)),
    Scenario("kip101-power-loss", kip101_power_loss, ("B2",),
             lambda: scripted_profile(replication_factor=2, flush_every_ticks=FOREVER)),
    Scenario("kip279", kip279, ("B3", "B4", "B16")),
    Scenario("stale-fetch-answer", stale_fetch_answer, ("B13",)),
    Scenario("divergent-follower-elected", divergent_follower_elected, ("B15",)),
    Scenario("stale-isr-request", stale_isr_request, ("B17",)),
    Scenario("unanswered-isr-change", unanswered_isr_change, ()),
    Scenario("wiped-sole-isr-takeover", wiped_sole_isr_takeover, ("B27", "B28")),
)}


def scenario_sim(name: str, wiring: Wiring = REAL, seed: int = 0, *,
                 spec_loss_bound: bool = False) -> ReplicationSim:
    """The simulation a scenario runs in (`run_scenario` runs it)."""
    return ReplicationSim(seed, wiring, SCENARIOS[name].profile(), scenario=name,
                          spec_loss_bound=spec_loss_bound)


def run_scenario(sim: ReplicationSim) -> None:
    """Run `sim`'s scenario, then heal and check as after any seed; SimFailure if a check
    fails (or a step never comes)."""
    script = SCENARIOS[sim.scenario].script
    sim.run(lambda s: script(Script(s)))
