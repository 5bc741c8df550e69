"""The deterministic whole-cluster simulator (TigerBeetle's VOPR, in miniature).

`Sim(seed).run()` builds a 3- or 5-voter cluster (plus spare nodes that may be added later),
then drives it tick by tick from one master `random.Random(seed)`: message delay, loss,
duplication and reordering; partitions that change (bipartitions, an isolated leader,
one-way links); crashes that lose the un-persisted part of a Ready at a random stage, and
restarts from the simulated disk; client proposals, reads, membership changes, leader
transfers and compactions. Every event is followed by the invariant checks of
`checker.py`. After the chaos phase the network heals and every node restarts; the run
must then elect a leader and commit a fresh proposal (invariant 9).

The same seed replays the same run byte for byte: `trace_digest` hashes every event line.
On failure the exception names the seed, the command that replays it, and the trace tail.
"""

from __future__ import annotations

import hashlib
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tests.sim.checker import Checker, InvariantViolation
from tests.sim.disk import SimDisk
from tests.sim.network import NetworkProfile, SimNetwork
from tests.sim.statemachine import SimStateMachine
from zlog.raft.errors import RaftError
from zlog.raft.messages import BlockId, ConfigState, InstallSnapshot, Message, Ready, TimeoutNow
from zlog.raft.rawnode import RaftConfig, RawNode

TRACE_TAIL = 300
T = TypeVar("T")


@dataclass(slots=True)
class Profile:
    """Everything a seed decides up front about its run.

    A third of the seeds are hostile: heavy loss, delays close to the election timeout and
    a leader killer, so that elections overlap and leaders die with their blocks on a
    minority, which is where Figure 8 and the up-to-date rule are exercised.
    """

    voters: int
    spares: int
    cfg: RaftConfig
    network: NetworkProfile
    chaos_ticks: int
    heal_ticks: int
    partition_p: float
    crash_p: float
    leader_crash_p: float
    crash_mid_ready_p: float
    defer_ready_p: float
    propose_p: float
    read_p: float
    config_p: float
    transfer_p: float

    @classmethod
    def draw(cls, rng: random.Random) -> Profile:
        election = rng.choice([4, 6, 10])
        hostile = rng.random() < 0.35
        safety_only = rng.random() < 0.2  # sometimes run without pre-vote or check-quorum
        cfg = RaftConfig(
            election_ticks=election,
            heartbeat_ticks=rng.choice([1, 1, 2, 3]),
            max_append_blocks=rng.choice([1, 2, 3, 8, 64]),
            pre_vote=not (safety_only and rng.random() < 0.6),
            check_quorum=not (safety_only and rng.random() < 0.6),
            compaction_threshold_blocks=rng.choice([4, 8, 16, 40, 8192]),
            max_inflight_appends=rng.choice([1, 4, 16]),
            promotion_lag_blocks=rng.choice([0, 4, 64]),
            max_uncommitted_blocks=rng.choice([16, 64, 256]),
        )
        network = NetworkProfile(
            drop_p=rng.choice([0.1, 0.25, 0.4] if hostile else [0.0, 0.02, 0.05, 0.15]),
            duplicate_p=rng.choice([0.0, 0.02, 0.1]),
            delay_ticks_max=rng.choice(
                [election // 2, election, election + 2] if hostile else [1, 2, 3]
            ),
        )
        return cls(
            voters=rng.choice([1, 3, 3, 3, 5, 5, 5]),  # single-node mode runs the same code
            spares=rng.choice([0, 1, 2]),
            cfg=cfg,
            network=network,
            chaos_ticks=rng.randint(300, 600),
            heal_ticks=40 * election + 4 * cfg.max_uncommitted_blocks,
            partition_p=rng.choice([0.0, 0.02, 0.05]),
            crash_p=rng.choice([0.0, 0.004, 0.01]),
            leader_crash_p=rng.choice([0.01, 0.03, 0.06] if hostile else [0.0, 0.005]),
            crash_mid_ready_p=rng.choice([0.0, 0.005, 0.02, 0.05]),
            defer_ready_p=rng.choice([0.0, 0.0, 0.1, 0.3]),
            propose_p=rng.choice([0.1, 0.3, 0.6, 1.0]),
            read_p=rng.choice([0.0, 0.05, 0.2]),
            config_p=rng.choice([0.0, 0.0, 0.02, 0.05]),
            transfer_p=rng.choice([0.0, 0.005, 0.02]),
        )


class SimFailure(AssertionError):
    """An invariant or an assertion failed; carries the seed and the trace tail."""


class Sim:
    def __init__(self, seed: int, profile: Profile | None = None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        drawn = Profile.draw(self.rng)  # drawn even when overridden: same RNG stream after
        self.profile = profile if profile is not None else drawn
        profile = self.profile
        self.voters = list(range(1, profile.voters + 1))
        self.everyone = list(range(1, profile.voters + profile.spares + 1))
        self.bootstrap = ConfigState.of(self.voters)
        self.network = SimNetwork(random.Random(self.rng.getrandbits(64)), profile.network)
        self.checker = Checker(self.bootstrap, self._durable)
        self.disks = {i: SimDisk() for i in self.everyone}
        self.nodes: dict[int, RawNode] = {}
        self.fsms: dict[int, SimStateMachine] = {}
        self.restart_at: dict[int, int] = {}
        self.deferred: dict[int, Ready] = {}  # a Ready the driver has not finished yet
        self.now = 0
        self.events = 0
        self.proposals = 0
        self.trace: deque[str] = deque(maxlen=TRACE_TAIL)
        self._digest = hashlib.sha256()
        self.faults = True
        # Hosts whose loop stalls (RawNode.set_may_lead): drawn from a stream of their own, so
        # the other faults of a seed stay what they were.
        self.stalls = random.Random(f"stalls-{seed}")
        self.stall_p = self.stalls.choice([0.0, 0.0, 0.005, 0.02])
        self.stalled_until: dict[int, int] = {}  # node -> first tick its host works again
        for node_id in self.everyone:
            self._start(node_id)

    # -- tracing -------------------------------------------------------------------------------

    def log(self, line: str) -> None:
        entry = f"{self.now} {line}"
        self.trace.append(entry)
        self._digest.update(entry.encode())
        self._digest.update(b"\n")

    @property
    def trace_digest(self) -> str:
        return self._digest.hexdigest()

    # -- nodes and their driver ---------------------------------------------------------------

    def _durable(self, node_id: int, block_id: BlockId) -> bool:
        """Whether `block_id` is on node's simulated disk (or folded into its snapshot)."""
        disk = self.disks.get(node_id)
        if disk is None:
            return False
        if block_id in disk.blocks:
            return True
        return disk.snapshot is not None and disk.snapshot.last.height >= block_id.height

    def _start(self, node_id: int) -> None:
        persisted = self.disks[node_id].load()
        bootstrap = self.bootstrap if node_id in self.voters else None
        rng = random.Random(self.rng.getrandbits(64))
        node = RawNode(node_id, self.profile.cfg, persisted, rng, bootstrap)
        snapshot = persisted.snapshot if persisted is not None else None
        self.nodes[node_id] = node
        self.fsms[node_id] = SimStateMachine.restore(snapshot.data if snapshot else b"")
        view = self.checker.view(node_id)
        if node.commit.height < view.disk_commit.height:
            raise InvariantViolation(f"7 Local: node {node_id} restarted below its disk commit")
        view.commit = node.base  # a crash may have hidden a commit the checker never saw
        view.lead_term = None
        view.head = None
        self.checker.note_commits(node_id, node)
        self.log(f"start n{node_id} term={node.term} head={tuple(node.head)}")
        self._drain(node_id)

    def _crash(self, node_id: int, why: str) -> None:
        del self.nodes[node_id]
        del self.fsms[node_id]
        self.deferred.pop(node_id, None)  # lost with the process
        election = self.profile.cfg.election_ticks
        self.restart_at[node_id] = self.now + self.rng.randint(1, 8 * election)
        self.checker.stats[f"crash {why}"] += 1
        self.log(f"crash n{node_id} {why}")

    def _drain(self, node_id: int) -> None:
        """The driver loop for one node: persist, send, apply, advance, until quiet."""
        node = self.nodes[node_id]
        while True:
            ready = self.deferred.pop(node_id, None)
            if ready is None:
                if not node.has_ready():
                    break
                ready = node.ready()
                if self.faults and self.rng.random() < self.profile.defer_ready_p:
                    # Model a driver that is still writing: the node keeps taking
                    # messages and ticks until the driver finishes this Ready.
                    self.deferred[node_id] = ready
                    self.checker.stats["Ready deferred"] += 1
                    break
            if not self._process(node_id, node, ready):
                return
        self.checker.observe_node(node_id, node)
        self._log_role(node_id, node)

    def _process(self, node_id: int, node: RawNode, ready: Ready) -> bool:
        stage = -1
        if self.faults and self.rng.random() < self.profile.crash_mid_ready_p:
            stage = self.rng.randrange(3)
        if stage == 0:
            self._crash(node_id, "before persisting its Ready")
            return False
        self.disks[node_id].persist(ready)
        self.checker.observe_persist(node_id, node, ready)
        if stage == 1:
            self._crash(node_id, "after persisting, before sending")
            return False
        for msg in ready.messages:
            self.checker.observe_sent(msg)
            self.network.send(msg, self.now)
        if stage == 2:
            self._crash(node_id, "after sending, before applying")
            return False
        self._apply(node_id, node, ready)
        node.advance(ready)
        if node.compaction_due:
            fsm = self.fsms[node_id]
            assert fsm.last == node.applied
            node.compact(node.applied, fsm.snapshot())
            self.checker.stats["compactions"] += 1
            self.log(f"compact n{node_id} at {tuple(node.applied)}")
        return True

    def _apply(self, node_id: int, node: RawNode, ready: Ready) -> None:
        fsm = self.fsms[node_id]
        if ready.restore:
            assert ready.snapshot is not None
            fsm = self.fsms[node_id] = SimStateMachine.restore(ready.snapshot.data)
            self.checker.observe_restore(node_id, ready.snapshot.last, fsm.digest)
            self.checker.stats["snapshot restores"] += 1
            self.log(f"restore n{node_id} at {tuple(ready.snapshot.last)}")
        if ready.committed:
            self.checker.note_commits(node_id, node)
        for block in ready.committed:
            fsm.apply(block)
            self.checker.observe_apply(node_id, block, fsm.digest)
        for read in ready.read_states:
            self.checker.observe_read(node_id, read)

    def _log_role(self, node_id: int, node: RawNode) -> None:
        view = self.checker.view(node_id)
        if (view.role, view.term) != (node.role, node.term):
            self.log(f"n{node_id} {node.role} term={node.term} head={tuple(node.head)}")

    # -- events --------------------------------------------------------------------------------

    def _deliver(self, msg: Message) -> None:
        node = self.nodes.get(msg.to)
        if node is None:
            return
        self.events += 1
        self.log(f"{type(msg).__name__} {msg.from_}>{msg.to} t{msg.term}")
        if isinstance(msg, InstallSnapshot | TimeoutNow):
            self.checker.stats[f"{type(msg).__name__} delivered"] += 1
        node.step(msg)
        self._drain(msg.to)

    def _tick_all(self) -> None:
        for node_id in sorted(self.nodes):
            if node_id in self.nodes:
                self.events += 1
                node = self.nodes[node_id]
                node.set_may_lead(self.now >= self.stalled_until.get(node_id, 0))
                node.tick()
                self._drain(node_id)

    def leader(self) -> int | None:
        """The live leader of the highest term, if any."""
        leaders = [(n.term, i) for i, n in self.nodes.items() if n.role == "leader"]
        return max(leaders)[1] if leaders else None

    def _client(self) -> None:
        profile = self.profile
        leaders = sorted(i for i, n in self.nodes.items() if n.role == "leader")
        if self.rng.random() < profile.propose_p:
            if leaders and self.rng.random() < 0.7:
                self.propose(self.rng.choice(leaders))  # stale leaders grow dead branches
            else:
                self.propose(self.rng.choice(self.everyone))
        if self.rng.random() < profile.read_p:
            if leaders and self.rng.random() < 0.7:
                self._read(self.rng.choice(leaders))  # stale leaders must not answer
            else:
                self._read(self.rng.choice(self.everyone))
        if self.rng.random() < profile.config_p:
            self._change_config()
        if self.rng.random() < profile.transfer_p:
            leader = self.leader()
            if leader is not None:
                self._call(leader, "transfer", lambda n: n.transfer_leader(
                    self.rng.choice(self.voters)))

    def _call(self, node_id: int, what: str, action: Callable[[RawNode], T]) -> T | None:
        node = self.nodes.get(node_id)
        if node is None:
            return None
        try:
            result = action(node)
        except RaftError as error:
            self.log(f"{what} n{node_id} refused: {type(error).__name__}")
            self.checker.stats[f"{what} refused"] += 1
            return None
        self.events += 1
        self.checker.stats[f"{what} accepted"] += 1
        self.log(f"{what} n{node_id} -> {result}")
        self._drain(node_id)
        return result

    def propose(self, node_id: int) -> BlockId | None:
        self.proposals += 1
        payload = f"s{self.seed}p{self.proposals}".encode()
        return self._call(node_id, "propose", lambda n: n.propose(payload))

    def _read(self, node_id: int) -> None:
        self.proposals += 1
        ctx = f"r{self.proposals}".encode()
        self.checker.read_requested(ctx)
        if self._call(node_id, "read", lambda n: n.read_index(ctx)) is None and (
            node_id not in self.nodes or self.nodes[node_id].role != "leader"
        ):
            self.checker.reads.pop(ctx, None)

    def _change_config(self) -> None:
        leader_id = self.leader()
        if leader_id is None:
            return
        node = self.nodes[leader_id]
        config = node.config
        voters, learners = list(config.voters), list(config.learners)
        outsiders = [i for i in self.everyone if i not in voters and i not in learners]
        choices: list[tuple[list[int], list[int]]] = []
        for spare in outsiders:
            choices.append((voters, [*learners, spare]))
        for learner in learners:
            choices.append(([*voters, learner], [x for x in learners if x != learner]))
            choices.append((voters, [x for x in learners if x != learner]))
        if len(voters) > 1 and (self.profile.cfg.pre_vote and self.profile.cfg.check_quorum):
            for voter in voters:
                rest = [x for x in voters if x != voter]
                choices.append((rest, learners))
                choices.append((rest, [*learners, voter]))
        if not choices:
            return
        new_voters, new_learners = self.rng.choice(choices)
        change = ConfigState.of(new_voters, new_learners)
        self._call(leader_id, "config", lambda n: n.propose_config(change))

    def _fault(self) -> None:
        profile = self.profile
        if self.rng.random() < profile.partition_p:
            self._partition()
        if self.rng.random() < profile.crash_p and self.nodes:
            self._crash(self.rng.choice(sorted(self.nodes)), "at random")
        leader = self.leader()
        if leader is not None and self.rng.random() < profile.leader_crash_p:
            self._crash(leader, "leader killed")
        if self.nodes and self.stalls.random() < self.stall_p:
            self._stall()

    def _stall(self) -> None:
        """A host stops working for a while (its node hands leadership off, never campaigns);
        most often the leader's, where it matters."""
        leader = self.leader()
        node_id = (leader if leader is not None and self.stalls.random() < 0.7
                   else self.stalls.choice(sorted(self.nodes)))
        ticks = self.stalls.randint(1, 6 * self.profile.cfg.election_ticks)
        self.stalled_until[node_id] = self.now + ticks
        self.log(f"host of n{node_id} stalls for {ticks} ticks")

    def _partition(self) -> None:
        if len(self.everyone) < 2:
            return  # a single node has no links to cut
        kind = self.rng.randrange(6)
        leader = self.leader()
        if kind == 5 and leader is not None:
            others = [i for i in self.everyone if i != leader]
            side = {leader, *self.rng.sample(others, (len(self.voters) - 1) // 2)}
            self.network.bipartition(side, self.everyone)
            self.log(f"partition leader n{leader} into minority {sorted(side)}")
        elif kind == 0:
            self.network.heal()
            self.log("partition healed")
        elif kind == 1:
            side = set(self.rng.sample(self.everyone, self.rng.randint(1, len(self.everyone) - 1)))
            self.network.bipartition(side, self.everyone)
            self.log(f"partition {sorted(side)} | rest")
        elif kind == 2 and leader is not None:
            inbound, outbound = self.rng.choice([(True, True), (True, False), (False, True)])
            self.network.isolate(leader, self.everyone, inbound, outbound)
            self.log(f"isolate leader n{leader} in={inbound} out={outbound}")
        else:
            for _ in range(self.rng.randint(1, len(self.everyone))):
                a, b = self.rng.sample(self.everyone, 2)
                self.network.blocked.add((a, b))
            self.log(f"one-way blocks {sorted(self.network.blocked)}")

    def _restarts(self) -> None:
        for node_id in sorted(self.restart_at):
            if self.restart_at[node_id] <= self.now:
                del self.restart_at[node_id]
                self._start(node_id)

    def step_tick(self) -> None:
        """One tick: faults and client calls, then deliveries due, then every node ticks."""
        self.now += 1
        self._restarts()
        if self.faults:
            self._fault()
            self._client()
        while (msg := self.network.pop_due(self.now)) is not None:
            self._deliver(msg)
        self._tick_all()

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            for _ in range(self.profile.chaos_ticks):
                self.step_tick()
            self._heal_and_check_liveness()
        except AssertionError as error:
            raise SimFailure(self.report(error)) from error

    def _heal_and_check_liveness(self) -> None:
        """Invariant 9: with the network healed and everyone up, a fresh proposal commits."""
        self.faults = False
        self.network.heal()
        self.network.profile = NetworkProfile(delay_ticks_max=1)
        for node_id in sorted(self.restart_at):
            self.restart_at[node_id] = self.now
        self.stalled_until.clear()
        self.log("heal: network whole, every node up")
        election = self.profile.cfg.election_ticks
        settle_until = self.now + 4 * election
        markers: list[BlockId] = []  # every marker proposed; any one committing will do
        for _ in range(self.profile.heal_ticks):
            self.step_tick()
            if self.now < settle_until:
                continue
            committed = [m for m in markers if self.checker.committed.get(m.height) == m]
            if committed:
                self.log(f"liveness: {tuple(committed[0])} committed")
                self._check_stable()
                return
            leader = self.leader()
            if leader is None:
                continue
            if not markers or markers[-1].term != self.nodes[leader].term or (
                markers[-1].height in self.checker.committed
            ):
                marker = self.propose(leader)  # the previous one may be on a dead branch
                if marker is not None:
                    markers.append(marker)
        raise InvariantViolation(
            f"9 Liveness: no proposal committed within {self.profile.heal_ticks} ticks of healing"
            f" (leader {self.leader()}, terms {[n.term for n in self.nodes.values()]})"
        )

    def _check_stable(self) -> None:
        """Invariant 9, second half: with pre-vote and check-quorum on, a healed cluster keeps
        its leader and term; nodes that were cut off rejoin without an election."""
        cfg = self.profile.cfg
        if not (cfg.pre_vote and cfg.check_quorum):
            return
        for _ in range(4 * cfg.election_ticks):  # a leader that removed itself hands over
            self.step_tick()
        leader = self.leader()
        if leader is None:
            raise InvariantViolation("9 Liveness: no leader after the healed cluster committed")
        term = self.nodes[leader].term
        for _ in range(10 * cfg.election_ticks):
            self.step_tick()
        terms = {i: n.term for i, n in self.nodes.items() if n.term > term}
        if self.leader() != leader or terms:
            raise InvariantViolation(
                f"9 Liveness: healed cluster re-elected (leader {leader} term {term} ->"
                f" leader {self.leader()}, higher terms {terms})"
            )

    def report(self, error: BaseException) -> str:
        tail = "\n".join(self.trace)
        return (
            f"simulation seed {self.seed} failed at tick {self.now}: {error}\n"
            f"replay: .venv/bin/python -m pytest tests/sim --seed {self.seed}\n"
            f"profile: {self.profile}\n"
            f"last {len(self.trace)} events:\n{tail}"
        )

    def summary(self) -> str:
        return (
            f"seed={self.seed} ticks={self.now} events={self.events} "
            f"elections={self.checker.elections} committed={self.checker.max_commit.height} "
            f"reads={self.checker.reads_answered} digest={self.trace_digest[:16]}"
        )
