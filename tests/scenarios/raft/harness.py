"""A hand-driven Chained-Raft cluster for scripted scenarios.

Unlike the simulator nothing happens on its own: messages wait in `inflight` (in send
order) until a test delivers or drops them, and time moves only on `tick`. The driver loop,
the simulated disk, the hash-chain state machine and the invariant checker are the
simulator's own, so every scripted step is also checked against section 6.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from tests.sim.checker import Checker
from tests.sim.disk import SimDisk
from tests.sim.statemachine import SimStateMachine
from zlog.raft.messages import (
    DIR_ID_BYTES,
    NO_DIR_ID,
    Append,
    AppendResp,
    BlockId,
    ConfigState,
    InstallSnapshot,
    Message,
    ReadState,
    Ready,
    TimeoutNow,
    Vote,
    VoteResp,
)
from zlog.raft.rawnode import RaftConfig, RawNode

MessageFilter = Callable[[Message], bool]


def describe(msg: Message) -> str:
    """One line per message, stable across runs (used by transcripts and failures)."""
    head = f"{msg.from_}->{msg.to} {type(msg).__name__} term={msg.term}"
    if isinstance(msg, Vote):
        flags = "".join([" pre" if msg.pre else "", " transfer" if msg.transfer else ""])
        return f"{head} head={_id(msg.head)}{flags}"
    if isinstance(msg, VoteResp):
        return f"{head} {'granted' if msg.granted else 'rejected'}{' pre' if msg.pre else ''}"
    if isinstance(msg, Append):
        blocks = ",".join(_id(b.id) for b in msg.blocks)
        return f"{head} prev={_id(msg.prev)} blocks=[{blocks}] commit={_id(msg.commit)}"
    if isinstance(msg, AppendResp):
        verdict = "ok" if msg.success else "reject"
        return (
            f"{head} {verdict} match={_id(msg.match)} hint_head={_id(msg.hint_head)}"
            f" hint_commit={_id(msg.hint_commit)}"
        )
    if isinstance(msg, InstallSnapshot):
        return f"{head} last={_id(msg.snapshot.last)}"
    assert isinstance(msg, TimeoutNow)
    return head


def _id(block_id: BlockId) -> str:
    return f"({block_id.term},{block_id.height})"


class Cluster:
    def __init__(
        self,
        voters: Iterable[int],
        spares: Iterable[int] = (),
        cfg: RaftConfig | None = None,
        seed: int = 0,
        dir_ids: bool = False,
    ) -> None:
        """`dir_ids`: every node's disk has a directory id (docs/raft.md §4.15) and `wipe`
        gives it a new one; without, nodes run with none, as before directories had ids."""
        self.cfg = cfg or RaftConfig()
        self.voters = sorted(voters)
        self.everyone = sorted({*self.voters, *spares})
        self.bootstrap = ConfigState.of(self.voters)
        self.rng = random.Random(seed)
        self.checker = Checker(self.bootstrap, self._durable)
        self.disks = {i: SimDisk() for i in self.everyone}
        self.with_dir_ids = dir_ids
        self.dir_ids = {i: self._new_dir_id(i, 0) for i in self.everyone}
        self.nodes: dict[int, RawNode] = {}
        self.fsms: dict[int, SimStateMachine] = {}
        self.inflight: list[Message] = []
        self.blocked: set[tuple[int, int]] = set()
        self.read_states: dict[int, list[ReadState]] = {i: [] for i in self.everyone}
        self.readies: dict[int, list[Ready]] = {i: [] for i in self.everyone}
        for node_id in self.everyone:
            self.start(node_id)

    # -- lifecycle ------------------------------------------------------------------------------

    def _durable(self, node_id: int, block_id: BlockId) -> bool:
        disk = self.disks[node_id]
        if block_id in disk.blocks:
            return True
        return disk.snapshot is not None and disk.snapshot.last.height >= block_id.height

    def start(self, node_id: int) -> RawNode:
        persisted = self.disks[node_id].load()
        bootstrap = self.bootstrap if node_id in self.voters else None
        rng = random.Random(self.rng.getrandbits(64))
        node = RawNode(node_id, self.cfg, persisted, rng, bootstrap,
                       dir_id=self.dir_ids[node_id])
        snapshot = persisted.snapshot if persisted is not None else None
        self.nodes[node_id] = node
        self.fsms[node_id] = SimStateMachine.restore(snapshot.data if snapshot else b"")
        view = self.checker.view(node_id)
        view.commit, view.lead_term, view.head = node.base, None, None
        self.checker.note_commits(node_id, node)
        self.drain(node_id)
        return node

    def crash(self, node_id: int, lose_ready: bool = False) -> None:
        """Kill a node. With `lose_ready`, the Ready it had ready is never persisted or sent."""
        node = self.nodes.pop(node_id)
        del self.fsms[node_id]
        if lose_ready and node.has_ready():
            node.ready()  # taken, then lost with the process

    def _new_dir_id(self, node_id: int, generation: int) -> bytes:
        if not self.with_dir_ids:
            return NO_DIR_ID
        return bytes([node_id % 256, generation % 256]) + bytes(range(1, DIR_ID_BYTES - 1))

    def wipe(self, node_id: int) -> RawNode:
        """The node's disk is replaced by an empty one (with a new directory id, if dir ids
        are on) and it starts again under the same id, bootstrapped like a first start."""
        if node_id in self.nodes:
            self.crash(node_id)
        self.disks[node_id] = SimDisk()
        self.checker.views.pop(node_id, None)  # a new disk has no history of its own
        generation = self.dir_ids[node_id][1] + 1 if self.with_dir_ids else 0
        self.dir_ids[node_id] = self._new_dir_id(node_id, generation)
        return self.start(node_id)

    def restart(self, node_id: int) -> RawNode:
        assert node_id not in self.nodes
        return self.start(node_id)

    def __getitem__(self, node_id: int) -> RawNode:
        return self.nodes[node_id]

    # -- the driver ----------------------------------------------------------------------------

    def drain(self, node_id: int) -> None:
        """Persist, send, apply, advance until the node has nothing more (section 5)."""
        node = self.nodes[node_id]
        while node.has_ready():
            ready = node.ready()
            self.readies[node_id].append(ready)
            self.disks[node_id].persist(ready)
            self.checker.observe_persist(node_id, node, ready)
            for msg in ready.messages:
                self.checker.observe_sent(msg)
                self.inflight.append(msg)
            fsm = self.fsms[node_id]
            if ready.restore:
                assert ready.snapshot is not None
                fsm = self.fsms[node_id] = SimStateMachine.restore(ready.snapshot.data)
                self.checker.observe_restore(node_id, ready.snapshot.last, fsm.digest)
            if ready.committed:
                self.checker.note_commits(node_id, node)
            for block in ready.committed:
                fsm.apply(block)
                self.checker.observe_apply(node_id, block, fsm.digest)
            for read in ready.read_states:
                self.read_states[node_id].append(read)
            node.advance(ready)
        self.checker.observe_node(node_id, node)

    def snapshot_data(self, node_id: int) -> bytes:
        """The state machine's snapshot at the node's applied block (for `compact`)."""
        fsm = self.fsms[node_id]
        assert fsm.last == self.nodes[node_id].applied
        return fsm.snapshot()

    # -- time and network ----------------------------------------------------------------------

    def tick(self, node_ids: Iterable[int] | None = None, count: int = 1) -> None:
        targets = sorted(self.nodes) if node_ids is None else list(node_ids)
        for _ in range(count):
            for node_id in targets:
                if node_id in self.nodes:
                    self.nodes[node_id].tick()
                    self.drain(node_id)

    def campaign(self, node_id: int) -> None:
        self.nodes[node_id].campaign()
        self.drain(node_id)

    def take(self, match: MessageFilter | None = None, **fields: object) -> list[Message]:
        """Remove and return the in-flight messages matching `match` and `fields`
        (`frm`, `to`, `kind`)."""
        taken: list[Message] = []
        kept: list[Message] = []
        for msg in self.inflight:
            (taken if _matches(msg, match, fields) else kept).append(msg)
        self.inflight = kept
        return taken

    def drop(self, match: MessageFilter | None = None, **fields: object) -> list[Message]:
        return self.take(match, **fields)

    def deliver(self, match: MessageFilter | None = None, **fields: object) -> list[str]:
        """Deliver the matching messages now in flight (not the ones they cause)."""
        return [self.step(msg) for msg in self.take(match, **fields)]

    def step(self, msg: Message) -> str:
        """Hand one message to its target (unless down or the link is blocked)."""
        line = describe(msg)
        node = self.nodes.get(msg.to)
        if node is None or (msg.from_, msg.to) in self.blocked:
            return f"{line} (dropped)"
        node.step(msg)
        self.drain(msg.to)
        return line

    def stabilize(self, rounds_max: int = 1000) -> list[str]:
        """Deliver everything, including what deliveries cause, until nothing is in flight."""
        lines: list[str] = []
        for _ in range(rounds_max):
            if not self.inflight:
                return lines
            lines.extend(self.deliver())
        raise AssertionError("the cluster did not settle")

    def isolate(self, node_id: int) -> None:
        for other in self.everyone:
            if other != node_id:
                self.blocked |= {(node_id, other), (other, node_id)}

    def partition(self, *groups: Iterable[int]) -> None:
        sides = [set(g) for g in groups]
        self.blocked = {
            (a, b)
            for a in self.everyone
            for b in self.everyone
            if not any(a in side and b in side for side in sides)
        }

    def heal(self) -> None:
        self.blocked = set()

    # -- conveniences --------------------------------------------------------------------------

    def elect(self, node_id: int) -> None:
        """Make `node_id` leader through a normal election and replicate its first block."""
        node = self.nodes[node_id]
        for _ in range(3):  # a lost round (others already voted this term) moves the term on
            for other in sorted(self.nodes):  # let every follower forget the old leader
                if other != node_id and self.nodes[other].role != "leader":
                    self.nodes[other]._election_elapsed = self.cfg.election_ticks
                    self.nodes[other]._leader = None
            node.campaign()
            self.drain(node_id)
            self.stabilize()
            if node.role == "leader":
                return
        raise AssertionError(f"node {node_id} did not win: {node.role}")

    def propose(self, node_id: int, payload: bytes = b"cmd") -> BlockId:
        block_id = self.nodes[node_id].propose(payload)
        self.drain(node_id)
        return block_id

    def leaders(self) -> list[int]:
        return sorted(i for i, n in self.nodes.items() if n.role == "leader")

    def pruned(self, node_id: int) -> set[BlockId]:
        return {i for r in self.readies[node_id] for i in r.pruned}


def _matches(msg: Message, match: MessageFilter | None, fields: dict[str, object]) -> bool:
    if match is not None and not match(msg):
        return False
    if "frm" in fields and msg.from_ != fields["frm"]:
        return False
    if "to" in fields and msg.to != fields["to"]:
        return False
    kind = fields.get("kind")
    return kind is None or type(msg).__name__ == kind or type(msg) is kind
