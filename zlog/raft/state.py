"""The state of one Chained-Raft node and the plumbing every rule shares.

The node is split by concern into a stack of classes, each in its own module and each
allowed to call only the layers below it:

    rawnode.RawNode               public API (etcd RawNode style), the term rule, Ready/advance
    election.Election             timers, pre-vote, votes, becoming leader, check-quorum, transfer
    append_entries.AppendEntries  Append/InstallSnapshot on both sides, commit, ReadIndex
    state.NodeState               fields, loading from disk, the outbox, becoming follower

`runner.RaftRunner` (the only part that does I/O) drives a RawNode; `append_entries` is Raft's
own log replication of metadata blocks, not the ISR replication of partition data.

Persistent fields (docs/raft.md §2.3) are `_term`, `_vote`, the chain (blocks
and head), `_commit` and `_snapshot`; everything else is volatile and rebuilt on restart.
Nothing here touches a file or a socket: changes are collected into the next `Ready`.
"""

from __future__ import annotations

import random
from enum import StrEnum
from typing import TYPE_CHECKING

from zlog.raft.chain import Chain
from zlog.raft.messages import (
    DIR_ID_BYTES,
    EMPTY_CONFIG,
    GENESIS,
    Block,
    BlockId,
    ConfigState,
    HardState,
    Message,
    PersistedState,
    ReadState,
    Ready,
    Snapshot,
    SoftState,
)
from zlog.raft.progress import Progress

if TYPE_CHECKING:
    from zlog.raft.rawnode import RaftConfig


class Role(StrEnum):
    FOLLOWER = "follower"
    PRECANDIDATE = "precandidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


ROLE_NAMES: dict[Role, str] = {role: role.value for role in Role}  # plain str, fast lookup


class PendingRead:
    """A ReadIndex request waiting for a quorum to echo `seq` (section 4, ReadIndex)."""

    __slots__ = ("ctx", "index", "seq")

    def __init__(self, ctx: bytes, index: BlockId, seq: int) -> None:
        self.ctx = ctx
        self.index = index
        self.seq = seq


class NodeState:
    """Fields and shared helpers; see the module docstring for the layering."""

    def __init__(
        self,
        node_id: int,
        cfg: RaftConfig,
        persisted: PersistedState | None,
        rng: random.Random,
        bootstrap: ConfigState | None,
        *,
        dir_id: bytes,
    ) -> None:
        assert node_id >= 0, "node ids are unsigned"
        assert len(dir_id) == DIR_ID_BYTES
        assert cfg.election_ticks > cfg.heartbeat_ticks > 0
        self._id = node_id
        self._dir_id = dir_id  # this incarnation's data directory (docs/raft.md §4.15)
        self._cfg = cfg
        self._rng = rng
        self._now = 0  # ticks since this incarnation started; only ever compared locally
        # Messages dropped because they break the protocol (not merely stale): a correct
        # cluster never sends one, so the simulator requires this to stay zero.
        self.odd_messages = 0
        # Ready bookkeeping: what changed since the last Ready was handed out.
        self._msgs: list[Message] = []
        self._new_blocks: dict[BlockId, Block] = {}
        self._pruned: set[BlockId] = set()
        self._pending_snapshot: Snapshot | None = None
        self._restore = False
        self._read_states: list[ReadState] = []
        self._outstanding: Ready | None = None
        # Volatile role state.
        self._role = Role.FOLLOWER
        self._leader: int | None = None
        self._votes: dict[int, bool] = {}
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._timeout = cfg.election_ticks
        # Leader-only state, reset on every election.
        self._progress: dict[int, Progress] = {}
        self._seq = 0
        self._reads: list[PendingRead] = []
        self._reads_waiting: list[bytes] = []
        self._transferee: int | None = None
        self._may_lead = True  # the driver's word: its host can do a leader's work now
        if persisted is None:
            self._load_new(bootstrap)
        else:
            self._load_persisted(persisted)
        self._applied = self._chain.base  # the driver restores its FSM from the snapshot
        self._emitted = self._chain.base  # last committed block handed out in a Ready
        self._persisted_head = self._sent_head if self._sent_head is not None else GENESIS
        self._sent_soft = SoftState(ROLE_NAMES[self._role], self._leader)
        self._reset_election_timer()
        assert self._chain.extends(self._chain.head, self._commit)

    def _load_new(self, bootstrap: ConfigState | None) -> None:
        """A brand-new node: genesis only; with `bootstrap`, persist the genesis snapshot."""
        self._term = 0
        self._vote: int | None = None
        self._commit = GENESIS
        self._sent_hard: HardState | None = None
        self._sent_head: BlockId | None = None
        if bootstrap is None:
            self._chain = Chain(GENESIS, EMPTY_CONFIG)
            self._snapshot: Snapshot | None = None
            self._sent_hard = self._hard_state()  # nothing to persist until blocks arrive
            self._sent_head = GENESIS
        else:
            bootstrap.check()
            assert bootstrap.voters, "a new cluster needs at least one voter"
            self._chain = Chain(GENESIS, bootstrap)
            self._snapshot = Snapshot(GENESIS, bootstrap, b"")
            self._pending_snapshot = self._snapshot
        assert self._chain.head == GENESIS

    def _load_persisted(self, persisted: PersistedState) -> None:
        """Rebuild the chain from what storage loaded; drop what a lazy delete left behind."""
        snapshot = persisted.snapshot
        base = snapshot.last if snapshot is not None else GENESIS
        self._snapshot = snapshot
        self._chain = Chain(base, snapshot.config if snapshot is not None else EMPTY_CONFIG)
        for block in sorted(persisted.blocks, key=lambda b: (b.id.height, b.id.term)):
            parent = block.parent
            if block.id.height <= base.height or parent is None or not self._chain.contains(
                parent
            ):
                self._pruned.add(block.id)  # compacted, or cut off by an earlier prune
                continue
            self._chain.insert(block)
        hard = persisted.hard_state
        self._term = hard.term
        self._vote = hard.vote
        head = persisted.head if persisted.head.height > base.height else base
        assert self._chain.contains(head), f"persisted head {head} is not stored"
        self._chain.set_head(head)
        commit = hard.commit if hard.commit.height > base.height else base
        assert self._chain.on_path(commit), "persisted commit must be on the persisted path"
        self._commit = commit
        self._record_pruned(self._chain.prune_forks(base.height, commit.height))
        self._sent_hard = hard
        self._sent_head = persisted.head
        assert head.term <= self._term, "no block can be newer than the term that stored it"

    # -- invariants ---------------------------------------------------------------------------

    def _check_invariants(self) -> None:
        """The local invariants of section 6 (7 and more), after every input. O(1)."""
        chain = self._chain
        head, commit, base = chain.head, self._commit, chain.base
        assert head.term <= self._term, "head.term <= current_term"
        assert chain.on_path(commit), "head extends commit"
        assert self._applied.height <= self._emitted.height, "applied only what was handed out"
        assert self._emitted.height <= commit.height, "never hand out uncommitted blocks"
        assert self._emitted.height >= base.height, "compacted blocks were all handed out"
        if self._role == Role.LEADER:
            assert self._leader == self._id, "a leader follows itself"
            assert self._vote == self._id, "a leader voted for itself in its term"
            assert head.term == self._term, "a leader's head is its own term's block"
        else:
            assert not self._progress, "only a leader tracks followers"
            assert self._leader != self._id, "a non-leader never names itself leader"
        assert self._role != Role.CANDIDATE or self._vote == self._id
        assert self._snapshot is None or self._snapshot.last == base, "snapshot is the base"

    # -- small queries ------------------------------------------------------------------------

    def _hard_state(self) -> HardState:
        hard = HardState(self._term, self._vote, self._commit)
        assert hard.commit.height <= self._chain.head.height
        return hard

    def _leading(self) -> bool:
        """A call, not a field read, so type narrowing cannot outlive a state change."""
        return self._role == Role.LEADER

    def _promotable(self) -> bool:
        """Whether this node may campaign: a voter at head, or a voter whose removal is
        still uncommitted on its path; never a node whose directory is not the recorded one,
        nor one whose driver says its host cannot lead now (`set_may_lead`).

        The second case (docs/raft.md, "Campaigning while being removed") avoids a
        deadlock: a leader that removed itself and then stepped down (check-quorum) may hold
        the only copy of the removal; the old voters need its vote, and it refuses them as
        less up to date. Letting it campaign is safe because its own vote does not count:
        it must win a majority of the new voters, which overlaps every old majority.
        """
        chain = self._chain
        if not self._may_lead:
            return False
        if not chain.config.counts(self._id, self._dir_id):
            return False  # a new disk under an old voter's id: a learner until recorded
        if self._id in chain.config.voters:
            return True
        last_config_height = chain.last_config_height
        if last_config_height <= max(self._commit.height, chain.base.height):
            return False
        assert last_config_height > chain.base.height, "an uncommitted CONFIG is above base"
        return self._id in chain.config_at(last_config_height - 1).voters

    def _in_lease(self) -> bool:
        """Stickiness: a live leader was heard within E ticks, so votes are not granted."""
        assert self._election_elapsed >= 0
        assert self._leader != self._id or self._role == Role.LEADER
        return (
            self._cfg.check_quorum
            and self._leader is not None
            and self._election_elapsed < self._cfg.election_ticks
        )

    # -- outbox and Ready accumulators ---------------------------------------------------------

    def _send(self, msg: Message) -> None:
        assert msg.from_ == self._id, "messages always leave from this node"
        assert msg.to != self._id, "a node never messages itself"
        self._msgs.append(msg)

    def _insert(self, block: Block) -> bool:
        """Store a block in memory; it goes to disk with the next Ready."""
        assert block.id.term <= self._term, "no block from a future term"
        inserted = self._chain.insert(block)
        if inserted:
            self._new_blocks[block.id] = block
            self._pruned.discard(block.id)
        assert self._chain.contains(block.id)
        return inserted

    def _record_pruned(self, pruned: list[BlockId]) -> None:
        """Deleted blocks: unsent ones are simply forgotten, persisted ones reported."""
        assert all(not self._chain.on_path(i) for i in pruned if i != self._chain.base)
        for block_id in pruned:
            if self._new_blocks.pop(block_id, None) is None:
                self._pruned.add(block_id)
            assert not self._chain.contains(block_id) or block_id == self._chain.base

    # -- transitions shared by every layer -----------------------------------------------------

    def _reset_election_timer(self) -> None:
        """Restart the election clock with a fresh timeout in [E, 2E) from the injected RNG."""
        self._election_elapsed = 0
        election = self._cfg.election_ticks
        self._timeout = self._rng.randrange(election, 2 * election)
        assert election <= self._timeout < 2 * election
        assert self._election_elapsed == 0

    def _reset_leader_state(self) -> None:
        """Forget everything that only a leader of the current term may hold."""
        self._progress = {}
        self._reads = []
        self._reads_waiting = []
        self._transferee = None
        self._heartbeat_elapsed = 0
        self._votes = {}
        assert not self._progress
        assert not self._reads

    def _become_follower(self, term: int, leader: int | None) -> None:
        """Follow `leader` (or nobody yet) in `term`; a new term clears the vote."""
        assert term >= self._term, "terms never go backwards"
        if term > self._term:
            self._term = term
            self._vote = None
        assert leader != self._id, "a follower's leader is another node"
        self._role = Role.FOLLOWER
        self._leader = leader
        self._reset_leader_state()
        self._reset_election_timer()
        assert self._role == Role.FOLLOWER
        assert self._term == term
