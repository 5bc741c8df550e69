"""The driver: `ReplicationSim(seed).run()` builds a cluster from the seed and runs it.

Each tick: faults (during the chaos phase), the controller's tick (commits, a round), every
message due, every broker's tick, the clients. The checker runs after every one of those
events. After `chaos_ticks` the faults stop: the network heals, every broker restarts or
resumes, and the liveness checks run: every partition gets a leader and takes an acks=all
write (L1), then every replica catches up and is back in the ISR (L2), and does so again after
the followers of one partition are restarted while every leader takes a steady load (L2). A
scripted scenario (scenarios.py) runs its own schedule in place of the chaos phase.

Everything random comes from `random.Random(seed)` (one child generator per concern, so that
adding a check never changes a run), and the trace digest covers every event line: the same
seed replays the same run. A failure raises `SimFailure` with the seed, the command that
replays it and the tail of the trace.
"""

from __future__ import annotations

import hashlib
import random
from collections import deque
from collections.abc import Callable

from tests.sim.replication.broker import SimBroker, Status
from tests.sim.replication.checker import Checker, InvariantViolation
from tests.sim.replication.clients import Consumer, Deleter, Producer
from tests.sim.replication.clock import SimClock
from tests.sim.replication.controller import TOPIC, Reach, SimController
from tests.sim.replication.ghost import Ghost
from tests.sim.replication.messages import CONTROLLER, Envelope, Produce, ProduceAnswer
from tests.sim.replication.network import NetworkProfile, SimNetwork
from tests.sim.replication.profile import Profile
from tests.sim.replication.storage import BATCH_ID_BASE_MS, SimDisk, SimLog
from tests.sim.replication.wiring import REAL, Wiring
from zlog.broker.control.controller.decisions import liveness
from zlog.broker.control.metadata.commands import Command
from zlog.broker.control.metadata.state import ClusterState
from zlog.errors import ErrorCode, ZlogError
from zlog.record.arrays import build_batch_from_values
from zlog.types import NO_LEADER

TRACE_TAIL = 200
SWEEP_EVERY_TICKS = 25
REJOIN_UNDER_LOAD_TICKS = 200


class SimFailure(AssertionError):
    """An invariant failed: the message names the seed, the replay command and the trace."""

    def __init__(self, message: str, check: str, seed: int) -> None:
        super().__init__(message)
        self.check, self.seed = check, seed


class ReplicationSim:
    def __init__(self, seed: int, wiring: Wiring = REAL, profile: Profile | None = None, *,
                 spec_loss_bound: bool = False, scenario: str = "") -> None:
        self.seed, self.wiring = seed, wiring
        self.scenario = scenario  # a scripted scenario's name (scenarios.py), "" for chaos
        rng = random.Random(seed)
        drawn = Profile.draw(rng)
        self.profile = profile if profile is not None else drawn
        self.clock = SimClock()
        self.network = SimNetwork(random.Random(rng.getrandbits(64)), self.profile.network)
        self.fault_rng = random.Random(rng.getrandbits(64))
        self.client_rng = random.Random(rng.getrandbits(64))
        controller_rng = random.Random(rng.getrandbits(64))
        broker_rng = random.Random(rng.getrandbits(64))
        self.worker_rng = random.Random(rng.getrandbits(64))
        if profile is None:
            self.profile.draw_worker_faults(self.worker_rng)
        # Drawn last, so that seeds without a wipe run as they did before wipes were modelled.
        self.wipe_rng = random.Random(rng.getrandbits(64))
        self.wipe_p = self.wipe_rng.choice([0.0, 0.002, 0.005, 0.01])
        # Drawn after the wipes for the same reason: seeds without retention run as before.
        self.retention_rng = random.Random(rng.getrandbits(64))
        self.retention_p = self.retention_rng.choice([0.0, 0.01, 0.03, 0.1])
        # Drawn after retention, for the same reason: seeds without DeleteRecords run as before.
        self.delete_rng = random.Random(rng.getrandbits(64))
        delete_p = self.delete_rng.choice([0.0, 0.0, 0.01, 0.03])
        self.trace: deque[str] = deque(maxlen=TRACE_TAIL)
        self._digest = hashlib.sha256()
        self.ghost = Ghost(spec_loss_bound=spec_loss_bound)
        self.checker = Checker(self, self.ghost, self.profile.min_insync, self.log)
        self.controller = SimController(self.profile, wiring, controller_rng, self.send, self)
        self.faults = True
        self._ids = 0
        profile = self.profile
        ids = list(range(1, profile.brokers + 1))
        assignment = tuple(tuple(ids[(p + i) % len(ids)] for i in range(profile.replication_factor))
                           for p in range(profile.partitions))
        self.disks = {b: SimDisk(b) for b in ids}
        self.controller.bootstrap(ids, assignment,
                                  {b: wiring.directory_id(self.disks[b]) for b in ids})
        for p, replicas in enumerate(assignment):
            for b in replicas:
                self.disks[b].log(p, self.checker)
        self.brokers: dict[int, SimBroker] = {}
        state = self.controller.state
        for b in ids:
            broker = SimBroker(b, profile, wiring, broker_rng, self.send, self.checker,
                               self.peer_log, self.disks[b])
            self.brokers[b] = broker
            broker.bootstrap(state.brokers[b].broker_epoch, state, self.controller.version)
        self.producers = [Producer(p, profile, self.client_rng, send=self.send,
                                   target=self.target, new_id=self.new_id)
                          for p in range(profile.partitions)]
        self.consumers = [Consumer(p, profile, self.client_rng, send=self.send,
                                   target=self.target, new_id=self.new_id)
                          for p in range(profile.partitions)]
        self.deleters = [Deleter(p, delete_p, self.delete_rng, send=self.send,
                                 target=self.target, new_id=self.new_id)
                         for p in range(profile.partitions)]
        self.load_every_ticks = 0  # > 0: every leader takes a batch this often (see L2)
        self.restart_at: dict[int, int] = {}
        self.resume_at: dict[int, int] = {}
        # New leaders to strike: (deadline, broker, partition, epoch). Each is struck right
        # after its first append in the epoch (where KIP-279's case begins), or at the deadline.
        self.churn: list[tuple[int, int, int, int]] = []
        self.stats: dict[str, int] = {}

    # -- plumbing --------------------------------------------------------------------------

    def log(self, line: str) -> None:
        entry = f"{self.clock.now} {line}"
        self.trace.append(entry)
        self._digest.update(entry.encode() + b"\n")

    @property
    def trace_digest(self) -> str:
        return self._digest.hexdigest()

    def send(self, src: int, dst: int, body: object) -> None:
        self.network.send(src, dst, body, self.clock.now)

    def new_id(self) -> int:
        self._ids += 1
        return self._ids

    def peer_log(self, broker: int, p: int) -> SimLog | None:
        disk = self.disks.get(broker)
        return None if disk is None else disk.logs.get(p)

    def committed_state(self) -> ClusterState:
        return self.controller.state

    def reach(self, b: int) -> Reach:
        """What the controller's probe of b finds: a cut link hangs, a dead process's port
        refuses, a paused one still accepts (its sockets stay open)."""
        blocked = self.network.blocked
        if (CONTROLLER, b) in blocked or (b, CONTROLLER) in blocked:
            return Reach.DROPPED
        broker = self.brokers.get(b)
        return Reach.REFUSED if broker is None or broker.status == Status.DOWN else (
            Reach.CONNECTED)

    def target(self, p: int) -> int:
        """The broker a client asks: the leader it last heard of, or anyone."""
        info = self.controller.state.partition(TOPIC, p)
        if info is not None and info.leader != NO_LEADER and self.client_rng.random() < 0.85:
            return info.leader
        return self.client_rng.choice(sorted(self.brokers))

    def on_commit(self, before: ClusterState, after: ClusterState, command: Command,
                  error: ZlogError | None) -> None:
        if error is None and TOPIC in self.controller.unclean_topics:
            self._note_unclean(before, after)
        self.checker.on_commit(before, after, command, error)
        if not self.faults or error is not None or TOPIC not in before.topics:
            return
        for old, new in zip(before.topics[TOPIC].partitions, after.topics[TOPIC].partitions,
                            strict=True):
            if new.leader not in (NO_LEADER, old.leader) and (
                    self.fault_rng.random() < self.profile.churn_p):
                self.churn.append((self.clock.now + self.fault_rng.randint(1, 8),
                                   new.leader, new.partition, new.leader_epoch))

    def _count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    # -- one tick --------------------------------------------------------------------------

    def _paused(self, node: int) -> bool:
        broker = self.brokers.get(node)
        return broker is not None and broker.status == Status.PAUSED

    def step(self) -> None:
        now = self.clock.advance()
        for b in sorted(self.restart_at):
            if self.restart_at[b] <= now:
                del self.restart_at[b]
                self.brokers[b].start(now)
                self.log(f"b{b} restarts as {self.brokers[b].incarnation}")
        for b in sorted(self.resume_at):
            if self.resume_at[b] <= now:
                del self.resume_at[b]
                self.brokers[b].status = Status.UP
                self.network.resume(b, now)
                self.log(f"b{b} resumes (SIGCONT)")
        if self.faults:
            self._fault(now)
        self.controller.tick(now)
        self.checker.after_event()
        while (envelope := self.network.pop_due(now, self._paused)) is not None:
            self._deliver(envelope, now)
            receiver = self.brokers.get(envelope.dst)
            if receiver is not None:
                self.checker.after_event(receiver)
        for b in sorted(self.brokers):
            self.brokers[b].tick(now)
        # One check for all the ticks: a tick changes only its own broker's state, so no tick
        # can hide what another did.
        self.checker.after_event()
        for producer in self.producers:
            producer.tick(now)
        for consumer in self.consumers:
            consumer.tick(now)
        if self.faults:  # DeleteRecords is chaos: none once healed (the final checks)
            for deleter in self.deleters:
                deleter.tick(now)
        if self.load_every_ticks and now % self.load_every_ticks == 0:
            self._load(now)
        if now % SWEEP_EVERY_TICKS == 0:
            self.checker.sweep()

    def _deliver(self, envelope: Envelope, now: int) -> None:
        dst = envelope.dst
        if dst == CONTROLLER:
            self.controller.receive(envelope)
        elif dst in self.brokers:
            broker = self.brokers[dst]
            if broker.up:
                broker.receive(envelope, now)
            elif broker.status == Status.DOWN and isinstance(envelope.body, Produce):
                # Connection refused: the client learns at once (a dead process's sockets
                # are closed), retries and refreshes its metadata.
                self.network.send(dst, envelope.src, ProduceAnswer(
                    envelope.body.request_id, ErrorCode.NETWORK_EXCEPTION, -1), now)
        else:
            for producer in self.producers:
                if producer.node_id == dst:
                    producer.receive(envelope, now)
            for consumer in self.consumers:
                if consumer.node_id == dst:
                    consumer.receive(envelope, now)
            for deleter in self.deleters:
                if deleter.node_id == dst:
                    deleter.receive(envelope, now)

    # -- faults ----------------------------------------------------------------------------

    def _leaders(self) -> list[int]:
        topic = self.controller.state.topics.get(TOPIC)
        found = set() if topic is None else {i.leader for i in topic.partitions}
        return sorted(b for b in found if b in self.brokers)

    def _pick(self, rng: random.Random | None = None) -> int | None:
        """A running broker, a leader half of the time."""
        rng = rng or self.fault_rng
        up = [b for b in sorted(self.brokers) if self.brokers[b].up]
        leaders = [b for b in self._leaders() if b in up]
        if leaders and rng.random() < 0.5:
            return rng.choice(leaders)
        return rng.choice(up) if up else None

    def _fault(self, now: int) -> None:
        profile, rng = self.profile, self.fault_rng
        session = profile.session_ticks
        if rng.random() < profile.crash_p and (b := self._pick()) is not None:
            self.crash(b, rng.randint(2, 4 * session))
        if rng.random() < profile.power_loss_p and (b := self._pick()) is not None:
            self.lose_power(b, rng.randint(2, 4 * session))
        if self.wipe_rng.random() < self.wipe_p and (b := self._wipe_victim()) is not None:
            self._stop(b, now, self.wipe_rng.randint(2, 4 * session))
            lost = self.disks[b].wipe()
            self.log(f"b{b} loses its disk: {lost} batch(es) gone; back on directory "
                     f"{self.disks[b].dir_id}")
            self.checker.power_lost(b, wiped=True)
            self._count("wiped disks")
        if rng.random() < profile.pause_p and (b := self._pick()) is not None:
            self.pause(b, rng.randint(2, 3 * session))
        if rng.random() < profile.cut_p:
            self._cut(now)
        for strike in list(self.churn):
            due, b, p, epoch = strike
            log = self.disks[b].logs[p]
            if due > now and not (log.infos and log.infos[-1].epoch == epoch):
                continue
            self.churn.remove(strike)
            if not self.brokers[b].up:
                continue
            if rng.random() < 0.5:
                self.crash(b, rng.randint(2, 4 * session), " soon after its election")
            else:
                self.network.isolate(b, self.brokers)
                self.log(f"b{b} cut from the other brokers soon after its election")
        if rng.random() < profile.failover_p and self.controller.active:
            self.controller.fail_over(now, rng.randint(2, 2 * session))
            self._count("controller failovers")
        self._worker_faults(now)
        self._retention()

    def _retention(self) -> None:
        """Retention on one replica (a leader half of the time): the oldest batches of its log
        are due (never the last, the active segment); the broker deletes those its rule lets
        go (SimBroker.enforce_retention)."""
        rng = self.retention_rng
        if rng.random() >= self.retention_p or (b := self._pick(rng)) is None:
            return
        broker = self.brokers[b]
        if not broker.partitions:
            return
        p = rng.choice(sorted(broker.partitions))
        log = self.disks[b].logs[p]
        if len(log.infos) < 2:
            return
        deleted = broker.enforce_retention(p, rng.randint(1, len(log.infos) - 1))
        if deleted:
            self.log(f"b{b} p{p} retention deletes {deleted} batch(es): log starts at "
                     f"{log.log_start_offset}")
            self._count("retention runs")

    def _worker_faults(self, now: int) -> None:
        """A worker killed alone (its supervisor restarts it at once): at random, or right
        after its leader sent an ISR expansion, while the controller may commit it."""
        rng, profile = self.worker_rng, self.profile
        up = [b for b in sorted(self.brokers) if self.brokers[b].up]
        if up and rng.random() < profile.worker_crash_p:
            self._restart_worker(rng.choice(up), now, "")
        for b in up:
            broker = self.brokers[b]
            for p, pending in sorted(broker.isr_pending.items()):
                partition = broker.partitions.get(p)
                expanding = partition is not None and bool(
                    set(pending.change.new_isr) - partition.replicas.isr)
                if (expanding and pending.request_id is not None and pending.sent_at == now - 1
                        and rng.random() < profile.expansion_crash_p):
                    self._restart_worker(b, now, f" with its p{p} expansion in flight")
                    break

    def _restart_worker(self, b: int, now: int, why: str) -> None:
        for producer in self.producers:
            producer.disconnected(b, now)
        self.brokers[b].restart_worker()
        self.log(f"b{b} worker killed (kill -9) and restarted{why}")
        self._count("worker restarts")

    def crash(self, b: int, down_ticks: int, why: str = "") -> None:
        """kill -9: the process and its socket buffers go, the disk stays; it restarts
        `down_ticks` later."""
        self._stop(b, self.clock.now, down_ticks)
        self.log(f"b{b} crashes (kill -9){why}")

    def lose_power(self, b: int, down_ticks: int) -> None:
        """A crash that also drops what the page cache had not written back."""
        self._stop(b, self.clock.now, down_ticks)
        lost = self.disks[b].power_loss()
        self.log(f"b{b} loses power: {lost} unflushed batch(es) gone")
        self.checker.power_lost(b)
        self._count("power losses")

    def pause(self, b: int, ticks: int) -> None:
        """SIGSTOP: the broker does nothing and its messages wait until it resumes."""
        self.brokers[b].status = Status.PAUSED
        self.resume_at[b] = self.clock.now + ticks
        self.log(f"b{b} paused (SIGSTOP) until {self.resume_at[b]}")
        self._count("pauses")

    def _wipe_victim(self) -> int | None:
        """A running broker; most often one that shares an ISR with a broker that is down,
        where a wiped replica is the only usable member left and the election rules matter."""
        rng = self.wipe_rng
        down = {b for b, broker in self.brokers.items() if not broker.up}
        topic = self.controller.state.topics.get(TOPIC)
        exposed = sorted({member for info in (topic.partitions if topic else ())
                          if down & set(info.isr) for member in info.isr
                          if member not in down})
        if exposed and rng.random() < 0.7:
            return rng.choice(exposed)
        return self._pick(rng)

    def _stop(self, b: int, now: int, down_ticks: int) -> None:
        for producer in self.producers:
            producer.disconnected(b, now)
        self.brokers[b].crash()
        self.network.drop_held(b)
        self.restart_at[b] = now + down_ticks
        self.resume_at.pop(b, None)
        self._count("crashes")

    def _cut(self, now: int) -> None:
        del now
        rng, network = self.fault_rng, self.network
        brokers = sorted(self.brokers)
        everyone = [CONTROLLER, *brokers, *(c.node_id for c in self.producers),
                    *(c.node_id for c in self.consumers)]
        kind = rng.randrange(6)
        b = rng.choice(brokers)
        if kind == 0:
            network.heal()
            self.log("network healed")
        elif kind == 1:
            network.isolate(b, everyone)
            self.log(f"b{b} isolated")
        elif kind == 2:
            network.cut(b, CONTROLLER)
            self.log(f"b{b} cut from the controller")
        elif kind == 3:
            a, c = rng.sample([CONTROLLER, *brokers], 2)
            network.cut(a, c, both=False)
            self.log(f"one-way cut {a} -> {c}")
        elif kind == 4 and (leaders := self._leaders()):
            leader = rng.choice(leaders)
            network.isolate(leader, brokers)
            self.log(f"leader b{leader} cut from the other brokers")
        else:
            client = rng.choice([c.node_id for c in self.producers])
            network.cut(client, b)
            self.log(f"client {client} cut from b{b}")
        self._count("network cuts")

    # -- the run ---------------------------------------------------------------------------

    def run(self, script: Callable[[ReplicationSim], None] | None = None) -> None:
        """The chaos phase, or `script` (a scenario's own schedule, scenarios.py) in its place;
        then the heal, the liveness checks and the checks of the final logs."""
        try:
            if script is None:
                for _ in range(self.profile.chaos_ticks):
                    self.step()
            else:
                self.wipe_p = self.retention_p = 0.0  # a scenario's faults are its script's own
                for deleter in self.deleters:
                    deleter.delete_p = 0.0
                script(self)
            self._heal_and_check_liveness()
            self.checker.sweep()
            self.checker.final()
        except InvariantViolation as violation:
            raise SimFailure(self.report(violation), violation.check, self.seed) from violation

    def _heal_and_check_liveness(self) -> None:
        self.faults = False
        self.network.heal()
        self.network.profile = NetworkProfile(delay_max=1)
        now = self.clock.now
        self.network.release(now)
        for b in sorted(self.restart_at):
            self.restart_at[b] = now + 1
        for b in sorted(self.resume_at):
            self.resume_at[b] = now + 1
        self.log("heal: network whole, every broker up, no more faults")
        first_new_id = self._ids
        for producer in self.producers:
            producer.produce_p, producer.acks_all_p = 0.5, 1.0
        deadline = now + self.profile.heal_ticks
        while not all(any(batch_id > first_new_id for batch_id, _ in producer.acked_all)
                      for producer in self.producers):
            self._recover_wiped_partitions()
            if self.clock.now >= deadline:
                raise InvariantViolation("L1", f"no acks=all write succeeded on every partition "
                                               f"within {self.profile.heal_ticks} ticks of "
                                               f"healing: {self._partition_summary()}")
            self.step()
        self.log("liveness L1: every partition took an acks=all write")
        for producer in self.producers:
            producer.produce_p = 0.0
        self._catch_up(deadline)
        self._rejoin_under_load()
        self._catch_up(self.clock.now + self.profile.heal_ticks)

    def _catch_up(self, deadline: int) -> None:
        while (lagging := self._not_caught_up()):
            if self.clock.now >= deadline:
                raise InvariantViolation("L2", f"not caught up within {self.profile.heal_ticks} "
                                               f"ticks of healing: {lagging}; "
                                               f"{self._partition_summary()}")
            self.step()
        self.log("liveness L2: every replica caught up and in the ISR")

    def _note_unclean(self, before: ClusterState, after: ClusterState) -> None:
        """A leader the operator's unclean election chose (outside the ISR, or a replica back
        on another disk): the partition's losses from here on are the operator's choice."""
        live = liveness(before)
        for old, new in zip(before.topics[TOPIC].partitions, after.topics[TOPIC].partitions,
                            strict=True):
            if new.leader in (NO_LEADER, old.leader):
                continue
            if new.leader not in old.isr or not live.holds_its_data(old, new.leader):
                self.ghost.unclean.add(new.partition)
                self.log(f"p{new.partition}: unclean election of b{new.leader}")

    def _recover_wiped_partitions(self) -> None:
        """The operator's way out (docs/replication.md §4.2): once every broker is registered
        and unfenced, a partition still without a leader because each member of its ISR came
        back on another disk gets unclean election for its topic. Its loss is already allowed
        (every ISR member lost its data since it joined)."""
        state = self.controller.state
        live = liveness(state)
        current = all(broker.registered and b in state.brokers
                      and state.brokers[b].broker_epoch == broker.broker_epoch
                      for b, broker in self.brokers.items())
        if (TOPIC in self.controller.unclean_topics or not current
                or set(live.usable) != set(self.brokers)):
            return
        stuck = [info.partition for info in state.topics[TOPIC].partitions
                 if info.leader == NO_LEADER
                 and not any(live.holds_its_data(info, r) for r in info.isr)]
        if stuck:
            self.controller.unclean_topics = frozenset({TOPIC})
            self.log(f"operator: unclean election for {TOPIC}, partitions {stuck} have only "
                     "wiped replicas in their ISR")

    def _rejoin_under_load(self) -> None:
        """L2 under load: once every replica caught up, p0's followers, killed and started
        again at once (so out of its ISR), rejoin it while every leader takes batches without
        a pause: one each tick where a follower's fetch takes several, one every third tick
        where it takes one (a load they can keep up with; docs/replication.md §3)."""
        info = self.controller.state.partition(TOPIC, 0)
        assert info is not None
        now = self.clock.now
        restarted = {b: self.brokers[b].starts for b in info.replicas if b != info.leader}
        for b in restarted:
            self._stop(b, now, 1)
            self.log(f"b{b} crashes (kill -9) and restarts: rejoining p0 under load")
        self.load_every_ticks = 1 if self.profile.fetch_limit_bytes > 1 else 3
        deadline = now + REJOIN_UNDER_LOAD_TICKS
        while ((outside := self._outside_isr())
               or not all(self.brokers[b].starts > starts and self.brokers[b].registered
                          for b, starts in restarted.items())):
            if self.clock.now >= deadline:
                raise InvariantViolation("L2", f"not back in the ISR under load within "
                                               f"{REJOIN_UNDER_LOAD_TICKS} ticks: "
                                               f"{outside or 'not registered yet'}; "
                                               f"{self._partition_summary()}")
            self.step()
        self.load_every_ticks = 0
        self.log("liveness L2: every replica rejoined the ISR under load")

    def _outside_isr(self) -> str:
        for info in self.controller.state.topics[TOPIC].partitions:
            if set(info.isr) != set(info.replicas):
                return f"p{info.partition}: ISR {list(info.isr)} of {list(info.replicas)}"
        return ""

    def _load(self, now: int) -> None:
        del now
        for info in self.controller.state.topics[TOPIC].partitions:
            broker = self.brokers.get(info.leader)
            if broker is not None and broker.up:
                batch_id = self.new_id()
                broker.append_local(info.partition, build_batch_from_values(
                    [f"{batch_id}:load".encode()], timestamp_ms=BATCH_ID_BASE_MS + batch_id),
                    batch_id)

    def _not_caught_up(self) -> str:
        state = self.controller.state
        topic = state.topics[TOPIC]
        for info in topic.partitions:
            p = info.partition
            if info.leader == NO_LEADER:
                return f"p{p} has no leader"
            leader = self.brokers[info.leader].partitions.get(p)
            if leader is None or not leader.is_leader or leader.leader_epoch != info.leader_epoch:
                return f"p{p}: b{info.leader} does not lead epoch {info.leader_epoch} yet"
            if set(info.isr) != set(info.replicas):
                return f"p{p}: ISR {list(info.isr)} of {list(info.replicas)}"
            if leader.high_watermark != leader.log.log_end_offset:
                return f"p{p}: HW {leader.high_watermark} < log end {leader.log.log_end_offset}"
            assert isinstance(leader.log, SimLog)
            for b in info.replicas:
                if not self.disks[b].logs[p].same_batches(leader.log):
                    return f"p{p}: b{b}'s log differs from the leader's"
        if any(p.current is not None for p in self.producers):
            return "a produce is still in flight"
        return ""

    def _partition_summary(self) -> str:
        topic = self.controller.state.topics[TOPIC]
        return "; ".join(f"p{i.partition} leader {i.leader} e{i.leader_epoch} isr {list(i.isr)}"
                         for i in topic.partitions)

    # -- reports ---------------------------------------------------------------------------

    def replay_command(self) -> str:
        scenario = f" --scenario {self.scenario}" if self.scenario else ""
        bug = "" if self.wiring.name == REAL.name else f" --bug {self.wiring.name}"
        bound = " --spec-loss-bound" if self.ghost.spec_loss_bound else ""
        return f"python -m tests.sim.replication{scenario} --seed {self.seed}{bug}{bound}"

    def report(self, error: BaseException) -> str:
        tail = "\n".join(self.trace)
        what = f"scenario {self.scenario}, " if self.scenario else ""
        return (f"replication simulation {what}seed {self.seed} ({self.wiring.name}) failed "
                f"at tick {self.clock.now}: {error}\n"
                f"replay: {self.replay_command()}\n"
                f"profile: {self.profile}\n"
                f"last {len(self.trace)} events:\n{tail}")

    def summary(self) -> str:
        acked = sum(len(v) for v in self.ghost.acked.values())
        stats = ", ".join(f"{k}={v}" for k, v in sorted({**self.stats,
                                                         **self.checker.counts}.items()))
        return (f"seed={self.seed} wiring={self.wiring.name} ticks={self.clock.now} "
                f"acked={acked} epochs={len(self.ghost.leader_of)} "
                f"lossy={sorted(self.ghost.lossy)} {stats} "
                f"digest={self.trace_digest[:16]}")

