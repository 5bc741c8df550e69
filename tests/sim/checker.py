"""The invariants of docs/raft.md §6.2, checked against global history.

The checker sees every Ready a driver persists, every message that leaves a node, every
block applied, and every node after every event that touched it. It keeps the history a
single node cannot: leaders and votes per term over the whole run (across crashes), one
global map of block ids, the global committed sequence and the state-machine digest at
each committed height. Any violation raises InvariantViolation naming the rule.

Invariant 9 (liveness) is checked by the cluster's heal phase, not here.
"""

from __future__ import annotations

import hashlib
import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from zlog.raft.messages import (
    GENESIS,
    Block,
    BlockId,
    BlockKind,
    ConfigState,
    Message,
    ReadState,
    Ready,
    VoteResp,
)
from zlog.raft.rawnode import RawNode


class InvariantViolation(AssertionError):
    """A safety property of section 6 does not hold."""


@dataclass(slots=True)
class BlockRecord:
    """What the whole cluster agrees a block id means, and what follows from it."""

    parent: BlockId | None
    block: Block | None  # None for genesis
    chain_hash: bytes  # H(parent hash, id, kind, payload): equal hashes, equal histories
    config: ConfigState  # the configuration in force once this block is on a path
    config_id: BlockId | None  # the latest CONFIG block at or below this one
    prev_config_id: BlockId | None  # the CONFIG block before that


@dataclass(slots=True)
class NodeView:
    """What the checker remembers about one node between events."""

    commit: BlockId = GENESIS  # last in-memory commit seen while alive
    disk_commit: BlockId = GENESIS  # highest commit ever persisted (survives crashes)
    lead_term: int | None = None  # term it leads, if leader at the last look
    lead_head: BlockId = GENESIS  # its head at the last look while leading
    lead_commit: BlockId = GENESIS  # its commit at the last look while leading
    role: str = "follower"
    term: int = 0
    head: BlockId | None = None  # head at the last look (None right after a restart)
    pruned: list[BlockId] = field(default_factory=list)


class Checker:
    def __init__(
        self, bootstrap: ConfigState, durable: Callable[[int, BlockId], bool] | None = None
    ) -> None:
        self.durable = durable  # (node, block) -> is it on that node's simulated disk
        self.stats: Counter[str] = Counter()
        self.leaders: dict[int, int] = {}
        self.votes: dict[tuple[int, int, bytes], int] = {}
        genesis = BlockRecord(None, None, b"genesis", bootstrap, None, None)
        self.blocks: dict[BlockId, BlockRecord] = {GENESIS: genesis}
        self.committed: dict[int, BlockId] = {0: GENESIS}
        self.max_commit = GENESIS
        self.digests: dict[int, bytes] = {}
        self.views: dict[int, NodeView] = {}
        self.reads: dict[bytes, int] = {}
        self.reads_answered = 0
        self.elections = 0

    def fail(self, rule: str, detail: str) -> None:
        raise InvariantViolation(f"{rule}: {detail}")

    def view(self, node_id: int) -> NodeView:
        view = self.views.get(node_id)
        if view is None:
            view = self.views[node_id] = NodeView()
        return view

    # -- blocks (invariants 4 and 8) ------------------------------------------------------------

    def record_block(self, block: Block) -> None:
        """Invariant 4, Chain Matching: one id, one block, one parent, one history."""
        known = self.blocks.get(block.id)
        if known is not None:
            if known.block != block:
                self.fail("4 Chain Matching", f"two different blocks named {block.id}")
            return
        assert block.parent is not None
        parent = self.blocks.get(block.parent)
        if parent is None:
            self.fail("4 Chain Matching", f"{block.id} arrived before its parent {block.parent}")
            return
        if block.id.height != block.parent.height + 1 or block.id.term < block.parent.term:
            self.fail("4 Chain Matching", f"{block.id} cannot follow {block.parent}")
        config, config_id, prev_config_id = parent.config, parent.config_id, parent.prev_config_id
        if block.kind == BlockKind.CONFIG:
            config = ConfigState.decode(block.payload)
            changed = set(config.voters) ^ set(parent.config.voters)
            if len(changed) > 1:
                self.fail("8 Config", f"{block.id} changes voters {sorted(changed)} at once")
            config_id, prev_config_id = block.id, parent.config_id
        h = hashlib.blake2b(parent.chain_hash, digest_size=16)
        h.update(struct.pack(">QQB", block.id.term, block.id.height, int(block.kind)))
        h.update(block.payload)
        self.blocks[block.id] = BlockRecord(
            block.parent, block, h.digest(), config, config_id, prev_config_id
        )

    def extends(self, descendant: BlockId, ancestor: BlockId) -> bool:
        """Ancestry by the global map, which never forgets a block."""
        current: BlockId | None = descendant
        while current is not None and current.height > ancestor.height:
            current = self.blocks[current].parent
        return current == ancestor

    # -- commits (invariants 5, 6, 7) -----------------------------------------------------------

    def note_committed(self, height: int, block_id: BlockId, who: int) -> None:
        known = self.committed.get(height)
        if known is None:
            self.committed[height] = block_id
            if height > self.max_commit.height:
                self.max_commit = block_id
        elif known != block_id:
            self.fail(
                "6 State Machine Safety",
                f"node {who} commits {block_id} at height {height}, {known} committed there",
            )

    def note_commits(self, node_id: int, node: RawNode) -> None:
        """Record the committed path between the last commit seen and the node's commit."""
        view = self.view(node_id)
        commit = node.commit
        if commit.height < view.commit.height:
            self.fail("7 Local", f"node {node_id} commit went back {view.commit} -> {commit}")
        base = node.base
        if commit.height > view.commit.height:
            if base.height > view.commit.height:
                self.note_committed(base.height, base, node_id)
            for height in range(max(view.commit.height, base.height) + 1, commit.height + 1):
                block_id = node.block_at(height)
                assert block_id is not None
                self.note_committed(height, block_id, node_id)
        view.commit = commit

    # -- per Ready ------------------------------------------------------------------------------

    def observe_persist(self, node_id: int, node: RawNode, ready: Ready) -> None:
        for block in ready.new_blocks:
            self.record_block(block)
        view = self.view(node_id)
        if ready.hard_state is not None:
            commit = ready.hard_state.commit
            if commit.height < view.disk_commit.height:
                self.fail("7 Local", f"node {node_id} persisted commit went back to {commit}")
            view.disk_commit = commit
        view.pruned = list(ready.pruned)
        if ready.snapshot is not None and ready.snapshot.last != GENESIS:
            last = ready.snapshot.last
            self.note_committed(last.height, last, node_id)

    def observe_sent(self, msg: Message) -> None:
        """Invariant 2, Vote safety: one granted vote per voter per term, across restarts.
        A voter is a node id on one data directory: a wiped disk is another voter, whose
        vote the rules of docs/raft.md §4.15 keep from counting as the old one's."""
        if isinstance(msg, VoteResp) and msg.granted and not msg.pre:
            key = (msg.term, msg.from_, msg.dir_id)
            previous = self.votes.setdefault(key, msg.to)
            if previous != msg.to:
                self.fail(
                    "2 Vote Safety",
                    f"node {msg.from_} voted for {previous} and {msg.to} in term {msg.term}",
                )

    def observe_apply(self, node_id: int, block: Block, digest: bytes) -> None:
        """Invariant 6: every applied block is the committed one at its height."""
        height = block.id.height
        if self.committed.get(height) != block.id:
            self.fail(
                "6 State Machine Safety",
                f"node {node_id} applies {block.id}, committed is {self.committed.get(height)}",
            )
        known = self.digests.setdefault(height, digest)
        if known != digest:
            self.fail("6 State Machine Safety", f"node {node_id} diverged at height {height}")

    def observe_restore(self, node_id: int, last: BlockId, digest: bytes) -> None:
        if self.committed.get(last.height) != last:
            self.fail("6 State Machine Safety", f"node {node_id} restored uncommitted {last}")
        known = self.digests.get(last.height)
        if known is not None and known != digest:
            self.fail("6 State Machine Safety", f"snapshot at {last} disagrees with history")

    def read_requested(self, ctx: bytes) -> None:
        self.reads[ctx] = self.max_commit.height

    def observe_read(self, node_id: int, read: ReadState) -> None:
        """ReadIndex linearizability: the read point covers every commit before the request."""
        floor = self.reads.pop(read.ctx)
        if read.index.height < floor:
            self.fail(
                "ReadIndex", f"node {node_id} answers at {read.index}, {floor} was committed"
            )
        if self.committed.get(read.index.height) != read.index:
            self.fail("ReadIndex", f"node {node_id} answers at uncommitted {read.index}")
        self.reads_answered += 1

    # -- per event ------------------------------------------------------------------------------

    def observe_node(self, node_id: int, node: RawNode) -> None:
        """Everything local to one node after an event that touched it."""
        self.note_commits(node_id, node)
        if node.odd_messages:
            self.fail("Protocol", f"node {node_id} received a message a correct peer never sends")
        head, commit = node.head, node.commit
        if head.term > node.term:
            self.fail("7 Local", f"node {node_id} head {head} is ahead of its term {node.term}")
        if commit.height > node.base.height and node.block_at(commit.height) != commit:
            self.fail("7 Local", f"node {node_id} head {head} does not extend commit {commit}")
        if node.applied.height > commit.height:
            self.fail("7 Local", f"node {node_id} applied {node.applied} past commit {commit}")
        view = self.view(node_id)
        self._check_head_moves(node_id, node, view)
        self._check_pruned(node_id, node)
        self._check_leader(node_id, node)
        self._check_config(node_id, node)
        view.role, view.term, view.head = node.role, node.term, node.head

    def _check_head_moves(self, node_id: int, node: RawNode, view: NodeView) -> None:
        """Fork choice (section 4 rule 3): head never falls back onto its own ancestor."""
        old = view.head
        if old is None or old == node.head:
            return
        self.stats["head moves"] += 1
        if node.head.height < old.height:
            self.stats["head moves to a lower branch"] += 1
            if node.head.height >= node.base.height and self.extends(old, node.head):
                self.fail("7 Local", f"node {node_id} head regressed {old} -> {node.head}")

    def _check_pruned(self, node_id: int, node: RawNode) -> None:
        view = self.view(node_id)
        for block_id in view.pruned:
            if block_id.height <= node.base.height:
                continue  # compacted into the snapshot
            if node.block_at(block_id.height) == block_id:
                self.fail("7 Local", f"node {node_id} pruned {block_id} on its path")
            if self.committed.get(block_id.height) == block_id:
                self.fail("7 Local", f"node {node_id} pruned committed {block_id}")
            if self.extends(block_id, node.commit):
                self.fail("7 Local", f"node {node_id} pruned {block_id} extending commit")
        view.pruned = []

    def _check_leader(self, node_id: int, node: RawNode) -> None:
        """Invariants 1, 3 and 5."""
        view = self.view(node_id)
        if node.role != "leader":
            view.lead_term = None
            return
        term = node.term
        elected = self.leaders.setdefault(term, node_id)
        if elected != node_id:
            self.fail("1 Election Safety", f"nodes {elected} and {node_id} both lead term {term}")
        if view.lead_term == term:
            old = view.lead_head
            if node.block_at(old.height) != old and old.height > node.base.height:
                self.fail("3 Leader Append-Only", f"leader {node_id} left {old} for {node.head}")
            if node.commit != view.lead_commit:
                self._check_leader_commit(node_id, node)
        else:
            self.elections += 1
            self._check_completeness(node_id, node)
        view.lead_term, view.lead_head, view.lead_commit = term, node.head, node.commit

    def _check_leader_commit(self, node_id: int, node: RawNode) -> None:
        """Commit rule (Raft 5.4.2): a leader commits only a block of its own term, and only
        once a quorum of the voters at its head holds that block on disk."""
        commit = node.commit
        self.stats["leader commits"] += 1
        if commit.term != node.term:
            self.fail("Commit rule", f"leader {node_id} of term {node.term} committed {commit}")
        if self.durable is None:
            return
        voters = node.config.voters
        holders = [v for v in voters if self.durable(v, commit)]
        if 2 * len(holders) <= len(voters):
            self.fail(
                "Commit rule",
                f"leader {node_id} committed {commit} held on disk by {holders} of {voters}",
            )

    def _check_completeness(self, node_id: int, node: RawNode) -> None:
        """Invariant 5: a new leader's head extends the highest block committed anywhere."""
        top = self.max_commit
        if top.height > node.base.height:
            if node.block_at(top.height) != top:
                self.fail(
                    "5 Leader Completeness",
                    f"node {node_id} leads term {node.term} with head {node.head} lacking {top}",
                )
        elif self.committed.get(node.base.height, node.base) != node.base:
            self.fail("5 Leader Completeness", f"node {node_id} base {node.base} not committed")

    def _check_config(self, node_id: int, node: RawNode) -> None:
        """Invariant 8: at most one uncommitted CONFIG block on any node's path."""
        record = self.blocks.get(node.head)
        if record is None or record.prev_config_id is None:
            return
        older = record.prev_config_id
        if self.committed.get(older.height) != older:
            self.fail(
                "8 Config",
                f"node {node_id} path holds {record.config_id} while {older} is uncommitted",
            )
